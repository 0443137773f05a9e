"""mcpbridge: serve a Model Context Protocol 2026-07-28 server to a 2025-11-25 client.

The ``mcp-bridge-vscode`` executable speaks MCP 2025-11-25 on its standard input
and output, the way VS Code expects a local server to, and talks MCP 2026-07-28
to the real server: a child process over stdio or a remote Streamable HTTP URL.
"""

__version__ = "0.1.0"
