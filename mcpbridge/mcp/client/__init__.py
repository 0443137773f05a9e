"""The client of MCP 2026-07-28: requests, the pending table and listen streams.

Theory of operation
-------------------

A :class:`Client` sends requests over one :class:`~.transports.Transport` and
matches the answers to them. Every request gets the next integer id (1, 2,
3...) and an entry in the *pending table*, a dict from id to entry guarded by
one lock; each caller sleeps on a :class:`threading.Condition` of its own
thread (on that lock), so an answer wakes only its caller. The transport
delivers what arrives on its own thread (stdio: the reader thread; the memory
link: the server's thread; HTTP: the thread that called
:meth:`Transport.send`). That thread routes each message under the lock, and
the waiting caller wakes up:

* a response or an error response, by its id. The first answer resolves the
  entry and removes it; a second answer, or an answer to an id that is not
  pending, is dropped with a debug line;
* a line that is not a valid message but whose id can be read fails the
  request of that id with :class:`~.errors.InvalidResponse` at once, instead
  of a timeout;
* ``notifications/progress``, by its ``progressToken``: the token of a request
  is its id;
* a notification with ``_meta["io.modelcontextprotocol/subscriptionId"]``, by
  that id to its :class:`~.subscription.Subscription`. A ``notifications/cancelled`` for the
  id of a listen stream ends that stream (the only use of that notification a
  server may make). The response to a listen request ends the stream: a result
  gracefully, an error with :class:`~.errors.RpcError`;
* ``notifications/message``: on stdio it names no request, so it goes to
  ``on_notification``; over HTTP it arrives on the thread of its request and
  goes to that request's ``on_log``;
* any other notification goes to ``on_notification``, or is dropped.

Callbacks (``on_progress``, ``on_log``, ``on_event``, ``on_ack``,
``on_notification``) run on the delivering thread, after the lock is released,
in arrival order. On stdio that is the reader thread: a callback must not
block, and it must not wait for an answer of the upstream server.

A request waits at most its ``timeout``. One timer thread
(``mcpbridge-upstream-timer``) fires the deadline of a request while its
:meth:`Transport.send` still runs, which matters over HTTP, where ``send``
carries the whole exchange. A timeout and a cancellation both send
``notifications/cancelled`` to the server when the request went out.

A caller that must never wait (the bridge's reader thread) uses
:meth:`Client.begin` instead of :meth:`Client.request`: the request goes out
with a send that never waits for room (:data:`~.cancel.NO_WAIT`), nobody sleeps
on it, and ``on_done(call)`` runs once on the thread that learns its outcome
(the delivering thread for an answer, the timer thread at the deadline, the
thread that fired the cancel token, or the one that closed the connection).
:meth:`~.call.Call.result` then gives what :meth:`Client.request` returns or raises.

A :class:`RequestHook` given to the client (the sign-in of the URL form is one)
is what every request passes through: :meth:`Client.request` runs the whole
exchange inside :meth:`RequestHook.scope`, :meth:`Client.discover` waits the
hook's :meth:`RequestHook.discover_time` more, and :meth:`Client.begin`, which
must never wait, sends nothing when there is a hook (it returns ``None`` and its
caller sends the request with :meth:`Client.request` from a thread that may
wait), so no request can pass by the hook.

A listen stream is sent from its own short thread
(``mcpbridge-upstream-listen-<id>``), because over HTTP the send of a listen
request lasts as long as the stream. Over stdio and the memory link that thread
ends at once.

Rules:

* The lock guards decisions only: no I/O and no callback runs under it.
* Every wait is bounded and a wait that runs out raises a named error.
* When the transport closes, every pending request and every stream fails at
  once with the error of the close (:class:`~.errors.Closed` for a child that
  exited).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final, Protocol

from .. import jsonrpc
from ..cancel import NO_WAIT, CancelToken, WouldBlock
from ..errors import (
    Cancelled,
    Closed,
    InvalidRequest,
    McpError,
    NotConnected,
    RequestTimeout,
    RpcError,
    fresh,
)
from ..jsonrpc import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from ..protocol import LISTEN_ACKNOWLEDGED, META_SUBSCRIPTION_ID, MODERN
from ..text import escaped, format_duration
from ..transports import Transport, run_callback
from ..transports.framing import TooLong
from .call import (
    Call,
    PendingRequest,
    RequestOptions,
    allowed_results,
    request_meta,
    result_of,
    split_params,
    traced,
)
from .peer import JOIN_TIMEOUT, Entry, Interrupt, Peer, bad_line
from .subscription import Subscription

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is new in Python 3.11

__all__ = ["DEFAULT_MAX_DEPTH", "Client", "Connect", "RequestHook"]

log = logging.getLogger("mcpbridge.upstream")

#: Nesting of a message of the upstream server: deep tool schemas must survive. The one
#: limit of the upstream's messages, in both eras.
DEFAULT_MAX_DEPTH: Final = 200


class RequestHook(Protocol):
    """What every request of a :class:`Client` passes through; see the module docstring.

    The sign-in of the URL form is one (:class:`mcpbridge.oauth.session.SignInHook`): a
    request that meets a 401 may start a sign-in inside its scope.
    """

    def scope(self, *, cancel: CancelToken | None, timeout: float) -> AbstractContextManager[object]:
        """The scope of one request, around its whole exchange; it may turn the request's
        errors into its own."""
        ...

    def discover_time(self) -> float:
        """The seconds that ``server/discover`` may wait beyond its time limit (a sign-in)."""
        ...


def _as_id(value: Any) -> RequestId | None:
    """``value`` when it is a valid request id (a string or an integer, not a bool), else ``None``."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _call(what: str, callback: Callable[[], None]) -> None:
    """Run a callback of the caller; an error in it must not stop the delivering thread."""
    run_callback(what, callback, log)


