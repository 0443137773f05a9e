"""Example servers built on :mod:`mcpbridge`; copy one to start your own.

* :mod:`mcpbridge.examples.notes_server`: a notes server that serves VS Code
  (MCP 2025-11-25) and MCP 2026-07-28 clients on the same stdio, through
  :func:`mcpbridge.embed.serve_stdio_auto`.
"""
