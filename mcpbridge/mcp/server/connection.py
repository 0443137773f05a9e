"""The connection runtime of a :class:`~.server.Server`: one transport, its requests, its listen streams.

:class:`ServerConnection` serves one
:class:`~mcpbridge.mcp.transports.ServerTransport` for a server; each request's
handler gets a :class:`Context`. The rules it keeps are those of
:mod:`mcpbridge.mcp.server`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .. import jsonrpc, protocol, state
from ..cancel import CancelToken
from ..droplog import DropLog
from ..errors import Cancelled, InvalidRequest, McpError
from ..ids import recover_id
from ..jsonrpc import (
    ErrorObject,
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from ..transports import ServerTransport
from ..transports.framing import TooLong
from .results import InputRequired, RequestError

__all__ = [
    "SUPPORTED_VERSIONS",
    "Context",
    "Handler",
    "RequestMeta",
    "Served",
    "ServerConnection",
]

log = logging.getLogger("mcpbridge.server")

#: The revisions this server speaks.
SUPPORTED_VERSIONS: Final = (protocol.MODERN,)


# ------------------------------------------------------------------ context


@dataclass(frozen=True)
class RequestMeta:
    """The parsed ``_meta`` of one request."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: RequestId | None


class Context:
    """What a handler knows about its request, and how it talks back.

    Attributes:
        server: the :class:`~mcpbridge.mcp.server.Server` (typed as what the
            connection needs of it, :class:`Served`).
        request_id: the JSON-RPC id of the request.
        method: the method, for example ``"tools/call"``.
        target: the tool or prompt name, or the resource URI; ``""`` otherwise.
        cancel: fires when the client cancels the request or the server stops.
            A slow handler polls ``cancel.cancelled`` or waits with :meth:`sleep`.
        input_responses: the answers to the input requests of the previous
            round, by key (``{}`` in the first round).
        state: the value given to :class:`InputRequired` in the previous round,
            after its signature was checked; ``None`` in the first round.
    """

    def __init__(
        self,
        connection: ServerConnection,
        request: Request,
        meta: RequestMeta,
        cancel: CancelToken,
        *,
        target: str = "",
        input_responses: dict[str, Any] | None = None,
        state: Any = None,
    ) -> None:
        self._connection = connection
        self._meta = meta
        self._last_progress: float | None = None
        self.server = connection.server
        self.request_id = request.id
        self.method = request.method
        self.target = target
        self.cancel = cancel
        self.input_responses: dict[str, Any] = input_responses or {}
        self.state = state

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities the client declared for this request."""
        return self._meta.client_capabilities

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The self-reported identity of the client, if it sent one."""
        return self._meta.client_info

    @property
    def protocol_version(self) -> str:
        return self._meta.protocol_version

    @property
    def log_level(self) -> str | None:
        """The log level the client asked for with this request, or ``None`` (no logs)."""
        return self._meta.log_level

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress``, if the request has a progress token.

        ``progress`` must grow from one call to the next; a value that does not
        grow is dropped, as is anything after a cancellation.
        """
        token = self._meta.progress_token
        if token is None or self.cancel.cancelled:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._connection.send(Notification("notifications/progress", params))

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` if the request's log level admits ``level``.

        Raises:
            ValueError: ``level`` is not one of :data:`~mcpbridge.mcp.protocol.LOG_LEVELS`.
        """
        if level not in protocol.LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        wanted = self._meta.log_level
        if wanted is None or self.cancel.cancelled:
            return
        if protocol.LOG_LEVELS.index(level) < protocol.LOG_LEVELS.index(wanted):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._connection.send(Notification("notifications/message", params))

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less when the request is canceled.

        Raises:
            Cancelled: the request was canceled.
        """
        if self.cancel.wait(max(0.0, seconds)):
            raise Cancelled(self.cancel.reason or None)

    def check_cancelled(self) -> None:
        """Raises: Cancelled: the request was canceled."""
        if self.cancel.cancelled:
            raise Cancelled(self.cancel.reason or None)


# ----------------------------------------------------------------- registry


Handler = Callable[[Context, dict[str, Any]], dict[str, Any]]
"""A method handler of the server: the request's context and params in, its result out."""


