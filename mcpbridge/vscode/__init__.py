"""The ``mcp-bridge-vscode`` command: its arguments and its entry point."""
