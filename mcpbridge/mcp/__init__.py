"""A synchronous, thread-based layer for Model Context Protocol 2026-07-28: messages, transports, peers."""
