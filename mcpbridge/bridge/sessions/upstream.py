"""How the bridge reaches its upstream server: a child process, a URL, or the same process.

Each ``*_connector`` function here returns a ``connect`` callable for
:class:`~mcpbridge.bridge.front.frontend.Frontend`: it takes the client's ``clientInfo`` and
the callback for notifications that belong to no request, and returns a started
:class:`~mcpbridge.mcp.client.Client`. :func:`url_transports` makes the transports
of a URL, for either era.

A 2025-era server at a URL speaks Streamable HTTP (2025-03-26 and later) or the older
HTTP+SSE transport (2024-11-05). With the transport ``auto``, the bridge posts
``initialize`` to the URL as Streamable HTTP asks; when the server refuses that
``POST`` with 400, 404 or 405, the bridge opens the HTTP+SSE stream on the same URL
and sends ``initialize`` there (the "Backwards compatibility" of the revision
2025-03-26 for clients). The transport that worked is remembered
(:attr:`LegacyUrl.found`): each later transport to that server uses it at once.
"""

from __future__ import annotations

import enum
import functools
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...mcp.cancel import CancelToken
from ...mcp.client import DEFAULT_MAX_DEPTH, Client, Connect
from ...mcp.jsonrpc import Message, Notification, Request
from ...mcp.transports import OnClosed, OnFrameError, OnMessage, PeerForm, Transport
from ...mcp.transports.httpwire import HttpStatusError

if TYPE_CHECKING:
    import ssl

    from ...mcp.transports.http import Authorizer, HttpTransport
    from ...mcp.transports.legacy_http import LegacyHttpTransport
    from ...mcp.transports.sse_transport import SseTransport

log = logging.getLogger("mcpbridge.bridge")



class UrlTransport(str, enum.Enum):
    """``--transport``: how a 2025-era server at a URL is reached."""

    #: Streamable HTTP, and HTTP+SSE when the server refuses it (module docstring).
    AUTO = "auto"
    #: The Streamable HTTP of 2025-03-26 and later.
    STREAMABLE_HTTP = "streamable-http"
    #: The HTTP+SSE transport of 2024-11-05.
    HTTP_SSE = "sse"

#: The statuses of a refused ``POST`` of ``initialize`` that send the bridge to HTTP+SSE.
SSE_FALLBACK_STATUSES = frozenset({400, 404, 405})


def _write_child_stderr(line: str) -> None:
    """Pass one stderr line of the child to our stderr unchanged; VS Code shows both."""
    try:
        sys.stderr.write(line if line.endswith("\n") else line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


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
    transport: UrlTransport = UrlTransport.AUTO,
) -> tuple[Callable[[], Transport], LegacyUrl]:
    """The two makers of a transport to ``url``: Streamable HTTP of 2026-07-28, and a 2025-era one.

    The second is a :class:`LegacyUrl`: Streamable HTTP of 2025-11-25 or HTTP+SSE of
    2024-11-05, as ``transport`` says (``auto``: the one that works). All get the same
    options (those of :class:`~mcpbridge.mcp.transports.http.HttpTransport`); the HTTP modules load
    at the first call, not before.
    """

    def make(legacy: UrlTransport | None) -> Transport:
        """A transport of the 2025 era of the kind ``legacy``; ``None``: of 2026-07-28."""
        kind: type[HttpTransport | LegacyHttpTransport | SseTransport]
        if legacy is UrlTransport.STREAMABLE_HTTP:
            from ...mcp.transports.legacy_http import LegacyHttpTransport

            kind = LegacyHttpTransport
        elif legacy is UrlTransport.HTTP_SSE:
            from ...mcp.transports.sse_transport import SseTransport

            kind = SseTransport
        else:
            from ...mcp.transports.http import HttpTransport

            kind = HttpTransport
        return kind(
            url,
            headers=headers,
            max_response_bytes=max_response_bytes,
            ssl_context=ssl_context,
            authorizer=authorizer,
            env=env,
        )

    legacy = LegacyUrl(
        functools.partial(make, UrlTransport.STREAMABLE_HTTP),
        functools.partial(make, UrlTransport.HTTP_SSE),
        setting=transport,
    )
    return functools.partial(make, None), legacy


