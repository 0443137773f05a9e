"""The bridge: a 2025-11-25 server towards VS Code in front of a 2026-07-28 client towards the real server."""
