"""``python -m mcpbridge`` runs the ``mcp-bridge-vscode`` command."""

from __future__ import annotations

from mcpbridge.vscode.cli import main

if __name__ == "__main__":
    main()
