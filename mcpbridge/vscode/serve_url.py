"""The URL form: serve VS Code on stdio in front of a Streamable HTTP server.

``mcp-bridge-vscode [options] <url>``. Each ``initialize`` of VS Code makes a new
:class:`~mcpbridge.mcp.transports.http.HttpTransport`; all of them share one TLS context.
A URL upstream never stops the bridge: a failed request fails alone, and the
bridge exits with 0 at the end of stdin.

The front end answers ``ping`` before anything of the upstream side loads: the
TLS context is read at the start only to check ``--ca-file`` (else at the first
TLS connection), and the token store begins to open at the first ``initialize``,
on its own thread while the HTTP client loads and the first request is prepared;
that request waits for it (a store that does not open then fails that request,
with the line "the token store did not open" in the log). Only the options of the store that can
be checked without opening it stop the bridge at the start.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from . import settings as args

if TYPE_CHECKING:
    import ssl

    from ..mcp.transports import Transport

logger = logging.getLogger("mcpbridge.vscode")

#: The exit code for a ``--ca-file`` that the bridge cannot use.
EXIT_BAD_CA_FILE = 2
#: The exit code for token store options that cannot work.
EXIT_TOKEN_STORE = 2


class SharedContext:
    """The one TLS context of the process, made at its first use (the trust store of the system
    costs time and memory that a plain ``http`` upstream never needs).

    :param context: a context made already (from ``--ca-file``), or None.
    """

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context
        self._lock = threading.Lock()

    def __call__(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                from ..mcp.transports.http import tls_context

                self._context = tls_context()
            return self._context


def serve_url(upstream: args.UrlUpstream, serving: args.Serving, log_level: str) -> int:
    """Serve VS Code on stdio in front of the upstream URL; return the exit code."""
    from ..bridge.front.frontend import Frontend
    from ..bridge.rules.translate import IconRule
    from ..bridge.sessions.era import LegacyTransports
    from ..bridge.sessions.upstream import UrlTransport, transport_connector, url_transports
    from .serving import announce, frontend_options, serve

    announce(upstream, serving, log_level)
    url = upstream.url
    context = SharedContext()
    if upstream.ca_file is not None:
        from ..mcp.transports.http import CaFileError, tls_context

        try:
            context = SharedContext(tls_context(upstream.ca_file))
        except CaFileError as exc:
            logger.error("cannot use the CA certificates of --ca-file: %s", exc.detail, exc_info=exc)
            logger.error('see "%s --help"', args.PROGRAM)
            return EXIT_BAD_CA_FILE
    headers = [(header.name, header.value) for header in upstream.headers]
    oauth = None
    if upstream.sign_in is not None:
        # The sign-in (no static authorization header): the token store opens at the first need.
        from ..oauth.errors import StoreOpenError
        from ..oauth.session import start_oauth

        try:
            oauth = start_oauth(upstream.sign_in_options(), ssl_context=context, env=os.environ)
        except StoreOpenError as exc:
            logger.error("the token store did not open: %s", exc.detail, exc_info=exc)
            return EXIT_TOKEN_STORE
    authorizer = oauth.authorizer if oauth is not None else None

    # The second serves a 2025-era server (module passthrough): the Streamable HTTP of 2025-11-25.
    make_transport, make_legacy_transport = url_transports(
        url,
        headers=headers,
        max_response_bytes=upstream.max_response_bytes,
        ssl_context=context,
        authorizer=authorizer,
        transport=UrlTransport(upstream.transport),
    )

    options = dataclasses.replace(frontend_options(upstream, serving), icon_rule=IconRule.DATA_ONLY)
    connect = oauth.connector(make_transport) if oauth is not None else transport_connector(make_transport)
    def make_first() -> Transport:
        # The first request is the client's initialize: the store opens while it is prepared.
        if oauth is not None:
            oauth.authorizer.store.open_early()
        return make_legacy_transport()

    legacy = LegacyTransports(make_first, sign_in=authorizer)
    frontend = Frontend(sys.stdin.buffer, sys.stdout.buffer, connect, options, legacy=legacy)
    if oauth is not None:
        from ..bridge.front import consent

        consent.attach(oauth, frontend)
        # Another sign-in can be another account: the lists of the old one must not be shown.
        oauth.authorizer.on_signed_in = lambda: frontend.lists.clear("a new sign-in")
    return serve(frontend)
