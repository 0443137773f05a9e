"""The URL form: serve VS Code on stdio in front of a Streamable HTTP server.

``mcp-bridge-vscode [options] <url>``. Each ``initialize`` of VS Code makes a new
:class:`~mcpbridge.mcp.http.HttpTransport`; all of them share one TLS context,
read once at the start. A URL upstream never stops the bridge: a failed request
fails alone, and the bridge exits with 0 at the end of stdin.
"""

from __future__ import annotations

import logging
import os
import sys

from .. import __version__
from . import args

logger = logging.getLogger("mcpbridge.vscode")

#: The exit code for a ``--ca-file`` that the bridge cannot use.
EXIT_BAD_CA_FILE = 2
#: The exit code for a token store that does not open.
EXIT_TOKEN_STORE = 2


def serve_url(settings: args.Settings) -> int:
    """Serve VS Code on stdio in front of the upstream URL of ``settings``; return the exit code."""
    from ..bridge.frontend import Frontend, Options, Timeouts
    from ..bridge.passthrough import LegacyTransports
    from ..bridge.translate import IconRule
    from ..bridge.upstream import transport_connector
    from ..mcp.http import CaFileError, HttpTransport, tls_context
    from ..mcp.legacy_http import LegacyHttpTransport
    from .main import serve

    assert settings.url is not None
    url = settings.url
    try:
        context = tls_context(settings.ca_file)
    except CaFileError as exc:
        logger.error("cannot use the CA certificates of --ca-file: %s", exc.detail)
        return EXIT_BAD_CA_FILE
    headers = [(header.name, header.value) for header in settings.headers]
    oauth = None
    if settings.registration is not None:
        # The sign-in (no static authorization header): the token store opens now.
        from ..oauth.authorizer import start_oauth
        from ..oauth.errors import StoreOpenError

        try:
            oauth = start_oauth(settings, ssl_context=context, env=os.environ)
        except StoreOpenError as exc:
            logger.error("the token store did not open: %s", exc.detail)
            return EXIT_TOKEN_STORE
    authorizer = oauth.authorizer if oauth is not None else None

    def make_transport() -> HttpTransport:
        return HttpTransport(
            url,
            headers=headers,
            max_response_bytes=settings.max_response_bytes,
            ssl_context=context,
            authorizer=authorizer,
        )

    def make_legacy_transport() -> LegacyHttpTransport:
        # A 2025-era server (module passthrough): the Streamable HTTP of 2025-11-25.
        return LegacyHttpTransport(
            url,
            headers=headers,
            max_response_bytes=settings.max_response_bytes,
            ssl_context=context,
            authorizer=authorizer,
        )

    options = Options(
        fallback_name=settings.name,
        version=__version__,
        max_line_bytes=settings.max_line_bytes,
        timeouts=Timeouts(discover=settings.discover_timeout),
        icon_rule=IconRule.DATA_ONLY,
        protocol=settings.protocol,
    )
    connect = oauth.connector(make_transport) if oauth is not None else transport_connector(make_transport)
    legacy = LegacyTransports(make_legacy_transport, sign_in=authorizer)
    frontend = Frontend(sys.stdin.buffer, sys.stdout.buffer, connect, options, legacy=legacy)
    if oauth is not None:
        oauth.attach(frontend)
    return serve(frontend)
