"""How the bridge reaches its upstream server: a child process, a URL, or the same process.

Each ``*_connector`` function here returns a ``connect`` callable for
:class:`~mcpbridge.bridge.frontend.Frontend`: it takes the client's ``clientInfo`` and
the callback for notifications that belong to no request, and returns a started
:class:`~mcpbridge.mcp.client.Client`. :func:`url_transports` makes the transports
of a URL, for either era.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..mcp.client import Client
from ..mcp.jsonrpc import Notification
from ..mcp.transport import Transport

if TYPE_CHECKING:
    import ssl

    from ..mcp.http import Authorizer, HttpTransport
    from ..mcp.legacy_http import LegacyHttpTransport

#: Nesting of a message of the upstream server: deep schemas must survive.
UPSTREAM_MAX_DEPTH = 200

Connect = Callable[[dict[str, Any], Callable[[Notification], None]], Client]


def _write_child_stderr(line: str) -> None:
    """Pass one stderr line of the child to our stderr unchanged; VS Code shows both."""
    try:
        sys.stderr.write(line if line.endswith("\n") else line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def stdio_connector(argv: Sequence[str], *, max_line_bytes: int) -> Connect:
    """Start ``argv`` as the upstream server on each connect."""

    def connect(client_info: dict[str, Any], on_notification: Callable[[Notification], None]) -> Client:
        from ..mcp.stdio import StdioChildTransport

        transport = StdioChildTransport(
            list(argv), max_line_bytes=max_line_bytes, stderr_sink=_write_child_stderr
        )
        return _start(transport, client_info, on_notification)

    return connect


def transport_connector(make_transport: Callable[[], Transport]) -> Connect:
    """Use a transport that the caller makes (the memory link, HTTP)."""

    def connect(client_info: dict[str, Any], on_notification: Callable[[Notification], None]) -> Client:
        return _start(make_transport(), client_info, on_notification)

    return connect


def url_transports(
    url: str,
    *,
    headers: Sequence[tuple[str, str]],
    max_response_bytes: int,
    ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
    authorizer: Authorizer | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Callable[[], Transport], Callable[[], Transport]]:
    """The two makers of a transport to ``url``: Streamable HTTP of 2026-07-28 and of 2025-11-25.

    Both get the same options (those of :class:`~mcpbridge.mcp.http.HttpTransport`); the
    HTTP modules load at the first call, not before.
    """

    def make(legacy: bool) -> Transport:
        kind: type[HttpTransport | LegacyHttpTransport]
        if legacy:
            from ..mcp.legacy_http import LegacyHttpTransport

            kind = LegacyHttpTransport
        else:
            from ..mcp.http import HttpTransport

            kind = HttpTransport
        return kind(
            url,
            headers=headers,
            max_response_bytes=max_response_bytes,
            ssl_context=ssl_context,
            authorizer=authorizer,
            env=env,
        )

    return functools.partial(make, False), functools.partial(make, True)


def _start(
    transport: Transport, client_info: dict[str, Any], on_notification: Callable[[Notification], None]
) -> Client:
    client = Client(
        transport,
        client_info=client_info,
        max_depth=UPSTREAM_MAX_DEPTH,
        on_notification=on_notification,
    )
    client.start()
    return client
