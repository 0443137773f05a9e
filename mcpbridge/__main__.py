"""``python -m mcpbridge`` runs the ``mcp-bridge-vscode`` command."""

from __future__ import annotations

from mcpbridge.vscode.main import main

if __name__ == "__main__":
    main()
