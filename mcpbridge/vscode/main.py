"""The executable ``mcp-bridge-vscode``: command line, logging, exit codes and the watchdog.

Exit codes: 0 at the end of stdin (also before initialize, and after a failure
of an upstream URL); 1 after the loss of the upstream command or an internal
error; 2 for arguments that are not valid.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from .. import __version__, log
from . import settings as args
from .serving import exit_now, serve

logger = logging.getLogger("mcpbridge.vscode")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit the process with its code."""
    code = run(list(sys.argv[1:] if argv is None else argv))
    exit_now(code)


def run(argv: list[str]) -> int:
    try:
        parsed = args.parse(argv, os.environ)
    except args.ArgError as exc:
        log.write_line("vscode", "error", exc.diagnostic)
        sys.stderr.write("\n" + args.USAGE)
        sys.stderr.flush()
        return exc.exit_code
    if isinstance(parsed, args.ShowHelp):
        sys.stdout.write(args.USAGE)
        sys.stdout.flush()
        return 0
    if isinstance(parsed, args.ShowVersion):
        sys.stdout.write(args.version_line(__version__))
        sys.stdout.flush()
        return 0
    log.configure(parsed.log_level)
    for warning in parsed.warnings:
        logger.warning("%s", warning)
    if parsed.form is args.Form.COMMAND:
        return serve_command(parsed)
    if parsed.form is args.Form.URL:
        from .serve_url import serve_url

        return serve_url(parsed)
    if parsed.form is args.Form.LOGOUT:
        from .logout import logout

        return logout(parsed)
    from .check import check

    return check(parsed)


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
