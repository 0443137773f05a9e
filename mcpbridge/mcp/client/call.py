"""One request of the 2026-07-28 client and its outcome: :class:`Call`, its options and its result.

:meth:`~.client.Client.request` waits for a request; :meth:`~.client.Client.begin`
sends one and hands back a :class:`Call` whose outcome comes to ``on_done``.
Both take the options of :class:`RequestOptions`, give the params their
``_meta`` with :func:`request_meta`, keep the request in the pending table as a
:class:`PendingRequest`, and read its answer with :func:`result_of`.

The states of a call
--------------------

A :class:`Call` is in one :class:`CallState` at a time, read from the fields of
its pending entry (``sent``, ``outcome``, ``interrupted``, ``notified``), which
change only under the client's lock. These orders are legal
(:data:`CALL_TRANSITIONS`)::

    NEW ──────────► SENT ──────► ANSWERED ────┐
     │                │                       ├──► NOTIFIED ──► TAKEN
     └──► ANSWERED    └────────► INTERRUPTED ─┘

* ``NEW``: in the pending table, its send under way.
* ``SENT``: the send returned; no outcome yet.
* ``ANSWERED``: it has its outcome: a response, an error response, a failed
  send, or the close of the connection. The answer may come before the send
  is recorded (``NEW`` to ``ANSWERED``); ``sent`` is then set later and the
  call stays ``ANSWERED``.
* ``INTERRUPTED``: the caller's cancel token or the deadline ended it
  (:class:`~.peer.Interrupt`). Both are armed once the request went out, so
  only a ``SENT`` call is interrupted; the first of an answer and an
  interruption wins.
* ``NOTIFIED``: ``on_done`` got the call, once.
* ``TAKEN``: :meth:`Call.result` gave its result or raised, once.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final, TypedDict

from .. import jsonrpc
from ..cancel import CancelToken
from ..errors import (
    Cancelled,
    InvalidMeta,
    InvalidRequest,
    InvalidResponse,
    McpError,
    RequestTimeout,
    RpcError,
)
from ..jsonrpc import ErrorResponse, RequestId, Response
from ..protocol import (
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN,
    RESERVED_META_PREFIXES,
    RESULT_COMPLETE,
    RESULT_INPUT_REQUIRED,
    RESULT_TASK,
    SDK_OWNED_META_KEYS,
)
from ..text import escaped, format_duration
from ..transports import run_callback
from .peer import Entry, Interrupt, Outcome, Peer

__all__ = [
    "CALL_TRANSITIONS",
    "Call",
    "CallState",
    "PendingRequest",
    "RequestOptions",
    "allowed_results",
    "object_result",
    "request_meta",
    "result_of",
    "split_params",
    "traced",
]

log = logging.getLogger("mcpbridge.upstream")


def object_result(method: str, result: Any) -> dict[str, Any]:
    """The ``result`` of a request of ``method``, which is an object in every MCP revision.

    Raises:
        InvalidResponse: it is a number, a string, an array, null or a boolean.
    """
    if not isinstance(result, dict):
        raise InvalidResponse(f"{method}: the result is not an object")
    return result


def traced(
    fetch: Callable[[], dict[str, Any]],
    trace: Callable[[RequestId, str, float], None] | None,
    request_id: RequestId,
    started: float,
) -> dict[str, Any]:
    """What ``fetch()`` returns or raises; then ``trace`` gets the request's outcome and its seconds.

    The outcome is the ``resultType`` of the result, ``error <code>`` for a
    JSON-RPC error, the cause of another error of the MCP layer, or ``internal``.
    """
    outcome = "internal"
    try:
        result = fetch()
        outcome = str(result.get("resultType", "complete"))
        return result
    except RpcError as exc:
        outcome = f"error {exc.error.code}"
        raise
    except McpError as exc:
        outcome = exc.cause
        raise
    finally:
        if trace is not None:
            elapsed = time.monotonic() - started
            run_callback("a trace", lambda: trace(request_id, outcome, elapsed), log)


def allowed_results(options: RequestOptions) -> frozenset[str]:
    """The ``resultType`` values besides ``complete`` that the options of a request allow."""
    allowed = set()
    if options.get("allow_input_required", False):
        allowed.add(RESULT_INPUT_REQUIRED)
    if options.get("allow_task", False):
        allowed.add(RESULT_TASK)
    return frozenset(allowed)


class PendingRequest(Entry):
    """One request of the client in flight, with its progress and log callbacks."""

    __slots__ = ("on_progress", "on_log")

    def __init__(
        self,
        request_id: RequestId,
        method: str,
        on_progress: Callable[[dict[str, Any]], None] | None,
        on_log: Callable[[dict[str, Any]], None] | None,
        ready: threading.Condition | None,
    ) -> None:
        super().__init__(request_id, method, ready)
        self.on_progress = on_progress
        self.on_log = on_log


class RequestOptions(TypedDict, total=False):
    """The options of :meth:`~.client.Client.request` and :meth:`~.client.Client.begin` beside ``timeout``.

    ``cancel`` fires to stop waiting; the server gets ``notifications/cancelled``.
    ``capabilities`` (the client capabilities, ``{}`` by default), ``log_level``
    and the keys of ``meta`` go into the request's ``_meta``.
    ``allow_input_required`` returns an ``input_required`` result instead of
    failing, ``allow_task`` a ``CreateTaskResult`` of the Tasks extension
    (``resultType: "task"``). ``on_progress`` gets the params of each ``notifications/progress``
    of the request. ``trace`` is called once at the end with the upstream id,
    the outcome (``complete``, ``input_required``, ``error <code>`` or the cause
    of the error) and the seconds it took.
    """

    cancel: CancelToken | None
    capabilities: dict[str, Any] | None
    log_level: str | None
    meta: dict[str, Any] | None
    allow_input_required: bool
    allow_task: bool
    on_progress: Callable[[dict[str, Any]], None] | None
    trace: Callable[[RequestId, str, float], None] | None


def split_params(params: dict[str, Any] | None) -> tuple[dict[str, Any], Any]:
    """A copy of a request's ``params`` without its ``_meta``, and that ``_meta`` (``None``: none).

    Raises:
        InvalidRequest: ``params`` is not an object.
    """
    if params is None:
        return {}, None
    if not isinstance(params, dict):
        raise InvalidRequest("params is not an object")
    base = dict(params)
    return base, base.pop("_meta", None)


def request_meta(
    client_info: dict[str, Any],
    capabilities: dict[str, Any] | None,
    log_level: str | None,
    *extras: Any,
) -> dict[str, Any]:
    """The ``_meta`` of a request: the revision, the client's capabilities and info, its log level.

    ``extras`` are the caller's ``_meta`` objects (``None``: none), whose keys are added.

    Raises:
        InvalidRequest: ``capabilities`` is not an object, or ``log_level`` is not known.
        InvalidMeta: an extra is not an object, or has a key of the protocol layer.
    """
    if capabilities is not None and not isinstance(capabilities, dict):
        raise InvalidRequest("the client capabilities are not an object")
    if log_level is not None and log_level not in LOG_LEVELS:
        raise InvalidRequest("the log level is not known")
    meta: dict[str, Any] = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_CAPABILITIES: capabilities if capabilities is not None else {},
        META_CLIENT_INFO: client_info,
    }
    if log_level is not None:
        meta[META_LOG_LEVEL] = log_level
    for extra in extras:
        if extra is None:
            continue
        if not isinstance(extra, dict):
            raise InvalidMeta("_meta is not an object")
        for key, value in extra.items():
            if (
                not isinstance(key, str)
                or key.startswith(RESERVED_META_PREFIXES)
                or key in SDK_OWNED_META_KEYS
            ):
                raise InvalidMeta(f"the _meta key {escaped(str(key))} belongs to the protocol layer")
            meta[key] = value
    return meta


def result_of(method: str, outcome: Outcome, allowed: frozenset[str]) -> dict[str, Any]:
    """The result that ``outcome`` gives a request of ``method``, or the error it raises.

    ``allowed`` holds the ``resultType`` values besides ``complete`` that the
    request accepts (see :func:`allowed_results`).
    """
    if isinstance(outcome, McpError):
        raise outcome
    if isinstance(outcome, ErrorResponse):
        raise RpcError(outcome.error)
    result = object_result(method, outcome.result)
    kind = result.get("resultType", RESULT_COMPLETE)
    if kind == RESULT_COMPLETE or kind in allowed:
        return result
    if kind in (RESULT_INPUT_REQUIRED, RESULT_TASK):
        raise InvalidResponse(f"{method}: a result of resultType {kind} where none is allowed")
    raise InvalidResponse(f"{method}: a result of an unknown resultType")


class CallState(enum.Enum):
    """Where a :class:`Call` is; see the module docstring and :data:`CALL_TRANSITIONS`."""

    NEW = "new"
    SENT = "sent"
    ANSWERED = "answered"
    INTERRUPTED = "interrupted"
    NOTIFIED = "notified"
    TAKEN = "taken"


#: The states that may follow each state of a :class:`Call`.
CALL_TRANSITIONS: Final[dict[CallState, frozenset[CallState]]] = {
    CallState.NEW: frozenset({CallState.SENT, CallState.ANSWERED}),
    CallState.SENT: frozenset({CallState.ANSWERED, CallState.INTERRUPTED}),
    CallState.ANSWERED: frozenset({CallState.NOTIFIED}),
    CallState.INTERRUPTED: frozenset({CallState.NOTIFIED}),
    CallState.NOTIFIED: frozenset({CallState.TAKEN}),
    CallState.TAKEN: frozenset(),
}


class Call:
    """A request of :meth:`~.client.Client.begin`: it went out, and its outcome comes to ``on_done``.

    ``on_done(call)`` runs once, on the thread that learned the outcome: the
    transport's delivering thread for an answer (the stdio reader thread), the
    timer thread at the deadline, the thread that fired the cancel token, or the
    thread that closed the connection. There the caller takes :meth:`result`,
    unless :attr:`needs_thread` says that it may block.
    """

    __slots__ = ("_client", "_entry", "_timeout", "_allowed", "_trace", "_started", "_taken")

    def __init__(
        self,
        client: Peer,
        entry: PendingRequest,
        timeout: float,
        allowed: frozenset[str],
        trace: Callable[[RequestId, str, float], None] | None,
        started: float,
    ) -> None:
        self._client = client
        self._entry = entry
        self._timeout = timeout
        self._allowed = allowed
        self._trace = trace
        self._started = started
        self._taken = False

    @property
    def id(self) -> RequestId:
        """The upstream id of the request."""
        return self._entry.id

    @property
    def method(self) -> str:
        return self._entry.method

    @property
    def raw(self) -> jsonrpc.RawStrings | None:
        """The long strings of the response line (see :class:`~.jsonrpc.RawStrings`), if any."""
        outcome = self._entry.outcome
        return outcome.raw if isinstance(outcome, Response) else None

    @property
    def needs_thread(self) -> bool:
        """True when :meth:`result` may block: it must tell the server of a cancellation or a timeout."""
        entry = self._entry
        return entry.interrupted is not None and entry.sent

    @property
    def cancelled(self) -> bool:
        """True when the caller's cancel token ended the call (not the deadline, not an answer)."""
        return self._entry.interrupted is Interrupt.CANCEL

    @property
    def state(self) -> CallState:
        """Where the call is now (see :class:`CallState`); another thread may move it on."""
        entry = self._entry
        if self._taken:
            return CallState.TAKEN
        if entry.notified:
            return CallState.NOTIFIED
        if entry.interrupted is not None:
            return CallState.INTERRUPTED
        if entry.outcome is not None:
            return CallState.ANSWERED
        return CallState.SENT if entry.sent else CallState.NEW

    def result(self, *, wait: bool = True) -> dict[str, Any]:
        """The result, once ``on_done`` ran; raises as :meth:`~.client.Client.request`. Call it once.

        After a cancellation or the deadline it first sends ``notifications/cancelled``
        for a request that went out (:attr:`needs_thread`). With ``wait=False`` that
        send never waits: when it finds no room it raises
        :class:`~.cancel.WouldBlock`, and the result is still there to take.
        """
        if self._taken:
            raise RuntimeError("the result of a call is taken once")
        client, entry = self._client, self._entry
        # Settled before on_done ran: these fields do not change any more.
        outcome, why, reason, sent = entry.outcome, entry.interrupted, entry.reason, entry.sent
        if why is not None and sent:
            detail = f"no response in {format_duration(self._timeout)}" if why is Interrupt.TIMEOUT else ""
            client._send_cancelled(entry.id, detail or reason or "the client canceled the request", wait=wait)
        self._taken = True

        def take() -> dict[str, Any]:
            if why is Interrupt.TIMEOUT:
                raise RequestTimeout(f"{entry.method}: no response in {format_duration(self._timeout)}")
            if why is Interrupt.CANCEL:
                raise Cancelled(reason or None)
            if outcome is None:
                raise RuntimeError("the call has no outcome yet")
            return result_of(entry.method, outcome, self._allowed)

        return traced(take, self._trace, entry.id, self._started)