class Served(Protocol):
    """What a connection needs of its server; :class:`~.server.Server` is the one there is.

    Its limits and caching hints, the handler of each method, the input rounds
    (a requestState is signed and checked with ``_signer``), the ``_meta`` of
    every result, and the end of a connection.
    """

    max_in_flight: int
    max_line_bytes: int
    shutdown_grace: float
    ttl_ms: int
    cache_scope: str
    _signer: state.StateSigner

    def honored_filter(self, wanted: dict[str, Any]) -> dict[str, Any]: ...

    def _lookup(self, method: str) -> Handler | None: ...

    def _input_required(self, ctx: Context, params: dict[str, Any], exc: InputRequired) -> dict[str, Any]: ...

    def _binding(self, method: str, target: str, params: dict[str, Any]) -> str: ...

    def _result_meta(self) -> dict[str, Any]: ...

    def _forget(self, connection: ServerConnection) -> None: ...


# --------------------------------------------------------------- listen streams


@dataclass
class _Subscription:
    id: RequestId
    honored: dict[str, Any]
    lock: threading.RLock = field(default_factory=threading.RLock)
    ended: bool = False

    def wants(self, method: str, uri: str | None) -> bool:
        if method == protocol.RESOURCE_UPDATED:
            subscribed = self.honored.get("resourceSubscriptions") or []
            return uri is not None and any(_covers(s, uri) for s in subscribed)
        flag = _FILTER_FLAGS.get(method)
        return flag is not None and self.honored.get(flag) is True


#: The filter flag of each list-change notification.
_FILTER_FLAGS: Final = {
    protocol.LIST_CHANGED["tools"]: "toolsListChanged",
    protocol.LIST_CHANGED["prompts"]: "promptsListChanged",
    protocol.LIST_CHANGED["resources"]: "resourcesListChanged",
}


def _covers(subscribed: str, uri: str) -> bool:
    """Whether an update of ``uri`` concerns a subscription to ``subscribed`` (itself or a sub-resource)."""
    return uri == subscribed or uri.startswith(subscribed.rstrip("/") + "/")


# ------------------------------------------------------------------- server


# ------------------------------------------------------------ the connection


@dataclass
class _Active:
    """A request in flight."""

    id: RequestId
    method: str
    cancel: CancelToken
    cancelled: bool = False
    finished: bool = False
    subscription: _Subscription | None = None


