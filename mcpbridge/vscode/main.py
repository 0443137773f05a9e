"""The entry point of an installation made before the command line moved to :mod:`.cli`.

The command form itself is :mod:`.serve_command`.
"""

from __future__ import annotations


def main() -> None:
    """Run the command line of :mod:`.cli`."""
    from .cli import main as cli_main

    cli_main()
