"""The HTTP+SSE client transport of revision 2024-11-05, for an old server at a URL.

Theory of operation
-------------------

Before Streamable HTTP (2025-03-26), a server at a URL spoke the HTTP+SSE transport:
the client opens a ``GET`` stream on the URL of the server; the first event of the
stream, ``endpoint``, gives the URL that the client posts each of its messages to, and
every message of the server (the answers to the client's requests too) arrives as a
``message`` event on that same stream. The session of the server lives as long as the
stream. The bridge reaches such a server when its URL refuses the ``POST`` of
``initialize`` (see :mod:`mcpbridge.bridge.sessions.upstream`), as the revision 2025-03-26 tells
clients to do ("Backwards compatibility"), or when the user chooses the transport.

* :meth:`SseTransport.start` starts the thread ``mcpbridge-sse-stream``, which opens the
  ``GET`` stream and reads it until its end. Each ``message`` event goes to
  ``on_message``; one that is not a valid message goes to ``on_frame_error``.
* The first ``endpoint`` event must come within :data:`ENDPOINT_WAIT_FACTOR` times the
  connect time limit; else :class:`NoEndpoint`. Its URL, relative to the URL of the
  server, must be of the same origin (scheme, host and port): another origin could
  send the session elsewhere, thus :class:`ForeignEndpoint`. A later ``endpoint`` event
  changes nothing.
* A **request** is a ``POST`` to the endpoint on the thread that calls :meth:`send`;
  the server accepts it (``202``) and its answer comes on the stream. A
  **notification** or an **answer** to a request of the server goes into a queue that
  the thread ``mcpbridge-sse-poster`` posts in order, so :meth:`send` never waits for
  the network for them; a request waits until the messages queued before it went out.
* A 401 or 403 goes to the authorizer, and the message goes once more when it handled
  it; a 429 or 503 with a short ``Retry-After`` is waited for once, as in :mod:`.http`.
* An event over the limit of the transport (``--max-response-bytes``) ends the stream
  with :class:`~.errors.ResponseTooLarge`, as on the other HTTP transports.
* When the stream ends, the session of the server ends: the transport closes,
  ``on_closed`` gets :class:`StreamEnded` (or the :class:`~.errors.ResponseTooLarge` of
  an event over the limit, so that the requests that wait fail with it), and the server
  is :attr:`~SseTransport.gone`, as a command that exited. :meth:`close` posts what is
  queued (for at most its grace), then ends the stream.

The wire is that of the other HTTP transports (:mod:`.httppool`: urllib3, the TLS
context, the proxy rules, the user's and the authorizer's headers, a request sent at
most once): one wire for the stream and one for the endpoint, with the same options.
No log line and no error holds a URL, a header value or a token.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing
from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin, urlsplit, urlunsplit

from ..cancel import CancelToken
from ..errors import Cancelled, Closed, InvalidResponse, McpError, ResponseTooLarge, TransportFailed, fresh
from ..jsonrpc import FrameError, Message, Notification, Request
from . import OnFrameError, OnMessage
from .httpbase import json_body
from .httpwire import (
    METHOD_READ_LIMITS,
    Exchange,
    OnceTlsContext,
    event_message,
    media_type,
    status_error,
    tls_context,
)
from .queued import QueuedTransportBase, logged_name
from .sse import SseParser

if TYPE_CHECKING:
    import ssl

    from .httppool import Wire, WireResponse

__all__ = ["ForeignEndpoint", "NoEndpoint", "SseTransport", "StreamEnded"]

log = logging.getLogger("mcpbridge.http")

#: The wait for the ``endpoint`` event, in connect time limits: one for the connection,
#: one for the first event.
ENDPOINT_WAIT_FACTOR: Final = 2.0
#: The idle read limit of the stream: it carries the answers of every method, thus the
#: longest limit of a method.
STREAM_READ_LIMIT: Final = max(METHOD_READ_LIMITS.values())
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class NoEndpoint(TransportFailed):
    """The stream of the server gave no ``endpoint`` event in time."""


class ForeignEndpoint(InvalidResponse):
    """The ``endpoint`` event names a URL of another origin than the URL of the server."""


class StreamEnded(TransportFailed):
    """The stream of the server ended, and with it the session."""


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        return (scheme, "", None)
    return (scheme, (parts.hostname or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme))


def endpoint_url(server_url: str, data: str) -> str:
    """The URL of the ``endpoint`` event ``data``, relative to ``server_url``, without a fragment.

    Raises:
        ForeignEndpoint: the URL is of another origin (scheme, host, port) than ``server_url``.
    """
    joined = urljoin(server_url, data.strip())
    if _origin(joined) != _origin(server_url) or not _origin(server_url)[1]:
        raise ForeignEndpoint("the endpoint event of the upstream server names another origin")
    parts = urlsplit(joined)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", parts.query, ""))


class SseTransport(QueuedTransportBase):
    """A client transport to one HTTP+SSE server (2024-11-05); see the module docstring.

    The parameters are those of :class:`~.httpbase.HttpTransportBase`; ``url`` is the URL
    of the stream (often ``.../sse``).

    ``send`` raises the errors of :class:`~.httpbase.HttpTransportBase`, and
    :class:`NoEndpoint` or :class:`ForeignEndpoint` before the endpoint is known, or the
    error of the stream when it failed before its ``endpoint`` event (an
    :class:`~.httpwire.HttpStatusError` when it did not open).

    Raises:
        ConnectFailed: the URL is not http or https, or a proxy variable has a scheme
            other than http and https.
        CaFileError: ``ca_file`` cannot be used.
    """

    PASS_OTHER_ANSWERS = True
    POSTER = "mcpbridge-sse-poster"

    def _tls(
        self, ca_file: str | None, ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None
    ) -> tuple[str | None, ssl.SSLContext | Callable[[], ssl.SSLContext] | None]:
        if ssl_context is None:
            # Both wires share one context (the trust store of the system costs time and memory).
            ssl_context = tls_context(ca_file) if ca_file is not None else OnceTlsContext()
        return None, ssl_context

    def _own_state(self) -> None:
        super()._own_state()
        self._on_frame_error: OnFrameError | None = None
        #: Notified when the endpoint is known, when the stream failed before it, at the close
        #: and at the cancellation of a waiting request; guards the next two.
        self._endpoint_changed = threading.Condition(threading.Lock())
        self._endpoint_wire: Wire | None = None
        #: The error of the stream before its endpoint event.
        self._stream_error: McpError | None = None
        #: Set when the stream ended after it gave the endpoint: the session is gone.
        self._lost = False

    @property
    def gone(self) -> bool:
        """True once the stream ended after it gave the endpoint: the session of the server is gone."""
        return self._lost

    @property
    def endpoint_known(self) -> bool:
        """True once the stream gave the endpoint."""
        return self._endpoint_wire is not None

    # ------------------------------------------------------------------ seam

    def _begin(self, on_frame_error: OnFrameError) -> None:
        """Start the thread that reads the stream."""
        self._on_frame_error = on_frame_error
        self._listener = threading.Thread(target=self._listen, name="mcpbridge-sse-stream", daemon=True)
        self._listener.start()

    def _send_request(self, request: Request, cancel: CancelToken | None, deliver: OnMessage) -> None:
        """Post ``request``; its answer comes on the stream."""
        self._post(request, cancel)

    def _closed_error(self) -> McpError:
        """The error of the stream when it failed before its endpoint event, else ``Closed``."""
        with self._endpoint_changed:
            error = self._stream_error
        if error is not None:
            return fresh(error)
        return super()._closed_error()

    def _end_waits(self) -> None:
        with self._endpoint_changed:
            self._endpoint_changed.notify_all()

    def _close_wires(self, grace: float) -> None:
        super()._close_wires(grace)
        if self._endpoint_wire is not None:
            self._endpoint_wire.close()

    # -------------------------------------------------------------- endpoint

    def _endpoint(self, cancel: CancelToken | None) -> Wire:
        """The wire of the endpoint, once the stream gave it.

        Raises:
            NoEndpoint: no endpoint event in time; the transport closes.
            Cancelled, Closed: the wait was cut short.
            McpError: the stream failed before its endpoint event.
        """
        wait = ENDPOINT_WAIT_FACTOR * self._connect_timeout

        def wake() -> None:
            with self._endpoint_changed:
                self._endpoint_changed.notify_all()

        def settled() -> bool:
            return (
                self._endpoint_wire is not None
                or self._stream_error is not None
                or self._closed
                or (cancel is not None and cancel.cancelled)
            )

        remove = cancel.add_callback(wake) if cancel is not None else None
        try:
            with self._endpoint_changed:
                found = self._endpoint_changed.wait_for(settled, wait)
        finally:
            if remove is not None:
                remove()
        if not found:
            self._fail_stream(NoEndpoint(f"the upstream server sent no endpoint event in {wait:g} s"))
        with self._endpoint_changed:
            wire, error = self._endpoint_wire, self._stream_error
        if wire is not None:
            return wire
        if error is not None:
            raise fresh(error)
        if cancel is not None and cancel.cancelled:
            raise Cancelled(cancel.reason or None)
        raise Closed("the connection to the upstream server is closed")

    def _fail_stream(self, error: McpError) -> None:
        """The stream cannot give the endpoint: keep ``error`` for the senders, end the stream."""
        with self._endpoint_changed:
            if self._stream_error is None:
                self._stream_error = error
        self._shut()

    # -------------------------------------------------------------- requests

    def _post(self, message: Message, cancel: CancelToken | None) -> None:
        """One ``POST`` of ``message`` to the endpoint, accepted by the server.

        Raises:
            HttpStatusError: the server did not accept it.
        """
        wire = self._endpoint(cancel)
        method = message.method if isinstance(message, (Request, Notification)) else ""
        body = json_body(message)
        waited = False
        while True:
            header = {"Content-Type": "application/json"}
            with self._answered("POST", header, body, cancel, method, wire=wire) as (response, _exchange):
                status = response.status
                log.debug("%s: HTTP status %d", (method or "an answer")[:128], status)
                if 200 <= status < 300:
                    return
                error = status_error(response)
            if not isinstance(message, Request) or not self._wait_busy(method, error, cancel, waited=waited):
                raise error
            waited = True

    @contextlib.contextmanager
    def _answered(
        self,
        verb: str,
        header: Mapping[str, str],
        body: bytes | None,
        cancel: CancelToken | None,
        method: str,
        *,
        wire: Wire | None = None,
        read_timeout: float | None = None,
    ) -> Iterator[tuple[WireResponse, Exchange]]:
        """The answer to one request (with ``header`` after the user's and the authorizer's
        headers) and its exchange; sent once more after a 401 or 403 that the authorizer handled.

        Raises:
            HttpStatusError: the authorizer cannot handle the challenge.
        """
        challenged = False
        while True:
            headers = self._base_headers()
            headers.update(header)
            with self._tracked(cancel) as exchange:
                response = self._send(
                    verb, headers, body, exchange, cancel, method=method, wire=wire, read_timeout=read_timeout
                )
                with closing(response):
                    if self._challenged(response, challenged):
                        challenged = True
                        continue
                    yield response, exchange
                    return

    # ---------------------------------------------------------------- queue

    def _post_queued(self, message: Message) -> None:
        """Post a queued notification or answer on the poster thread; a failure is a drop line."""
        try:
            self._post(message, None)
        except McpError as exc:
            self._unsent(logged_name(message), exc)

    # --------------------------------------------------------------- stream

    def _listen(self) -> None:
        try:
            self._read_stream()
            error: McpError = StreamEnded("the event stream of the upstream server ended")
        except McpError as exc:
            error = exc
        if self._closed:
            return
        if not self.endpoint_known:
            self._fail_stream(error)
            return
        log.warning(
            "the event stream of the upstream server ended (%s), and with it its session",
            error.detail or error.cause,
        )
        self._lost = True
        self._shut()
        # The requests that wait fail with the error: an event over the limit names its option.
        too_large = isinstance(error, ResponseTooLarge)
        self._closed_with(error if too_large else StreamEnded(error.detail or error.cause))

    def _read_stream(self) -> None:
        stream = self._answered(
            "GET",
            {"Accept": "text/event-stream"},
            None,
            None,
            "",
            read_timeout=self._read_timeout or STREAM_READ_LIMIT,
        )
        with stream as (response, exchange):
            if response.status != 200:
                raise status_error(response)
            if media_type(response) != "text/event-stream":
                raise InvalidResponse("the stream of the server is not an event stream", http_status=200)
            self._events_of(response, exchange)

    def _events_of(self, response: WireResponse, exchange: Exchange) -> None:
        """Read the events of the stream: the endpoint, then the messages of the server.

        Raises:
            ResponseTooLarge: an event over the limit, as on the other HTTP transports.
        """
        deliver = self._on_message
        frame_error = self._on_frame_error
        assert deliver is not None and frame_error is not None
        for event in self._sse_events(response, exchange, None, SseParser(self._max_bytes)):
            if event.type == "endpoint":
                self._on_endpoint(event.data)
                continue
            try:
                message = event_message(event, self._max_depth)
            except FrameError as exc:
                frame_error(exc)
                continue
            if message is not None:
                deliver(message)

    def _on_endpoint(self, data: str) -> None:
        if self._endpoint_wire is not None:
            self._drops(
                logging.DEBUG,
                "endpoint events after the first",
                "the upstream server sent one more endpoint event; the first one stays",
            )
            return
        wire = self._open_wire(endpoint_url(self._url, data))
        with self._endpoint_changed:
            self._endpoint_wire = wire
            self._endpoint_changed.notify_all()
        log.debug("the upstream server gave the endpoint of its messages")