class ServerConnection:
    """One transport served by a :class:`~.server.Server`. Made by :meth:`~.server.Server.start`."""

    def __init__(self, server: Served, transport: ServerTransport, *, shutdown_on_close: bool = True) -> None:
        self.server = server
        self._transport = transport
        self._shutdown_on_close = shutdown_on_close
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active: dict[RequestId, _Active] = {}
        self._subscriptions: dict[RequestId, _Subscription] = {}
        self._closing = False
        self._closed = threading.Event()
        self._shutdown_done = threading.Event()
        self._shutdown_lock = threading.Lock()
        #: The log lines that the client can make repeat, one line a kind every 10 s.
        self._drops = DropLog(log)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=server.max_in_flight, thread_name_prefix="mcpbridge-server"
        )

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._transport.start(self._on_message, self._on_frame_error, self._on_closed)

    @property
    def closed(self) -> bool:
        """Whether the transport closed (the input ended)."""
        return self._closed.is_set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the transport closes; ``None`` waits as long as it takes. Returns whether it closed."""
        if timeout is not None:
            return self._closed.wait(timeout)
        while not self._closed.wait(1.0):
            pass
        return True

    def wait_shutdown(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the end of :meth:`shutdown`; tell whether it ended."""
        return self._shutdown_done.wait(timeout)

    def close(self) -> None:
        """Stop taking requests and shut down (see :meth:`shutdown`), which closes the transport."""
        self._closed.set()
        self.shutdown()

    def shutdown(self) -> None:
        """End the listen streams, give requests in flight the grace time, cancel the rest, close.

        Idempotent; returns after about ``2 * shutdown_grace`` seconds at most.
        """
        with self._shutdown_lock:
            if self._shutdown_done.is_set():
                return
            with self._lock:
                self._closing = True
            self.end_listen_streams("the server is shutting down")
            grace = self.server.shutdown_grace
            late: list[_Active] = []
            with self._idle:
                if not self._idle.wait_for(lambda: not self._active, timeout=grace):
                    late = [a for a in self._active.values() if not a.finished]
                    for active in late:
                        active.cancelled = True
            for active in late:
                active.cancel.cancel("the server is shutting down")
            with self._idle:
                finished = self._idle.wait_for(lambda: not self._active, timeout=grace)
                stuck = len(self._active)
            if finished:
                self._pool.shutdown(wait=True)
            else:
                log.warning("%d requests did not stop within %s s of their cancellation", stuck, grace)
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._transport.close()
            self.server._forget(self)
            self._drops.flush()
            self._shutdown_done.set()

    # --------------------------------------------------------------- sending

    def send(self, message: Message) -> None:
        """Send one message; a closed transport drops it."""
        try:
            self._transport.send(message)
        except McpError as exc:
            log.debug("dropped a message to a closed connection: %s", exc.cause)

    def _send_error(
        self, request_id: RequestId | None, code: int, message: str, data: Any = jsonrpc.NO_DATA
    ) -> None:
        self.send(ErrorResponse(request_id, ErrorObject(code, message, data)))

    # --------------------------------------------------------------- reading

    def _on_closed(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._shutdown_on_close:
            # Not on this thread: the memory link closes on the client's thread,
            # and the shutdown waits for requests in flight.
            threading.Thread(target=self.shutdown, name="mcpbridge-server-shutdown", daemon=True).start()

    def _on_frame_error(self, error: FrameError | TooLong) -> None:
        if isinstance(error, TooLong):
            self._send_error(
                recover_id(error.head, error.tail),
                jsonrpc.INVALID_REQUEST,
                f"Invalid Request: the line is too long (limit: {self.server.max_line_bytes} bytes)",
            )
            return
        if error.is_response:
            return  # a client sends no responses in 2026-07-28; nothing to answer
        if error.cause == "parse_error":
            self._send_error(None, jsonrpc.PARSE_ERROR, "Parse error")
        elif error.cause == "too_deep":
            self._send_error(error.id, jsonrpc.INVALID_REQUEST, f"Invalid Request: too deep ({error.detail})")
        else:
            self._send_error(error.id, jsonrpc.INVALID_REQUEST, "Invalid Request")

    def _on_message(self, message: Message) -> None:
        if isinstance(message, Request):
            self._on_request(message)
        elif isinstance(message, Notification):
            if message.method == "notifications/cancelled":
                self._on_cancelled(message.params or {})
            else:
                self._drops(
                    logging.DEBUG,
                    "ignored notifications of the client",
                    "ignored the notification %s",
                    message.method[:100],
                )
        # A client sends no responses in 2026-07-28: drop them.

    def _on_request(self, request: Request) -> None:
        # initialize with a 2026-07-28 _meta is just a method this revision removed: -32601 below.
        server = self.server
        if request.method == "initialize" and not _has_modern_meta(request.params):
            # A 2025-era client: name the revisions we speak, so it can tell the era.
            requested = (request.params or {}).get("protocolVersion")
            self._send_error(
                request.id,
                jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {
                    "supported": list(SUPPORTED_VERSIONS),
                    "requested": requested if isinstance(requested, str) else "",
                },
            )
            return
        is_listen = request.method == "subscriptions/listen"
        handler = server._lookup(request.method)
        if handler is None and not is_listen:
            self._send_error(
                request.id, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {request.method[:100]}"
            )
            return
        try:
            meta = _parse_meta(request.params)
        except RequestError as exc:
            self.send(ErrorResponse(request.id, exc.error))
            return
        active = _Active(request.id, request.method, CancelToken())
        refusal: tuple[int, str] | None = None
        with self._lock:
            if self._closing:
                return
            if request.id in self._active:
                refusal = (
                    jsonrpc.INVALID_REQUEST,
                    "Invalid Request: the id is in use by a request in flight",
                )
            elif len(self._active) >= server.max_in_flight:
                refusal = (jsonrpc.INTERNAL_ERROR, "Too many requests in flight")
            else:
                self._active[request.id] = active
        if refusal is not None:
            self._drops(
                logging.WARNING,
                f"rejected requests: {refusal[1]}",
                "rejected request %r (%s): %s",
                request.id,
                request.method[:100],
                refusal[1],
            )
            self._send_error(request.id, *refusal)
            return
        if is_listen:
            self._open_listen(active, request)
            return
        assert handler is not None
        try:
            self._pool.submit(self._run, active, request, meta, handler)
        except RuntimeError:  # the pool shut down under us
            self._finish(active, None)

    def _on_cancelled(self, params: dict[str, Any]) -> None:
        request_id = params.get("requestId")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        reason = params.get("reason")
        with self._lock:
            active = self._active.get(request_id)
            if active is None or active.finished or active.cancelled:
                return
            active.cancelled = True
            if active.subscription is not None:
                active.subscription.ended = True
                self._subscriptions.pop(request_id, None)
                del self._active[request_id]
                self._idle.notify_all()
        active.cancel.cancel(reason if isinstance(reason, str) else "")

    # ------------------------------------------------------------- requests

    def _run(self, active: _Active, request: Request, meta: RequestMeta, handler: Handler) -> None:
        server = self.server
        params = dict(request.params or {})
        response: Message | None = None
        try:
            ctx = self._context(active, request, meta, params)
            try:
                result = handler(ctx, params)
            except InputRequired as exc:
                result = server._input_required(ctx, params, exc)
            result.setdefault("resultType", protocol.RESULT_COMPLETE)
            complete = result["resultType"] == protocol.RESULT_COMPLETE
            if complete and request.method in protocol.CACHEABLE_METHODS:
                result.setdefault("ttlMs", server.ttl_ms)
                result.setdefault("cacheScope", server.cache_scope)
            result_meta = dict(result.get("_meta") or {})
            result_meta.update(server._result_meta())
            result["_meta"] = result_meta
            response = Response(request.id, result)
        except RequestError as exc:
            response = ErrorResponse(request.id, exc.error)
        except Cancelled:
            response = None
        except Exception as exc:
            if not active.cancel.cancelled:
                self._drops(
                    logging.ERROR, "failed handlers", "the handler of %s failed", request.method, exc_info=exc
                )
            response = ErrorResponse(request.id, ErrorObject(jsonrpc.INTERNAL_ERROR, "Internal error"))
        self._finish(active, response)

    def _finish(self, active: _Active, response: Message | None) -> None:
        with self._lock:
            active.finished = True
            deliver = response is not None and not active.cancelled
        if deliver:
            assert response is not None
            try:
                self._transport.send(response)
            except InvalidRequest:  # the result is not JSON (a handler returned a set, NaN, ...)
                self._drops(
                    logging.ERROR,
                    "results that cannot be written as JSON",
                    "the result of request %r cannot be written as JSON",
                    active.id,
                )
                self._send_error(active.id, jsonrpc.INTERNAL_ERROR, "Internal error")
            except McpError as exc:
                log.debug("dropped the response to %r: %s", active.id, exc.cause)
        with self._idle:
            self._active.pop(active.id, None)
            self._idle.notify_all()

    def _context(
        self, active: _Active, request: Request, meta: RequestMeta, params: dict[str, Any]
    ) -> Context:
        target = ""
        if request.method in ("tools/call", "prompts/get"):
            name = params.get("name")
            if not isinstance(name, str):
                raise RequestError(jsonrpc.INVALID_PARAMS, "Invalid params: name must be a string")
            target = name
        elif request.method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise RequestError(jsonrpc.INVALID_PARAMS, "Invalid params: uri must be a string")
            target = uri
        responses: dict[str, Any] = {}
        request_state: Any = None
        if request.method in protocol.INPUT_METHODS:
            raw_responses = params.get("inputResponses")
            if raw_responses is not None and not isinstance(raw_responses, dict):
                raise RequestError(jsonrpc.INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            responses = dict(raw_responses or {})
            if "requestState" in params:
                binding = self.server._binding(request.method, target, params)
                try:
                    request_state = self.server._signer.verify(params["requestState"], binding=binding)
                except state.InvalidState as exc:
                    self._drops(
                        logging.INFO,
                        "refused request states",
                        "refused the requestState of request %r: %s",
                        request.id,
                        exc,
                    )
                    raise RequestError(jsonrpc.INVALID_PARAMS, "the requestState is not valid") from exc
        return Context(
            self, request, meta, active.cancel, target=target, input_responses=responses, state=request_state
        )

    # ------------------------------------------------------------- listening

    def _open_listen(self, active: _Active, request: Request) -> None:
        params = request.params or {}
        wanted = params.get("notifications")
        problem = _filter_problem(wanted)
        if problem is not None:
            with self._idle:
                self._active.pop(active.id, None)
                self._idle.notify_all()
            self._send_error(request.id, jsonrpc.INVALID_PARAMS, f"Invalid params: {problem}")
            return
        assert isinstance(wanted, dict)
        subscription = _Subscription(request.id, self.server.honored_filter(wanted))
        # Hold the stream's lock from before it is visible to publishers until the
        # acknowledgment is written: no event can overtake it.
        with subscription.lock:
            with self._lock:
                if active.cancelled:  # canceled on another thread before it started
                    self._active.pop(active.id, None)
                    self._idle.notify_all()
                    return
                active.subscription = subscription
                self._subscriptions[request.id] = subscription
            self.send(
                Notification(
                    protocol.LISTEN_ACKNOWLEDGED,
                    {
                        "_meta": {protocol.META_SUBSCRIPTION_ID: request.id},
                        "notifications": subscription.honored,
                    },
                )
            )

    def publish(self, method: str, uri: str | None) -> None:
        """Write one event to each listen stream of this connection that wants it."""
        with self._lock:
            subscriptions = list(self._subscriptions.values())
        for subscription in subscriptions:
            if not subscription.wants(method, uri):
                continue
            params: dict[str, Any] = {"_meta": {protocol.META_SUBSCRIPTION_ID: subscription.id}}
            if uri is not None:
                params["uri"] = uri
            with subscription.lock:
                if not subscription.ended:
                    self.send(Notification(method, params))

    def end_listen_streams(self, reason: str) -> None:
        """End each listen stream: its result, then ``notifications/cancelled`` with its id."""
        with self._idle:
            ending = list(self._subscriptions.values())
            self._subscriptions.clear()
            for subscription in ending:
                active = self._active.pop(subscription.id, None)
                if active is not None:
                    active.finished = True
            self._idle.notify_all()
        for subscription in ending:
            with subscription.lock:
                if subscription.ended:
                    continue
                subscription.ended = True
                meta = self.server._result_meta()
                meta[protocol.META_SUBSCRIPTION_ID] = subscription.id
                self.send(Response(subscription.id, {"resultType": protocol.RESULT_COMPLETE, "_meta": meta}))
                cancelled = {"requestId": subscription.id, "reason": reason}
                self.send(Notification("notifications/cancelled", cancelled))


def _filter_problem(wanted: Any) -> str | None:
    if not isinstance(wanted, dict):
        return "notifications must be an object"
    for flag in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
        if flag in wanted and not isinstance(wanted[flag], bool):
            return f"notifications.{flag} must be a boolean"
    uris = wanted.get("resourceSubscriptions")
    if uris is not None and (not isinstance(uris, list) or not all(isinstance(u, str) for u in uris)):
        return "notifications.resourceSubscriptions must be an array of strings"
    return None


def _parse_meta(params: dict[str, Any] | None) -> RequestMeta:
    """The ``_meta`` of a request.

    Raises:
        RequestError: -32602 for a missing or malformed member, -32022 for an
            unsupported revision.
    """
    meta = (params or {}).get("_meta")
    if not isinstance(meta, dict):
        raise RequestError(jsonrpc.INVALID_PARAMS, "Invalid params: the request has no _meta")
    version = meta.get(protocol.META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise RequestError(
            jsonrpc.INVALID_PARAMS, f"Invalid params: _meta needs {protocol.META_PROTOCOL_VERSION}"
        )
    if version not in SUPPORTED_VERSIONS:
        raise RequestError(
            jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )
    capabilities = meta.get(protocol.META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise RequestError(
            jsonrpc.INVALID_PARAMS, f"Invalid params: _meta needs {protocol.META_CLIENT_CAPABILITIES}"
        )
    level = meta.get(protocol.META_LOG_LEVEL)
    if level is not None and level not in protocol.LOG_LEVELS:
        raise RequestError(jsonrpc.INVALID_PARAMS, "Invalid params: unknown log level")
    info = meta.get(protocol.META_CLIENT_INFO)
    token = meta.get("progressToken")
    if not isinstance(token, (str, int)) or isinstance(token, bool):
        token = None
    return RequestMeta(
        protocol_version=version,
        client_capabilities=capabilities,
        client_info=info if isinstance(info, dict) else None,
        log_level=level,
        progress_token=token,
    )


def _has_modern_meta(params: Any) -> bool:
    """Tell whether request params carry the 2026-07-28 protocol-version key in ``_meta``."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
