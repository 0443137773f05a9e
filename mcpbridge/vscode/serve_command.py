"""The command form: serve VS Code on stdio in front of an upstream command.

``mcp-bridge-vscode [options] -- <command> [args...]``. The bridge exits with 0 at
the end of stdin, and with 1 when the upstream command stops.
"""

from __future__ import annotations

import dataclasses
import sys

from . import settings as args
from .serving import announce, frontend_options, serve


def serve_command(upstream: args.CommandUpstream, serving: args.Serving, log_level: str) -> int:
    """Serve VS Code on stdio in front of an upstream command."""
    announce(upstream, serving, log_level)
    from ..bridge.front.frontend import Frontend
    from ..bridge.sessions.childshare import StdioUpstream

    # A child on stdio takes a request at once (its send queues it): the reader sends it.
    options = dataclasses.replace(frontend_options(upstream, serving), forward_on_reader=True)
    # One upstream for both eras: a 2025-era child keeps running after server/discover.
    child = StdioUpstream(upstream.command, max_line_bytes=upstream.max_line_bytes)
    frontend = Frontend(sys.stdin.buffer, sys.stdout.buffer, child.connect, options, legacy=child)
    return serve(frontend)
