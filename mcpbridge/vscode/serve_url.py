"""The URL form: serve VS Code on stdio in front of a Streamable HTTP server.

``mcp-bridge-vscode [options] <url>``. Each ``initialize`` of VS Code makes a new
:class:`~mcpbridge.mcp.http.HttpTransport`; all of them share one TLS context,
read once at the start. A URL upstream never stops the bridge: a failed request
fails alone, and the bridge exits with 0 at the end of stdin.
"""

from __future__ import annotations

import logging
import sys

from .. import __version__
from . import args

logger = logging.getLogger("mcpbridge.vscode")

#: The exit code for a ``--ca-file`` that the bridge cannot use.
EXIT_BAD_CA_FILE = 2


def serve_url(settings: args.Settings) -> int:
    """Serve VS Code on stdio in front of the upstream URL of ``settings``; return the exit code."""
    from ..bridge.frontend import Frontend, Options, Timeouts
    from ..bridge.translate import IconRule
    from ..bridge.upstream import transport_connector
    from ..mcp.http import CaFileError, HttpTransport, tls_context
    from .main import serve

    assert settings.url is not None
    url = settings.url
    try:
        context = tls_context(settings.ca_file)
    except CaFileError as exc:
        logger.error("cannot use the CA certificates of --ca-file: %s", exc.detail)
        return EXIT_BAD_CA_FILE
    headers = [(header.name, header.value) for header in settings.headers]

    def make_transport() -> HttpTransport:
        return HttpTransport(
            url,
            headers=headers,
            max_response_bytes=settings.max_response_bytes,
            ssl_context=context,
        )

    options = Options(
        fallback_name=settings.name,
        version=__version__,
        max_line_bytes=settings.max_line_bytes,
        timeouts=Timeouts(discover=settings.discover_timeout),
        icon_rule=IconRule.DATA_ONLY,
    )
    connect = transport_connector(make_transport)
    return serve(Frontend(sys.stdin.buffer, sys.stdout.buffer, connect, options))