def _nothing() -> None:
    pass


class Client(Peer):
    """A client of one MCP 2026-07-28 server; see the module docstring.

    :param transport: the connection (stdio child, HTTP, memory link); the client owns it.
    :param client_info: the ``Implementation`` sent in every request's ``_meta``.
    :param max_depth: the nesting limit for the server's messages; the transports
        parse, so this is a record for them and for callers.
    :param on_notification: gets the notifications that belong to no request and
        no stream (``notifications/message`` on stdio), on the delivering thread.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        client_info: dict[str, Any],
        max_depth: int = DEFAULT_MAX_DEPTH,
        on_notification: Callable[[Notification], None] | None = None,
        hook: RequestHook | None = None,
    ) -> None:
        super().__init__(transport, timer_name="mcpbridge-upstream-timer", logger=log)
        self._hook = hook
        self._client_info = client_info
        self.max_depth = max_depth
        self._on_notification = on_notification
        # Guarded by _cond:
        self._streams: dict[RequestId, Subscription] = {}
        self._started = False
        self._closing = False
        self._listen_threads: list[threading.Thread] = []

    def __repr__(self) -> str:
        state = "closed" if self._closed is not None else "open" if self._started else "new"
        return f"<Client {state}, {len(self._pending)} pending, {len(self._streams)} streams>"

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the transport (a child process starts here) and the timer thread.

        Raises:
            McpError: the transport did not start (``SpawnFailed`` for a command).
        """
        with self._cond:
            if self._started:
                raise RuntimeError("the client is already started")
            self._started = True
        self._timer.start()
        try:
            self._transport.start(self._on_message, self._on_frame_error, self._on_closed)
        except BaseException:
            with self._cond:
                self._closing = True
                self._closed = Closed("the connection did not start")
            self._timer.stop()
            raise

    def close(self, grace: float = 2.0) -> None:
        """Fail what is pending with ``Closed``, close the transport, stop the threads.

        A child process gets ``grace`` seconds after the end of its stdin, then
        ``SIGTERM`` and ``grace`` seconds more, then ``SIGKILL``. Idempotent.
        """
        done: list[Entry] = []
        with self._cond:
            if self._closing:
                first = False
            else:
                first = True
                self._closing = True
                done = self._fail_all_locked(Closed("the client is closed"))
            threads = list(self._listen_threads)
            self._listen_threads.clear()
        for entry in done:
            self._notify_done(entry)
        if not first:
            return
        self._transport.close(grace)
        self._timer.stop()
        current = threading.current_thread()
        for thread in threads:
            if thread is not current:
                thread.join(JOIN_TIMEOUT)
                if thread.is_alive():
                    log.warning("%s did not stop in %s", thread.name, format_duration(JOIN_TIMEOUT))

    # -------------------------------------------------------------- requests

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float,
        on_log: Callable[[dict[str, Any]], None] | None = None,
        long_strings: list[jsonrpc.RawStrings] | None = None,
        **options: Unpack[RequestOptions],
    ) -> dict[str, Any]:
        """Send one request and wait at most ``timeout`` seconds for its result.

        ``params._meta`` gets the protocol version, ``capabilities`` (or ``{}``),
        the client info, ``log_level`` when given, the progress token (the
        request id) when ``on_progress`` is given, and the keys of ``meta``.
        The other options are those of :class:`~.call.RequestOptions`.

        :param on_log: gets the params of each ``notifications/message`` tied to the
            request (HTTP only: on stdio a log message names no request).
        :param long_strings: gets the record of the long strings of the answer's line
            (see :class:`~.jsonrpc.RawStrings`), when it has one, so that the result
            is written on with them as they came (as :attr:`~.call.Call.raw` gives it).

        Raises:
            RpcError: the server answered with a JSON-RPC error (``.error`` holds it).
            RequestTimeout: no answer in ``timeout`` seconds (detail ``"<method>: no response in 120 s"``).
            Cancelled: ``cancel`` fired.
            InvalidResponse: the answer is not valid, or an ``input_required`` result
                that is not allowed, or an unknown ``resultType``.
            InvalidMeta: ``meta`` has a key of the protocol layer.
            InvalidRequest: ``params``, ``capabilities`` or ``log_level`` is not valid.
            Closed: the connection is closed or the upstream server exited.
            NotConnected: the client is not started.
            McpError: the transport failed (``TransportFailed`` and, over HTTP, others).
        """
        hook = self._hook
        if hook is not None:
            with hook.scope(cancel=options.get("cancel"), timeout=timeout):
                return self._request(method, params, timeout, on_log, long_strings, options)
        return self._request(method, params, timeout, on_log, long_strings, options)

    def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float,
        on_log: Callable[[dict[str, Any]], None] | None,
        long_strings: list[jsonrpc.RawStrings] | None,
        options: RequestOptions,
    ) -> dict[str, Any]:
        entry, body, started = self._prepare(method, params, options, on_log, waits=True)
        message = Request(entry.id, method, body)
        cancel = options.get("cancel")
        allowed = allowed_results(options)

        def exchange() -> dict[str, Any]:
            try:
                result = self._exchange(entry, message, started + timeout, timeout, cancel, allowed)
                answer = entry.outcome
                if long_strings is not None and isinstance(answer, Response) and answer.raw is not None:
                    long_strings.append(answer.raw)
                return result
            finally:
                with self._cond:
                    if self._pending.get(entry.id) is entry:
                        del self._pending[entry.id]

        return traced(exchange, options.get("trace"), entry.id, started)

    def begin(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_done: Callable[[Call], None],
        timeout: float,
        raw: jsonrpc.RawStrings | None = None,
        **options: Unpack[RequestOptions],
    ) -> Call | None:
        """Send one request without waiting for its answer; ``on_done`` gets the :class:`~.call.Call`.

        For a caller that must never block (a reader thread), over a transport whose
        send returns at once (stdio). The request gets what :meth:`request` gives
        it, and :meth:`~.call.Call.result` gives what :meth:`request` returns or raises.
        ``on_done`` may run before this method returns, on this thread or another.

        Returns ``None``, with nothing sent, when the transport has no room for the
        request at once, or when the client has a :class:`RequestHook` (whose scope
        may wait): then the caller sends it with :meth:`request` from a thread that
        may wait.

        ``raw``: the record of the long strings of the line that ``params`` came from
        (see :class:`~.jsonrpc.RawStrings`): they go upstream as they came.

        Raises:
            InvalidMeta, InvalidRequest: as :meth:`request`; nothing was sent.
            Closed, NotConnected: the client is closed or not started; nothing was sent.
        """
        if self._hook is not None:
            return None
        entry, body, started = self._prepare(method, params, options, None, waits=False)
        call = Call(self, entry, timeout, allowed_results(options), options.get("trace"), started)
        error: McpError | None = None
        try:
            self._transport.send(Request(entry.id, method, body, raw), cancel=NO_WAIT)
        except WouldBlock:
            with self._lock:
                if self._pending.get(entry.id) is entry:
                    del self._pending[entry.id]
            return None
        except McpError as exc:
            error = exc
        # The request is out (the latency of the call runs from here): the rest is done
        # while the server works. The answer may come before on_done is set; then the
        # notice goes from here.
        with self._lock:
            if error is None:
                entry.sent = True
            elif entry.outcome is None and entry.interrupted is None:
                entry.outcome = error
                if self._pending.get(entry.id) is entry:
                    del self._pending[entry.id]
            entry.on_done = lambda: on_done(call)
            notify = entry.settled_locked()
            open_ = not entry.notified
        if notify:
            self._notify_done(entry)
        if open_:
            self._arm(entry, started + timeout, options.get("cancel"))
        return call

    def _arm(self, entry: PendingRequest, deadline: float, cancel: CancelToken | None) -> None:
        """Give a request of :meth:`begin` its deadline and its cancellation, after it went out.

        A token that fired before this fires the cancellation at once (the request
        went out, so the server is told). If the outcome came first, its notice went
        without these removers, so they are run here.
        """
        remove_cancel: Callable[[], None] = _nothing
        if cancel is not None:
            token = cancel
            remove_cancel = cancel.add_callback(
                lambda: self._interrupt(entry, Interrupt.CANCEL, token.reason)
            )
        remove_deadline = self._timer.add(deadline, lambda: self._interrupt(entry, Interrupt.TIMEOUT, ""))
        with self._lock:
            notified = entry.notified
            if not notified:
                entry.removers = (remove_cancel, remove_deadline)
        if notified:
            remove_cancel()
            remove_deadline()

    def discover(
        self,
        *,
        timeout: float,
        cancel: CancelToken | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send ``server/discover`` and return the ``DiscoverResult``; raises as :meth:`request`.

        A server that answers -32022 (unsupported protocol version) although its
        ``data.supported`` lists our revision gets one more try with a new id, as
        the version negotiation of 2026-07-28 says. With a :class:`RequestHook`, the
        time limit grows by its :meth:`~RequestHook.discover_time`.
        """
        if self._hook is not None:
            timeout += self._hook.discover_time()
        try:
            return self.request(
                "server/discover", None, timeout=timeout, cancel=cancel, capabilities=capabilities
            )
        except RpcError as exc:
            data = exc.error.data
            supported = data.get("supported") if isinstance(data, dict) else None
            if exc.error.code != UNSUPPORTED_PROTOCOL_VERSION or not (
                isinstance(supported, list) and MODERN in supported
            ):
                raise
        log.debug("server/discover: the server lists %s as supported; trying once more", MODERN)
        return self.request(
            "server/discover", None, timeout=timeout, cancel=cancel, capabilities=capabilities
        )

    def listen(
        self,
        notifications: dict[str, Any],
        *,
        on_event: Callable[[Notification], None],
        on_ack: Callable[[dict[str, Any]], None] | None = None,
        capabilities: dict[str, Any] | None = None,
        log_level: str | None = None,
    ) -> Subscription:
        """Open a ``subscriptions/listen`` stream with the filter ``notifications``.

        Returns at once. ``on_ack`` gets the honored filter of each
        acknowledgment, ``on_event`` each other notification of the stream, in
        arrival order, on the delivering thread (they may run before this
        method returns, on the memory link). Several streams may be open at once.

        Raises:
            InvalidRequest: ``notifications``, ``capabilities`` or ``log_level`` is not valid.
            Closed: the connection is closed.
            NotConnected: the client is not started.
        """
        if not isinstance(notifications, dict):
            raise InvalidRequest("the subscription filter is not an object")
        meta_obj = request_meta(self._client_info, capabilities, log_level, None, None)
        with self._cond:
            self._check_open_locked()
            subscription_id = self._next_id
            self._next_id += 1
            subscription = Subscription(self, self._streams, subscription_id, on_event, on_ack)
            self._streams[subscription_id] = subscription
        message = Request(
            subscription_id, "subscriptions/listen", {"notifications": notifications, "_meta": meta_obj}
        )
        thread = threading.Thread(
            target=self._send_listen,
            args=(subscription, message),
            name=f"mcpbridge-upstream-listen-{subscription_id}",
            daemon=True,
        )
        with self._cond:
            self._listen_threads = [t for t in self._listen_threads if t.is_alive()]
            self._listen_threads.append(thread)
        thread.start()
        return subscription

    # ------------------------------------------------------------ internals

    def _prepare(
        self,
        method: str,
        params: dict[str, Any] | None,
        options: RequestOptions,
        on_log: Callable[[dict[str, Any]], None] | None,
        *,
        waits: bool,
    ) -> tuple[PendingRequest, dict[str, Any], float]:
        """Check a request and give it an id: its entry, its params with their ``_meta``, its start.

        Raises:
            TypeError: an option that :class:`~.call.RequestOptions` does not name.
            InvalidMeta, InvalidRequest, Closed, NotConnected: as :meth:`request`.
        """
        unknown = sorted(set(options) - RequestOptions.__optional_keys__)
        if unknown:
            raise TypeError(f"unexpected option {unknown[0]!r}")
        body, caller_meta = split_params(params)
        meta = request_meta(
            self._client_info,
            options.get("capabilities"),
            options.get("log_level"),
            caller_meta,
            options.get("meta"),
        )
        started = time.monotonic()
        on_progress = options.get("on_progress")
        entry = self._register(method, on_progress, on_log, waits=waits)
        if on_progress is not None:
            meta["progressToken"] = entry.id
        body["_meta"] = meta
        return entry, body, started

    def _check_open_locked(self) -> None:
        if self._closed is not None:
            raise fresh(self._closed)
        if self._closing:
            raise Closed("the client is closed")
        if not self._started:
            raise NotConnected("the client is not started")

    def _register(
        self,
        method: str,
        on_progress: Callable[[dict[str, Any]], None] | None,
        on_log: Callable[[dict[str, Any]], None] | None,
        *,
        waits: bool = True,
    ) -> PendingRequest:
        with self._lock:
            if self._closed is not None or self._closing or not self._started:
                self._check_open_locked()
            ready = self._thread_condition() if waits else None
            entry = PendingRequest(self._next_request_id_locked(), method, on_progress, on_log, ready)
            self._pending[entry.id] = entry
        return entry

    def _exchange(
        self,
        entry: PendingRequest,
        message: Request,
        deadline: float,
        timeout: float,
        cancel: CancelToken | None,
        allowed: frozenset[str],
    ) -> dict[str, Any]:
        sent, send_error, outcome, why, reason = self._send_and_wait(entry, message, deadline, cancel)
        if why is Interrupt.TIMEOUT:
            detail = f"{entry.method}: no response in {format_duration(timeout)}"
            if sent:
                self._send_cancelled(entry.id, f"no response in {format_duration(timeout)}")
            raise RequestTimeout(detail)
        if why is Interrupt.CANCEL:
            if sent:
                self._send_cancelled(entry.id, reason or "the client canceled the request")
            raise Cancelled(reason or None)
        if outcome is None:
            assert send_error is not None
            raise send_error
        return result_of(entry.method, outcome, allowed)

    def _send_listen(self, subscription: Subscription, message: Request) -> None:
        """The thread of one listen request: send it (over HTTP: for the life of the stream)."""
        with self._cond:
            if subscription._ended:
                return
        self._local.entry = None
        try:
            self._transport.send(message, cancel=subscription._token)
        except McpError as exc:
            with self._cond:
                subscription._finish_locked(exc)
            return
        with self._cond:
            subscription._sent = True
            # Canceled while the request went out: the cancellation must follow the request.
            notify = subscription._cancelled_by_us and not subscription._cancel_sent
            if notify:
                subscription._cancel_sent = True
            reason = subscription._cancel_reason
        if notify:
            self._send_cancelled(subscription.id, reason or "the client canceled the subscription")

    def _fail_all_locked(self, error: McpError) -> list[Entry]:
        """Fail every request and stream; return the requests of :meth:`begin` to notify (after the lock)."""
        done = self._fail_pending_locked(error)
        for subscription in list(self._streams.values()):
            subscription._finish_locked(fresh(error))
        self._streams.clear()
        self._cond.notify_all()
        return done

    # ------------------------------------------------- delivery (any thread)

    def _on_closed(self, error: McpError | None) -> None:
        self._drops.flush()
        with self._cond:
            done = self._fail_all_locked(error if error is not None else Closed("the connection is closed"))
        for entry in done:
            self._notify_done(entry)

    def _on_message(self, message: Message) -> None:
        if isinstance(message, (Response, ErrorResponse)):
            self._on_response(message)
        elif isinstance(message, Notification):
            self._on_notification_message(message)
        else:
            self._drops(
                logging.WARNING,
                "dropped requests of the upstream server",
                "dropped the request %s of the upstream server: a server of revision %s sends none",
                escaped(message.method),
                MODERN,
            )

    def _on_response(self, message: Response | ErrorResponse) -> None:
        if message.id is None:
            assert isinstance(message, ErrorResponse)
            self._drop_error_without_id(message.error.code)
            return
        with self._lock:
            entry = self._settle_locked(message.id, lambda _entry: message)
            if entry is not None:
                notify = entry.settled_locked()
            else:
                subscription = self._streams.get(message.id)
                if subscription is not None:
                    error = RpcError(message.error) if isinstance(message, ErrorResponse) else None
                    subscription._finish_locked(error)
                    return
        if entry is None:
            self._drop_unmatched("a response", message.id)
            return
        if notify:
            self._notify_done(entry)

    def _on_frame_error(self, error: FrameError | TooLong) -> None:
        # Only a line shaped as a response stands for the answer that was lost: a bad
        # request of the server with the id of one of ours leaves that one waiting.
        line = bad_line(error)
        request_id, what = line.answered, line.what
        if request_id is not None:
            with self._lock:
                entry = self._settle_locked(request_id, lambda found: line.error(f"{found.method}: "))
                if entry is not None:
                    notify = entry.settled_locked()
                else:
                    subscription = self._streams.get(request_id)
                    if subscription is not None:
                        subscription._finish_locked(line.error("subscriptions/listen: "))
                        return
            if entry is not None:
                if notify:
                    self._notify_done(entry)
                return
        if request_id is not None:
            self._drop_unmatched(what, request_id)
        else:
            self._drops(
                logging.WARNING,
                "dropped lines that are not valid messages",
                "dropped %s from the upstream server",
                what,
            )

    def _on_notification_message(self, message: Notification) -> None:
        params = message.params if message.params is not None else {}
        method = message.method
        if method == "notifications/progress":
            self._on_progress(params)
            return
        if method == "notifications/cancelled":
            request_id = _as_id(params.get("requestId"))
            with self._cond:
                subscription = self._streams.get(request_id) if request_id is not None else None
                if subscription is not None:
                    # The server tore the stream down: a graceful end, as with its result.
                    subscription._finish_locked(None)
                    return
            self._drops(
                logging.DEBUG,
                "dropped late cancellations",
                "dropped a notifications/cancelled for no listen stream",
            )
            return
        meta = params.get("_meta")
        subscription_id = _as_id(meta.get(META_SUBSCRIPTION_ID)) if isinstance(meta, dict) else None
        if subscription_id is not None:
            with self._cond:
                subscription = self._streams.get(subscription_id)
            if subscription is None:
                self._drops(
                    logging.DEBUG,
                    "dropped notifications of closed listen streams",
                    "dropped %s for a listen stream that is not open",
                    escaped(method),
                )
            elif method == LISTEN_ACKNOWLEDGED:
                self._on_acknowledged(subscription, params)
            else:
                event_callback = subscription._on_event
                _call(method, lambda: event_callback(message))
            return
        if method == "notifications/message":
            entry: PendingRequest | None = getattr(self._local, "entry", None)
            if entry is not None and entry.on_log is not None:
                log_callback = entry.on_log
                _call(method, lambda: log_callback(params))
                return
        notification_callback = self._on_notification
        if notification_callback is not None:
            _call(method, lambda: notification_callback(message))
        else:
            self._drops(
                logging.DEBUG,
                "dropped notifications of the upstream server",
                "dropped the notification %s of the upstream server",
                escaped(method),
            )

    def _on_progress(self, params: dict[str, Any]) -> None:
        token = _as_id(params.get("progressToken"))
        with self._cond:
            entry = self._pending.get(token) if token is not None else None
            callback = entry.on_progress if isinstance(entry, PendingRequest) else None
        if callback is None:
            self._drops(
                logging.DEBUG,
                "dropped late progress notifications",
                "dropped a progress notification for no request in flight that asked for progress",
            )
            return
        _call("notifications/progress", lambda: callback(params))

    def _on_acknowledged(self, subscription: Subscription, params: dict[str, Any]) -> None:
        honored = params.get("notifications")
        if not isinstance(honored, dict):
            honored = {}
        ack_callback = subscription._on_ack
        if ack_callback is not None:
            _call(LISTEN_ACKNOWLEDGED, lambda: ack_callback(honored))
        with self._cond:
            if subscription._honored is None:
                subscription._honored = honored
                self._cond.notify_all()


#: How the front end gets a started client of its upstream server: called with the client
#: info of the host and the callback of the notifications that belong to no request. The one
#: type of it for the command form, the URL form and the sign-in.
Connect = Callable[[dict[str, Any], Callable[[Notification], None]], Client]
