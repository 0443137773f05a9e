"""What the HTTP client transports share, on :mod:`.httpwire`.

:class:`~.http.HttpTransport` (Streamable HTTP of revision 2026-07-28),
:class:`~.legacy_http.LegacyHttpTransport` (Streamable HTTP of 2025-11-25) and
:class:`~.sse_transport.SseTransport` (HTTP+SSE of 2024-11-05) are each a
:class:`HttpTransportBase`: the options and the wire (:func:`.httppool.open_wire`),
the exchanges in flight that a cancellation or the close aborts, one request on the
wire with the errors it can end in, the answer to a 401 or 403 that goes to the
:class:`~.httpwire.Authorizer`, and the reading of an answer: one JSON body, or an
SSE stream of messages that ends with the response.

What differs stays in each transport as a small override: which user headers go
into the wire's fixed part (:meth:`HttpTransportBase._fixed_headers`), the TLS context
of its wires (:meth:`HttpTransportBase._tls`), the state that only one transport has
(:meth:`HttpTransportBase._own_state`), what passes of
a response (:meth:`HttpTransportBase._passing`), and whether an answer to another
request on the stream of a request goes on (:attr:`HttpTransportBase.PASS_OTHER_ANSWERS`).

The two transports of the 2025 era build on :class:`~.queued.QueuedTransportBase`, a
subclass of :class:`HttpTransportBase` (the queue of their posts and their threads).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, TypeAlias

from .. import jsonrpc
from ..cancel import CancelToken
from ..droplog import DropLog
from ..errors import (
    Closed,
    InvalidRequest,
    InvalidResponse,
    McpError,
    ResponseTooLarge,
    TransportFailed,
)
from ..jsonrpc import ErrorResponse, FrameError, Message, Request, Response
from . import OnClosed, OnMessage, PeerForm, Transport
from .httpwire import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_POOL_SIZE,
    Authorizer,
    Exchange,
    HttpStatusError,
    Why,
    WireReading,
    event_message,
    media_type,
    read_limit,
    status_error,
)
from .sse import Event, EventTooLarge, SseParser

if TYPE_CHECKING:
    import ssl

    from .httppool import Wire, WireResponse

__all__ = ["Headers", "HttpTransportBase", "json_body"]

log = logging.getLogger("mcpbridge.http")

#: Header lines, ``(name, value)``, in their order.
Headers: TypeAlias = list[tuple[str, str | bytes]]


def json_body(message: Message) -> bytes:
    """The body of a ``POST`` of ``message``.

    Raises:
        InvalidRequest: the message cannot be written as JSON.
    """
    try:
        return jsonrpc.dumps(jsonrpc.to_obj(message))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest("the message cannot be written as JSON") from exc


def _without_value(exc: ValueError) -> ValueError:
    """``exc`` without the header name or value that its text quotes (a value may be a token)."""
    plain = ValueError(f"{type(exc).__name__}: a header name or value that HTTP cannot carry")
    return plain.with_traceback(exc.__traceback__)


def _answer_to(request: Request, message: Message) -> Response | ErrorResponse | None:
    """``message`` as the answer to ``request`` (an error without an id is one), or None."""
    if isinstance(message, ErrorResponse) and message.id is None:
        return ErrorResponse(request.id, message.error)
    if isinstance(message, (Response, ErrorResponse)) and message.id == request.id:
        return message
    return None


class HttpTransportBase(WireReading, Transport):
    """A client transport to one Streamable HTTP URL; the parts both revisions share.

    ``send`` of a request raises :class:`~.errors.Cancelled` when its cancel token
    fired, :class:`~.errors.Closed` when the transport is closed,
    :class:`~.errors.NotConnected` before the start, :class:`~.errors.InvalidRequest`
    when the message cannot be written as JSON (or a header cannot be sent),
    :class:`~.errors.TransportFailed` when the connection failed or no data came in
    the read limit, :class:`~.httpwire.HttpStatusError` for an HTTP status without a
    JSON-RPC message, and :class:`~.errors.InvalidResponse` when the answer is not
    valid (not JSON-RPC, an event over the limit); an error of the authorizer passes
    unchanged.

    :param url: the ``http`` or ``https`` URL of the server.
    :param headers: ``(name, value)`` pairs sent with every request (``--header``,
        ``--header-env``); a value goes as ``value.encode("utf-8", "surrogateescape")``.
    :param max_response_bytes: the limit of one JSON body and of one SSE event.
    :param ca_file: PEM certificates trusted beside the trust store of the system.
    :param ssl_context: a context from :func:`~.httpwire.tls_context` instead of
        ``ca_file``, or a function that makes it at the first TLS connection.
    :param connect_timeout: seconds for the connection and the TLS handshake.
    :param read_timeout: the longest wait for the next bytes of any answer; by default each
        method has its own (:data:`~.httpwire.METHOD_READ_LIMITS`).
    :param authorizer: asked for headers before each request and told of 401 and 403.
    :param env: the environment for the proxy variables (``os.environ`` by default).
    :param max_depth: the deepest nesting of a message of the server.
    :param pool_size: the requests in flight that the wire keeps a connection for.
    :param clock: the clock of the idle ages of the wire's connections.

    Raises:
        ConnectFailed: the URL is not http or https, or a proxy variable has a scheme
            other than http and https (the detail names the variable).
        CaFileError: ``ca_file`` cannot be used.
    """

    #: An answer to another request on the stream of a request goes to ``on_message``
    #: (True), or is dropped with a debug line (False).
    PASS_OTHER_ANSWERS: ClassVar[bool] = False

    def __init__(
        self,
        url: str,
        *,
        headers: Sequence[tuple[str, str]] = (),
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        ca_file: str | None = None,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float | None = None,
        authorizer: Authorizer | None = None,
        env: Mapping[str, str] | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        pool_size: int = DEFAULT_POOL_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        #: The user's headers that go into the mapping of each request (the others are fixed).
        self._headers: Headers = [(name, value.encode("utf-8", "surrogateescape")) for name, value in headers]
        fixed = self._fixed_headers()
        self._max_bytes = max_response_bytes
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._authorizer = authorizer
        self._max_depth = max_depth
        self._ca_file, self._ssl_context = self._tls(ca_file, ssl_context)
        self._env = env
        self._pool_size = pool_size
        self._clock = clock
        self._wire = self._open_wire(url, headers=fixed)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight: set[Exchange] = set()
        self._waits: set[threading.Event] = set()
        self._closed = False
        self._close_started = False
        self._on_message: OnMessage | None = None
        self._on_closed: OnClosed | None = None
        #: What the server makes the transport drop or do again, one line a kind every 10 s.
        self._drops = DropLog(log)
        self._own_state()

    def _fixed_headers(self) -> Headers:
        """The headers of the wire's fixed part of every request head, taken from ``_headers``.

        By default every user header stays in the mapping of each request.
        """
        return []

    def _own_state(self) -> None:
        """Set up the state that only this transport has, at the end of ``__init__``."""

    def _tls(
        self, ca_file: str | None, ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None
    ) -> tuple[str | None, ssl.SSLContext | Callable[[], ssl.SSLContext] | None]:
        """The ``ca_file`` and ``ssl_context`` of the wires; by default as given."""
        return ca_file, ssl_context

    def _open_wire(self, url: str, *, headers: Sequence[tuple[str, str | bytes]] = ()) -> Wire:
        """A wire to ``url`` with the options of the transport; ``headers`` go into every request.

        Raises:
            ConnectFailed, CaFileError: as :func:`~.httppool.open_wire`.
        """
        from .httppool import open_wire  # loads urllib3 and ssl: at the first transport

        return open_wire(
            url,
            ca_file=self._ca_file,
            ssl_context=self._ssl_context,
            env=self._env,
            pool_size=self._pool_size,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            headers=headers,
            clock=self._clock,
        )

    @property
    def form(self) -> PeerForm:
        return PeerForm.URL

    def rest(self) -> None:
        """Close the pooled connections idle too long to be reused."""
        closed = self._wire.close_idle()
        if closed:
            log.debug("closed %d idle connections to the upstream server", closed)

    def _begin_close(self) -> bool:
        """Whether this call is the first to close the transport."""
        with self._lock:
            if self._close_started:
                return False
            self._close_started = True
            return True

    def kill(self) -> None:
        """Abort every exchange in flight at once and refuse new ones; wait for nothing.

        For a watchdog, like :meth:`StdioChildTransport.kill <.stdio.StdioChildTransport.kill>`.
        """
        self._shut()

    def _shut(self) -> None:
        """Refuse new exchanges, stop what the transport runs of its own (:meth:`_stop`), then
        abort the exchanges in flight; wait for nothing."""
        exchanges = self._refuse_all()
        self._stop()
        for exchange in exchanges:
            exchange.abort(Why.CLOSE)

    def _stop(self) -> None:
        """Stop the threads of the transport and end its own waits, once new exchanges are
        refused and before those in flight are aborted; by default nothing."""

    def _closed_error(self) -> McpError:
        """The error of a message sent after the close."""
        return Closed("the connection to the upstream server is closed")

    def _finish(self, grace: float) -> None:
        """The last steps of a close, once nothing runs: let go of the wires
        (:meth:`_close_wires`), say the counts of the drops, tell ``on_closed``."""
        self._close_wires(grace)
        self._drops.flush()
        self._closed_with(None)

    def _close_wires(self, grace: float) -> None:
        """Let go of the wires at the close, within ``grace``; by default the wire of the URL."""
        self._wire.close()

    def _closed_with(self, error: McpError | None) -> None:
        """Tell ``on_closed`` of the end of the transport, once."""
        with self._lock:
            on_closed, self._on_closed = self._on_closed, None
        if on_closed is not None:
            on_closed(error)

    # -------------------------------------------------------------- exchange

    @contextlib.contextmanager
    def _tracked(self, cancel: CancelToken | None) -> Iterator[Exchange]:
        """One exchange in flight, aborted by ``cancel`` and by the close of the transport.

        Raises:
            Cancelled, Closed: the exchange was aborted before it began.
        """
        exchange = Exchange()
        remove = cancel.add_callback(exchange.abort) if cancel is not None else None
        with self._lock:
            if self._closed:
                exchange.aborted = Why.CLOSE
            self._in_flight.add(exchange)
        try:
            if exchange.aborted is not None:
                raise self._aborted(exchange, cancel)
            yield exchange
        finally:
            if remove is not None:
                remove()
            with self._idle:
                self._in_flight.discard(exchange)
                self._idle.notify_all()

    def _base_headers(self) -> dict[str, str | bytes]:
        """The user's headers of each request, then those of the authorizer."""
        headers: dict[str, str | bytes] = dict(self._headers)
        if self._authorizer is not None:
            headers.update(self._authorizer.headers())
        return headers

    def _send(
        self,
        verb: str,
        headers: Mapping[str, str | bytes],
        body: bytes | None,
        exchange: Exchange,
        cancel: CancelToken | None,
        *,
        method: str,
        wire: Wire | None = None,
        read_timeout: float | None = None,
    ) -> WireResponse:
        """Send one request of ``method`` and read the head of its answer.

        ``wire``: the wire of the request, by default that of the URL. ``read_timeout``: the
        longest wait for the next bytes, by default that of ``method``.

        Raises:
            Cancelled, Closed: the exchange was aborted.
            InvalidRequest: a header cannot be sent over HTTP.
            McpError: the exchange failed (:func:`~.httppool.edge_error`).
        """
        if read_timeout is None:
            read_timeout = read_limit(method, self._read_timeout)
        try:
            with self._abort_named(exchange, cancel):
                return (self._wire if wire is None else wire).request(
                    verb, headers.items(), body, exchange=exchange, read_timeout=read_timeout
                )
        except ValueError as exc:
            # The inner error quotes the header's value, which may be a token: the cause keeps
            # its kind and its traceback, not its text.
            raise InvalidRequest("a header of the request cannot be sent over HTTP") from _without_value(exc)

    def _challenged(self, response: WireResponse, tried: bool) -> bool:
        """Whether to send the request once more after a 401 or 403 that the authorizer handled.

        False for any other answer, and when the request was ``tried`` once more already.

        Raises:
            HttpStatusError: the authorizer cannot handle the challenge.
        """
        status = response.status
        if status not in (401, 403) or self._authorizer is None or tried:
            return False
        challenge = response.header("WWW-Authenticate")
        response.close()
        if self._authorizer.on_challenge(status, challenge):
            return True
        raise HttpStatusError(status)

    # ----------------------------------------------------------------- read

    def _read_answer(
        self,
        request: Request,
        response: WireResponse,
        exchange: Exchange,
        cancel: CancelToken | None,
        deliver: OnMessage,
    ) -> Response | ErrorResponse:
        """The response to ``request`` (:meth:`_passing`): a JSON body, or the end of an SSE
        stream whose messages before it go to ``deliver``.

        Raises:
            HttpStatusError: an HTTP status without a JSON-RPC message.
            InvalidResponse: the answer is not valid (not JSON-RPC, over the limit).
            TransportFailed: the stream ended before the response.
        """
        status = response.status
        media = media_type(response)
        if 200 <= status < 300 and media == "text/event-stream":
            messages = self._events(response, exchange, cancel, SseParser(self._max_bytes), strict=True)
            answer = self._stream_answer(request, messages, deliver)
        elif media == "application/json" and status not in (202, 204):
            answer = self._json_answer(request, response, exchange, cancel)
        else:
            raise status_error(response)
        return self._passing(request, answer)

    def _passing(self, request: Request, answer: Response | ErrorResponse) -> Response | ErrorResponse:
        """The response to ``request`` as it goes on; by default unchanged."""
        return answer

    def _json_answer(
        self, request: Request, response: WireResponse, exchange: Exchange, cancel: CancelToken | None
    ) -> Response | ErrorResponse:
        status = response.status
        try:
            message = self._message(response, exchange, cancel)
        except FrameError as exc:
            if 200 <= status < 300:
                raise InvalidResponse("the body is not a valid JSON-RPC message", http_status=status) from exc
            # The body of an error status need not be a JSON-RPC message (an OAuth error, a
            # web page): the status is the failure, and the parse of its body no part of it.
            raise status_error(response) from None
        answer = _answer_to(request, message)
        if isinstance(answer, ErrorResponse) or (answer is not None and 200 <= status < 300):
            return answer
        if 200 <= status < 300:
            raise InvalidResponse("the body is not the response of the request", http_status=status)
        raise status_error(response)

    def _stream_answer(
        self, request: Request, messages: Iterator[Message], deliver: OnMessage
    ) -> Response | ErrorResponse:
        """The answer to ``request`` among ``messages``; those before it go to ``deliver``."""
        for message in messages:
            answer = _answer_to(request, message)
            if answer is not None:
                return answer
            if isinstance(message, (Response, ErrorResponse)) and not self.PASS_OTHER_ANSWERS:
                self._drops(
                    logging.DEBUG,
                    "dropped responses to other requests on the stream of a request",
                    "dropped a response to another request on the stream of %s",
                    request.method,
                )
                continue
            deliver(message)
        raise TransportFailed("the response stream ended before the response")

    def _events(
        self,
        response: WireResponse,
        exchange: Exchange,
        cancel: CancelToken | None,
        parser: SseParser,
        *,
        strict: bool,
        last_id: list[str] | None = None,
    ) -> Iterator[Message]:
        """The messages of an SSE stream; ``last_id[0]`` follows the id of its last event.

        Raises:
            ResponseTooLarge: an event over the limit (:meth:`_sse_events`).
            InvalidResponse: (``strict``) an event that is not a message; else such an event
                is dropped with a debug line.
        """
        for event in self._sse_events(response, exchange, cancel, parser):
            if last_id is not None and event.last_event_id:
                last_id[0] = event.last_event_id
            try:
                message = event_message(event, self._max_depth)
            except FrameError as exc:
                if strict:
                    raise InvalidResponse(f"an event is {exc.words}") from exc
                self._drops(
                    logging.DEBUG,
                    "dropped events of the upstream server that are not messages",
                    "dropped an event of the upstream server that is %s",
                    exc.words,
                )
                continue
            if message is not None:
                yield message

    def _sse_events(
        self, response: WireResponse, exchange: Exchange, cancel: CancelToken | None, parser: SseParser
    ) -> Iterator[Event]:
        """The events of an SSE stream, of every type, as ``parser`` completes them.

        Raises:
            ResponseTooLarge: an event over the limit of the transport (``--max-response-bytes``).
        """
        for chunk in self._chunks(response, exchange, cancel):
            try:
                events = parser.feed(chunk)
            except EventTooLarge as exc:
                raise ResponseTooLarge(
                    f"an event longer than {self._max_bytes} bytes", limit=self._max_bytes, over_http=True
                ) from exc
            yield from events
