"""The command form: serve VS Code on stdio in front of an upstream command.

``mcp-bridge-vscode [options] -- <command> [args...]``. The bridge exits with 0 at
the end of stdin, and with 1 when the upstream command stops.
"""

from __future__ import annotations

import sys

from .. import __version__
from . import settings as args
from .serving import serve


def serve_command(settings: args.Settings) -> int:
    """Serve VS Code on stdio in front of an upstream command."""
    from ..bridge.frontend import Frontend, Options, Timeouts
    from ..bridge.passthrough import StdioUpstream

    options = Options(
        fallback_name=settings.name,
        version=__version__,
        max_line_bytes=settings.max_line_bytes,
        timeouts=Timeouts(discover=settings.discover_timeout),
        protocol=settings.protocol,
        # A child on stdio takes a request at once (its send queues it): the reader sends it.
        forward_on_reader=True,
    )
    # One upstream for both eras: a 2025-era child keeps running after server/discover.
    upstream = StdioUpstream(settings.command, max_line_bytes=settings.max_line_bytes)
    frontend = Frontend(sys.stdin.buffer, sys.stdout.buffer, upstream.connect, options, legacy=upstream)
    return serve(frontend, keep_freed_memory=True)