class LegacyUrl:
    """The maker of a transport to a 2025-era server at a URL; it remembers the one that works.

    ``setting`` is ``--transport``. With :attr:`UrlTransport.AUTO`, the first
    transport tries Streamable HTTP and falls back to HTTP+SSE (module docstring); once one
    of them carried ``initialize``, each later transport is of that kind at once.
    """

    def __init__(
        self, streamable: Callable[[], Transport], sse: Callable[[], Transport], *, setting: UrlTransport
    ) -> None:
        self._streamable = streamable
        self._sse = sse
        self.setting = setting
        self._lock = threading.Lock()
        self._found: UrlTransport | None = None

    @property
    def found(self) -> UrlTransport | None:
        """The transport that carried an ``initialize`` (never ``AUTO``), if one did."""
        with self._lock:
            return self._found

    def _record(self, kind: UrlTransport) -> None:
        with self._lock:
            self._found = kind

    def __call__(self) -> Transport:
        kind = self.found or self.setting
        if kind is UrlTransport.HTTP_SSE:
            return _Recording(self._sse(), kind, self._record)
        if kind is UrlTransport.STREAMABLE_HTTP:
            return _Recording(self._streamable(), kind, self._record)
        return _SseFallback(self._streamable(), self._sse, self._record)


class _Recording(Transport):
    """A transport of a known kind; it records the kind once it carried ``initialize``.

    Subclasses may replace :attr:`_inner` before the first ``initialize`` went out.
    """

    def __init__(
        self, inner: Transport, kind: UrlTransport, record: Callable[[UrlTransport], None]
    ) -> None:
        self._inner = inner
        self._kind = kind
        self._record = record
        self._callbacks: tuple[OnMessage, OnFrameError, OnClosed] | None = None

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None:
        self._callbacks = (on_message, on_frame_error, on_closed)
        self._start(self._inner)

    def _start(self, inner: Transport) -> None:
        assert self._callbacks is not None
        on_message, on_frame_error, on_closed = self._callbacks

        def closed(error: Any) -> None:
            # The end of a transport that was replaced is no end of the connection.
            if inner is self._inner:
                on_closed(error)

        inner.start(on_message, on_frame_error, closed)

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        self._inner.send(message, cancel=cancel)
        if isinstance(message, Request) and message.method == "initialize":
            self._record(self._kind)

    def close(self, grace: float = 2.0) -> None:
        self._inner.close(grace)

    def kill(self) -> None:
        kill = getattr(self._inner, "kill", None)
        if kill is not None:
            kill()

    def rest(self) -> None:
        self._inner.rest()

    @property
    def gone(self) -> bool:
        return self._inner.gone

    @property
    def form(self) -> PeerForm:
        return self._inner.form

    @property
    def exit_status(self) -> str | None:
        return self._inner.exit_status


class _SseFallback(_Recording):
    """Streamable HTTP first; a refused ``POST`` of ``initialize`` switches to HTTP+SSE."""

    def __init__(
        self, first: Transport, sse: Callable[[], Transport], record: Callable[[UrlTransport], None]
    ) -> None:
        super().__init__(first, UrlTransport.STREAMABLE_HTTP, record)
        self._make_sse = sse

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        initializing = isinstance(message, Request) and message.method == "initialize"
        if self._kind is UrlTransport.HTTP_SSE or not initializing:
            super().send(message, cancel=cancel)
            return
        try:
            super().send(message, cancel=cancel)
        except HttpStatusError as exc:
            if exc.http_status not in SSE_FALLBACK_STATUSES:
                raise
            log.info(
                "the upstream server refused initialize over Streamable HTTP (HTTP status %d): "
                "the bridge tries the HTTP+SSE transport of MCP 2024-11-05",
                exc.http_status,
            )
            old = self._inner
            self._inner = self._make_sse()
            self._kind = UrlTransport.HTTP_SSE
            old.close(0.0)
            self._start(self._inner)
            super().send(message, cancel=cancel)


def _start(
    transport: Transport, client_info: dict[str, Any], on_notification: Callable[[Notification], None]
) -> Client:
    client = Client(
        transport,
        client_info=client_info,
        max_depth=DEFAULT_MAX_DEPTH,
        on_notification=on_notification,
    )
    client.start()
    return client
