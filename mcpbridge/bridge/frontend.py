"""The front end: one 2025-11-25 client connection on a pair of byte streams.

Theory of operation
-------------------

The **reader** thread reads the client's lines, parses them and classifies
them. It answers ``ping``, ``logging/setLevel``, ``server/discover`` and every
bad line itself, resolves the client's answers to the bridge's own requests,
and hands every other request to a **slot**: a task of a bounded
``ThreadPoolExecutor``. The reader never waits for a slot: at the limit of
requests in flight a request gets ``too_many_requests`` at once, so the reader
always reads cancellations and answers.

Each slot owns a :class:`Slot` with a cancel token. A slot writes its response
once; the check that it may write and the write are one step under the
**output lock**, and a canceled slot writes nothing. Every frame goes out under
the output lock as one line and is flushed. After the output closes nothing is
written.

The **fast path** of a forwarded request (``Options.forward_on_reader``, the
stdio form): its slot is admitted as usual, but no slot thread runs it. The
reader sends the first round upstream itself (:meth:`Client.begin
<mcpbridge.mcp.client.Client.begin>`, which never waits for room), and the
thread that learns the outcome answers: the upstream's reader thread shapes a
complete result or an error and writes it, a cancellation read by the reader
is passed upstream at once. Only what may block goes on on a slot thread: the
input rounds of an ``input_required`` result, the time limit, a send that
found no room. So a call costs two threads that were waiting on their pipes
anyway, and no hand-off between threads.

Rules of the lifecycle (the table is :data:`LIFECYCLE`):

* Only the ``initialize`` that moves the state from ``AWAITING`` to
  ``INITIALIZING`` starts the upstream server.
* A failed discover returns to ``AWAITING``, so a new ``initialize`` can retry.
* The state becomes ``READY`` before the initialize response is written,
  because the client's next requests can come at once.
* ``CLOSING`` admits nothing. After the end of the input a request gets no
  response; after the loss of the upstream server it gets ``upstream_exited``.

A **watcher** thread looks at the upstream every 200 ms: when a child process
is gone it answers every request in flight with ``upstream_exited`` and ends
the connection. It also logs requests that wait for a long time.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from ..mcp import jsonrpc
from ..mcp.cancel import CancelToken, WouldBlock
from ..mcp.client import Call, Client
from ..mcp.errors import Cancelled, Closed, McpError, RequestTimeout, RpcError
from ..mcp.framing import LineReader, TooLong
from ..mcp.jsonrpc import (
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from ..mcp.protocol import INPUT_METHODS, MODERN
from ..oauth.errors import SignInError
from . import errortable, legacy, translate
from . import input as input_rules
from .listrules import ListRules
from .lists import ToolFilter
from .pending import BAD_LINE, ClientError, PendingAnswers, WaitEnded

if TYPE_CHECKING:
    from .passthrough import LegacyPassthrough, LegacyUpstream

log = logging.getLogger("mcpbridge.bridge")

#: The client's methods that the reader answers itself.
_INLINE = {legacy.MethodClass.PING, legacy.MethodClass.SET_LEVEL, legacy.MethodClass.DISCOVER}


#: The longest sleep of the thread in :meth:`Frontend.run`, which runs the signal handlers.
_MAIN_WAIT_SLICE = 0.25

#: A line at least this long is a large frame (see :meth:`Frontend._release_memory_when_quiet`).
LARGE_FRAME_BYTES = 256 * 1024
#: The quiet time after the last large frame before the free memory goes back to the system.
QUIET_SECONDS = 1.0

#: The words of the exchange log line for the result types of the upstream client.
_OUTCOMES = {"complete": "response", "input_required": "input required"}


class State(enum.Enum):
    AWAITING = "awaiting_initialize"
    INITIALIZING = "initializing"
    READY = "ready"
    CLOSING = "closing"


class Ended(enum.Enum):
    """How :meth:`Frontend.run` ended."""

    EOF = "eof"
    UPSTREAM_LOST = "upstream_lost"


@dataclass(frozen=True)
class Timeouts:
    """Time limits in seconds (architecture: "Limits and time limits")."""

    discover: float = 60.0
    #: The list requests and completion/complete.
    list: float = 120.0
    #: The first round of prompts/get and resources/read.
    read: float = 120.0
    #: Each round of tools/call; VS Code's cancellation is the outer limit.
    call: float = 3600.0
    #: The client's answers to one round of input requests.
    input: float = 3600.0


@dataclass(frozen=True)
class Options:
    fallback_name: str
    version: str
    max_line_bytes: int = 64 * 1024 * 1024
    #: Nesting of a client message.
    max_depth: int = 64
    #: Requests in flight; the reader refuses more at once.
    max_in_flight: int = 256
    #: The wait for the slots at the end.
    shutdown_grace: float = 2.0
    watch_interval: float = 0.2
    #: Progress notifications of one request per second.
    max_progress_rate: int = 50
    timeouts: Timeouts = field(default_factory=Timeouts)
    icon_rule: translate.IconRule = translate.IconRule.ALL
    #: ``--protocol``: ``auto`` falls back to a 2025-era upstream after a failed discover
    #: (module passthrough), ``legacy`` skips the discover, ``2026-07-28`` never falls back.
    #: Without a ``legacy`` upstream for the front end, each acts as ``2026-07-28``.
    protocol: str = "auto"
    #: The upstream's send never waits long (a child process on stdio): the reader sends
    #: each forwarded request itself, and the thread that delivers the answer writes the
    #: response, so a call costs no hand-off to a slot thread (see :meth:`Frontend._begin_forward`).
    forward_on_reader: bool = False
    #: ``--allow-tool`` and ``--deny-tool``: the tools that the client never sees.
    tool_filter: ToolFilter = ToolFilter()


#: The factory of the upstream client: (client info, notification callback) -> a started Client.
Connect = Callable[[dict[str, Any], Callable[[Notification], None]], Client]


class Slot:
    """One request of the client in flight."""

    __slots__ = ("id", "method", "cancel", "started", "done", "waiting_for", "next_report")

    def __init__(self, request_id: RequestId, method: str) -> None:
        self.id = request_id
        self.method = method
        self.cancel = CancelToken()
        self.started = time.monotonic()
        #: The response is written (under the output lock).
        self.done = False
        #: What the slot waits for, for the watcher's log lines.
        self.waiting_for = "upstream"
        self.next_report = 10.0


class Frontend:
    """Serve one client connection; see the module docstring."""

    def __init__(
        self,
        stdin: BinaryIO,
        stdout: BinaryIO,
        connect: Connect,
        options: Options,
        legacy: LegacyUpstream | None = None,
    ) -> None:
        self._in = stdin
        self._out = stdout
        self._connect = connect
        self.options = options
        #: How to reach a 2025-era upstream; ``None``: the bridge never falls back.
        self._legacy = legacy
        #: Set when the upstream speaks the 2025 era: then it carries every message in READY.
        self._passthrough: LegacyPassthrough | None = None
        self._out_lock = threading.Lock()
        self._out_closed = False
        self._state = State.AWAITING
        self._state_lock = threading.Lock()
        self._closing_reason: Ended | None = None
        self._slots: dict[RequestId, Slot] = {}
        self._slots_lock = threading.Lock()
        self._slots_idle = threading.Condition(self._slots_lock)
        #: Set (under the slots lock) once the end waits for the slots: a release wakes it.
        self._draining = False
        self._executor = ThreadPoolExecutor(
            max_workers=options.max_in_flight, thread_name_prefix="mcpbridge-slot"
        )
        self._client: Client | None = None
        self._client_kinds_caps: dict[str, Any] = {}
        self._upstream_caps: dict[str, Any] = {}
        self._log_level: str | None = None
        self._init_written = False
        self._declared: translate.Declared | None = None
        self.pending = PendingAnswers()
        #: The tool filter and the list cache of the connection.
        self.lists = ListRules(options.tool_filter)
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._end_reason = Ended.EOF
        self._listener: Any = None
        self._elicitation_ids = _Counter("elicitation-")
        #: Called at the end of the input, before the shutdown (the executable arms its watchdog).
        self.on_eof: Callable[[], None] | None = None
        #: Called on the watcher thread when large frames stopped passing for a while (the
        #: executable returns the free memory of the heap to the system).
        self.release_memory: Callable[[], None] | None = None
        #: Large frames that passed (counted without a lock: the watcher only compares it).
        self._large_frames = 0
        self._large_seen = 0
        self._large_seen_at = 0.0
        self._large_released = 0
        #: Called on the reader thread for ``notifications/initialized`` (the sign-in's gate:
        #: from then on a sign-in needs the consent of the client).
        self.on_initialized: Callable[[], None] | None = None

    # ------------------------------------------------------------------ run

    def run(self) -> Ended:
        """Serve until the end of the input or the loss of the upstream server."""
        reader = threading.Thread(target=self._read_loop, name="mcpbridge-reader", daemon=True)
        watcher = threading.Thread(target=self._watch_loop, name="mcpbridge-watcher", daemon=True)
        reader.start()
        watcher.start()
        # In slices: Python runs a signal handler (SIGTERM) only in the main thread and only
        # when it wakes, and the kernel may deliver the signal to another thread.
        while not self._ended.wait(_MAIN_WAIT_SLICE):
            pass
        self._stop.set()
        watcher.join(timeout=self.options.watch_interval * 5)
        if self._end_reason is Ended.EOF:
            reader.join(timeout=1.0)
        return self._end_reason

    def _finish(self, reason: Ended) -> None:
        self._end_reason = reason
        self._ended.set()

    # --------------------------------------------------------------- reader

    def _read_loop(self) -> None:
        lines = LineReader(self._in, self.options.max_line_bytes)
        try:
            while True:
                try:
                    item = lines.next()
                except (OSError, ValueError):
                    item = None
                if item is None:
                    break
                if self._state is State.CLOSING and self._closing_reason is Ended.EOF:
                    break
                try:
                    self._handle_line(item, lines.control_free)
                except Exception as exc:  # noqa: BLE001 - one line must not end the connection
                    # Only the type: the message of an error can hold content of the line.
                    log.error("the bridge failed to handle a line of the client: %s", type(exc).__name__)
        finally:
            if self._closing_reason is None:
                self.shutdown()
            self._finish(self._closing_reason or Ended.EOF)

    def _handle_line(self, item: bytes | TooLong, control_free: bool = False) -> None:
        if isinstance(item, TooLong):
            request_id = legacy.recover_id(item.head, item.tail)
            if self._resolve_bad_answer(request_id):
                return
            self._write_error(
                request_id,
                errortable.error_object("line_too_long", f"limit: {self.options.max_line_bytes} bytes"),
            )
            return
        if len(item) >= LARGE_FRAME_BYTES:
            self._large_frames += 1
        try:
            message = jsonrpc.parse(item, max_depth=self.options.max_depth, control_free=control_free)
        except FrameError as exc:
            self._handle_frame_error(item, exc)
            return
        if isinstance(message, Request):
            self._handle_request(message)
        elif isinstance(message, Notification):
            self._handle_notification(message)
        else:
            self._handle_answer(message)

    def _handle_frame_error(self, line: bytes, exc: FrameError) -> None:
        request_id = exc.id
        if request_id is None and exc.cause in ("parse_error", "too_deep"):
            # too_deep without an id: nesting past the parser's stack, the id was never read.
            request_id = legacy.recover_id(line[:256], line[-256:])
        if self._resolve_bad_answer(request_id):
            return
        if exc.is_response:
            log.debug("dropped a response of the client that is not valid")
            return
        if exc.cause == "parse_error":
            error = errortable.error_object("parse_error")
        elif exc.cause == "too_deep":
            error = errortable.error_object("too_deep", f"limit: {self.options.max_depth} levels")
        else:
            error = errortable.error_object("invalid_request_shape")
            if exc.cause == "invalid_id":
                request_id = None
        self._write_error(request_id, error)

    def _resolve_bad_answer(self, request_id: Any) -> bool:
        """A bad line with the id of a request of the bridge (``b-``) or the upstream (``u-``).

        The request that waits for it learns that its answer was lost; True when one did.
        """
        if self.pending.resolve(request_id, BAD_LINE):
            return True
        passthrough = self._passthrough
        return passthrough is not None and passthrough.on_unreadable_answer(request_id)

    def _handle_answer(self, message: Response | ErrorResponse) -> None:
        if self._passthrough is not None and self._passthrough.on_client_answer(message):
            return
        if isinstance(message, Response):
            answer: Any = message.result
        else:
            answer = ClientError(message.error.to_obj())
        if not self.pending.resolve(message.id, answer):
            log.debug("dropped an answer of the client that no request waits for")

    def _handle_notification(self, message: Notification) -> None:
        if message.method == "notifications/initialized" and self.on_initialized is not None:
            self.on_initialized()
        passthrough = self._passthrough
        if passthrough is not None and message.method != "notifications/cancelled":
            if self._state is State.READY:
                passthrough.forward_notification(message)
            return
        if message.method == "notifications/cancelled":
            request_id = legacy.parse_cancelled(message.params)
            if request_id is None:
                return
            with self._slots_lock:
                slot = self._slots.get(request_id)
            if slot is not None:
                slot.cancel.cancel("the client canceled the request")
        elif message.method == "notifications/initialized":
            if self._init_written and self._listener is None and self._client is not None:
                self._start_listener()
        else:
            log.debug("ignored the notification %s of the client", _printable(message.method))

    def _handle_request(self, request: Request) -> None:
        kind = legacy.classify(request.method)
        if request.method == "tools/call" and self._state is State.READY:
            refused = self.lists.refuse_call(request.params)
            if refused is not None:
                self._write_error(request.id, refused)
                return
        passthrough = self._passthrough
        if (
            passthrough is not None
            and self._state is State.READY
            and kind not in (legacy.MethodClass.INITIALIZE, legacy.MethodClass.DISCOVER)
        ):
            self._admit(request, passthrough.forward)
            return
        if kind is legacy.MethodClass.PING:
            self._write(jsonrpc.Response(request.id, {}))
            return
        if kind is legacy.MethodClass.SET_LEVEL:
            try:
                self._log_level = legacy.parse_set_level(request.params)
            except legacy.InvalidParams:
                self._write_error(request.id, errortable.error_object("invalid_params"))
                return
            self._write(jsonrpc.Response(request.id, {}))
            return
        if kind is legacy.MethodClass.DISCOVER:
            self._write_error(request.id, errortable.error_object("method_not_found"))
            return
        state = self._state
        if state is State.CLOSING:
            if self._closing_reason is Ended.UPSTREAM_LOST:
                self._write_error(request.id, errortable.error_object("upstream_exited"))
            return
        if kind is legacy.MethodClass.INITIALIZE:
            with self._state_lock:
                won = self._state is State.AWAITING
                if won:
                    self._state = State.INITIALIZING
            if not won:
                self._write_error(request.id, errortable.error_object("already_initialized"))
                return
            self._admit(request, self._initialize)
            return
        if state is not State.READY:
            if legacy.has_modern_meta(request.params):
                self._write_error(request.id, errortable.error_object("method_not_found"))
            else:
                self._write_error(request.id, errortable.error_object("not_initialized"))
            return
        if kind is legacy.MethodClass.FORWARD:
            cached = self.lists.lookup(request.method, request.params)
            if cached is not None:
                # Answered at once on the reader; the slot keeps the id in use until then.
                self._admit(request, self._forward, functools.partial(self._answer_from_cache, result=cached))
                return
            on_reader = self._begin_forward if self.options.forward_on_reader else None
            self._admit(request, self._forward, on_reader)
        elif kind in (legacy.MethodClass.SUBSCRIBE, legacy.MethodClass.UNSUBSCRIBE):
            if self._listener is None or not self._listener.accepts_subscriptions:
                self._write_error(request.id, errortable.error_object("method_not_found"))
                return
            try:
                uri = legacy.parse_subscribe(request.params)
            except legacy.InvalidParams:
                self._write_error(request.id, errortable.error_object("invalid_params"))
                return
            subscribe = kind is legacy.MethodClass.SUBSCRIBE
            self._admit(request, lambda slot, req: self._listener.change(slot, uri, subscribe=subscribe))
        else:
            self._write_error(request.id, errortable.error_object("method_not_found"))

    # ---------------------------------------------------------------- slots

    def _admit(
        self,
        request: Request,
        work: Callable[[Slot, Request], None],
        on_reader: Callable[[Slot, Request], bool] | None = None,
    ) -> None:
        """Give the request a slot and run ``work`` on it; ``on_reader`` may start it here first.

        ``on_reader`` runs on the reader thread and must not block; it returns
        False when ``work`` must run on a slot thread after all.
        """
        with self._slots_lock:
            # A second request with the id of one in flight would hide the first from
            # the count of the limit and from its cancellation: refuse it.
            in_use = request.id in self._slots
            refused = in_use or len(self._slots) >= self.options.max_in_flight
            if not refused:
                slot = Slot(request.id, request.method)
                self._slots[request.id] = slot
        if refused:
            log.warning(
                "rejected request %s (%s): %s",
                _printable(request.id),
                _printable(request.method),
                "its id is in use by a request in flight" if in_use else "too many requests in flight",
            )
            cause = "invalid_request_shape" if in_use else "too_many_requests"
            self._write_error(request.id, errortable.error_object(cause))
            if request.method == "initialize":
                self._set_state(State.AWAITING)
            return
        if on_reader is not None and on_reader(slot, request):
            return
        self._submit(slot, request, work)

    def _submit(self, slot: Slot, request: Request, work: Callable[[Slot, Request], None]) -> None:
        """Run ``work`` on a slot thread; the slot is released when it ends."""
        try:
            self._executor.submit(self._run_slot, slot, request, work)
        except RuntimeError:  # the executor shut down: the connection is closing
            self._release(slot)

    def _run_slot(self, slot: Slot, request: Request, work: Callable[[Slot, Request], None]) -> None:
        try:
            work(slot, request)
        except Exception:  # noqa: BLE001 - a bug must not kill the slot silently
            log.exception("request %s (%s) failed inside the bridge", _printable(slot.id), slot.method)
            self.respond_error(slot, errortable.internal_error())
        finally:
            self._release(slot)

    def _release(self, slot: Slot) -> None:
        with self._slots_lock:
            if self._slots.get(slot.id) is slot:
                del self._slots[slot.id]
            if self._draining:
                self._slots_idle.notify_all()

    # --------------------------------------------------------------- output

    def _write_frame(self, data: bytes | list[jsonrpc.Piece], slot: Slot | None = None) -> bool:
        """Write one frame (its bytes, or its pieces in order) and flush, under the output lock.

        With a ``slot`` the frame is its response: written once, never for a canceled slot.
        """
        with self._out_lock:
            if self._out_closed:
                return False
            if slot is not None:
                if slot.done or slot.cancel.cancelled:
                    return False
                slot.done = True
            out = self._out
            try:
                if isinstance(data, list):
                    for piece in data:
                        out.write(piece)
                else:
                    out.write(data)
                out.flush()
            except (OSError, ValueError):
                self._out_closed = True
                return False
            return True

    def _write(self, message: Message) -> None:
        self._write_frame(jsonrpc.serialize(message))

    def _write_error(self, request_id: RequestId | None, error: dict[str, Any]) -> None:
        # JSON-RPC 2.0 writes "id": null when the id is unknown; the 2025-11-25
        # schema (and the TypeScript SDK that VS Code uses) wants it left out.
        frame: dict[str, Any] = {"jsonrpc": "2.0", "error": error}
        if request_id is not None:
            frame = {"jsonrpc": "2.0", "id": request_id, "error": error}
        self._write_frame(jsonrpc.serialize(frame))

    def write_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Write a notification to the client."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        return self._write_frame(jsonrpc.serialize(frame))

    def write_if(self, check: Callable[[], bool], method: str, params: dict[str, Any] | None) -> bool:
        """Write a notification when ``check()`` holds; the check and the write are one step."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        data = jsonrpc.serialize(frame)
        with self._out_lock:
            if self._out_closed or not check():
                return False
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                self._out_closed = True
                return False
            return True

    def write_locked(self, frames: Callable[[], list[bytes]]) -> bool:
        """Call ``frames()`` under the output lock and write what it returns, in one step.

        The listener uses it to compare a stream's generation and write its
        events atomically; ``frames`` must not block or take another lock.
        """
        with self._out_lock:
            if self._out_closed:
                return False
            data = b"".join(frames())
            if not data:
                return False
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                self._out_closed = True
                return False
            return True

    def write_request(self, request_id: str, method: str, params: dict[str, Any] | None) -> bool:
        """Write one of the bridge's own requests to the client (``None``: no params member)."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        return self._write_frame(jsonrpc.serialize(frame))

    def respond(self, slot: Slot, result: Any, *, raw: jsonrpc.RawStrings | None = None) -> bool:
        """Write the result of a slot once; a canceled slot writes nothing.

        ``raw`` holds the long strings of the line that ``result`` came from (see
        :class:`~mcpbridge.mcp.jsonrpc.RawStrings`): they go out as they came in.
        """
        frame = {"jsonrpc": "2.0", "id": slot.id, "result": result}
        if raw is not None and raw.long_line:
            self._large_frames += 1
        return self._write_frame(jsonrpc.serialize_parts(frame, raw=raw), slot)

    def respond_error(self, slot: Slot, error: dict[str, Any]) -> bool:
        return self._write_frame(jsonrpc.serialize({"jsonrpc": "2.0", "id": slot.id, "error": error}), slot)

    def _close_output(self) -> None:
        with self._out_lock:
            self._out_closed = True

    # ------------------------------------------------------------ lifecycle

    def _set_state(self, state: State) -> None:
        with self._state_lock:
            if self._state is not State.CLOSING:
                self._state = state

    def _initialize(self, slot: Slot, request: Request) -> None:
        try:
            params = legacy.parse_initialize(request.params)
        except legacy.InvalidParams:
            self._set_state(State.AWAITING)
            self.respond_error(slot, errortable.error_object("invalid_params"))
            return
        self._client_kinds_caps = params.capabilities
        self._upstream_caps = translate.client_capabilities_for_upstream(params.capabilities)
        if self._legacy is not None and self.options.protocol == "legacy":
            self._pass_through(slot, request, None, None)
            return
        try:
            client = self._connect(params.client_info, self._on_upstream_notification)
        except McpError as exc:
            self._set_state(State.AWAITING)
            log.error("the upstream server did not start: %s", exc.detail or exc.cause)
            self.respond_error(slot, errortable.error_object(exc.cause))
            return
        try:
            result = client.discover(
                timeout=self.options.timeouts.discover, cancel=slot.cancel, capabilities=self._upstream_caps
            )
        except McpError as exc:
            if self._legacy is not None and self._falls_back(exc):
                self._pass_through(slot, request, client, exc)
                return
            client.close(self.options.shutdown_grace)
            self._set_state(State.AWAITING)
            if isinstance(exc, Cancelled):
                return
            error = discover_error(exc, self.options.timeouts.discover)
            log.error("server/discover failed: %s", error["data"].get("detail", error["data"]["cause"]))
            self.respond_error(slot, error)
            return
        init = translate.initialize_result(
            result,
            fallback_name=self.options.fallback_name,
            version=self.options.version,
            icon_rule=self.options.icon_rule,
        )
        self._client = client
        self._declared = translate.declared_notifications(init)
        with self._state_lock:
            if self._state is State.CLOSING:
                return
            self._state = State.READY
        log.info("the upstream server speaks MCP %s", MODERN)
        self._write_initialize_result(slot, init)

    def _write_initialize_result(self, slot: Slot, init: dict[str, Any]) -> None:
        data = jsonrpc.serialize({"jsonrpc": "2.0", "id": slot.id, "result": init})

        def frames() -> list[bytes]:
            # Marked in the same step as the write: the client may send
            # notifications/initialized the moment it reads the result.
            if slot.done or slot.cancel.cancelled:
                return []
            slot.done = True
            self._init_written = True
            return [data]

        self.write_locked(frames)

    # ------------------------------------------------- 2025-era upstream

    def _falls_back(self, exc: McpError) -> bool:
        """Whether the failed discover shows a 2025-era upstream (module passthrough)."""
        from .passthrough import means_legacy

        assert self._legacy is not None
        if not means_legacy(exc, protocol=self.options.protocol, over_http=self._legacy.over_http):
            return False
        detail = exc.error.message if isinstance(exc, RpcError) else exc.detail or exc.cause
        log.info(
            "server/discover failed (%s): the bridge tries initialize of MCP 2025-11-25", _printable(detail)
        )
        return True

    def _pass_through(
        self, slot: Slot, request: Request, probe: Client | None, probe_error: McpError | None
    ) -> None:
        """The upstream speaks the 2025 era: a LegacyPassthrough carries the connection from now on."""
        from .passthrough import LegacyPassthrough, OpenFailed

        assert self._legacy is not None
        passthrough = LegacyPassthrough(self, self._legacy)
        try:
            result = passthrough.open(request.params, probe, probe_error, slot.cancel)
        except OpenFailed as failed:
            self._set_state(State.AWAITING)
            if failed.error is not None:
                self.respond_error(slot, failed.error)
            return
        self._passthrough = passthrough
        with self._state_lock:
            closing = self._state is State.CLOSING
            if not closing:
                self._state = State.READY
        if closing:
            passthrough.close(self.options.shutdown_grace)
            return
        self._write_initialize_result(slot, result)

    # -------------------------------------------------------------- forward

    def _timeout_for(self, method: str, round_number: int) -> float:
        timeouts = self.options.timeouts
        if method == "tools/call":
            return timeouts.call
        if method in ("prompts/get", "resources/read"):
            return timeouts.read if round_number == 1 else timeouts.call
        return timeouts.list

    def _tracer(
        self, slot: Slot, method: str, round_number: int
    ) -> Callable[[RequestId, str, float], None] | None:
        """The debug line of one upstream exchange, or ``None`` when debug lines are off."""
        if not log.isEnabledFor(logging.DEBUG):
            return None

        def trace(upstream_id: RequestId, outcome: str, seconds: float) -> None:
            log.debug(
                "upstream request %s (%s, round %d of client request %s): %s after %d ms",
                upstream_id,
                method,
                round_number,
                _printable(slot.id),
                _OUTCOMES.get(outcome, outcome),
                int(seconds * 1000),
            )

        return trace

    def _begin_forward(self, slot: Slot, request: Request) -> bool:
        """Send the first round of a forwarded request from the reader thread, without waiting.

        The thread that learns the outcome (the upstream reader for an answer)
        runs :meth:`_forward_done`. Returns False, with nothing sent, when the
        upstream has no room for the request at once: then a slot thread sends it.
        """
        client = self._client
        assert client is not None
        method = request.method
        params, client_token, meta = translate.forward_params(request.params)
        progress = (
            _ProgressForwarder(self, client_token, self.options.max_progress_rate)
            if client_token is not None
            else None
        )
        try:
            call = client.begin(
                method,
                params,
                on_done=lambda call: self._forward_done(slot, request, call, progress),
                timeout=self._timeout_for(method, 1),
                cancel=slot.cancel,
                capabilities=self._upstream_caps,
                log_level=self._log_level,
                meta=meta,
                allow_input_required=method in INPUT_METHODS,
                on_progress=progress,
                trace=self._tracer(slot, method, 1),
                raw=request.raw,
            )
        except McpError as exc:
            self.respond_error(slot, self._error_for(exc, method, request.params))
            self._release(slot)
            return True
        return call is not None

    def _answer_from_cache(self, slot: Slot, request: Request, result: dict[str, Any]) -> bool:
        """Answer a list request with a page of the cache, on the reader (it never waits for the upstream)."""
        self._respond_result(slot, request.method, result, params=request.params, from_cache=True)
        self._release(slot)
        return True

    def _forward_done(
        self, slot: Slot, request: Request, call: Call, progress: _ProgressForwarder | None
    ) -> None:
        """The outcome of the first round of :meth:`_begin_forward`, on the thread that learned it.

        A complete result or an error is answered here at once. What may block (the
        input rounds, telling the upstream of a cancellation) goes on on a slot thread.
        """
        try:
            if call.cancelled:
                # The reader read the cancellation: tell the upstream without waiting, if it
                # has room (else a slot thread does), and write nothing.
                try:
                    call.result(wait=False)
                except WouldBlock:
                    pass
                except McpError:
                    self._release(slot)
                    return
            if call.needs_thread:
                first: Callable[[], dict[str, Any]] = call.result
            else:
                try:
                    result = call.result()
                except Cancelled:
                    self._release(slot)
                    return
                except McpError as exc:
                    self.respond_error(slot, self._error_for(exc, request.method, request.params))
                    self._release(slot)
                    return
                if result.get("resultType") != "input_required":
                    self._respond_result(slot, request.method, result, call.raw, params=request.params)
                    self._release(slot)
                    return

                def first() -> dict[str, Any]:
                    return result

            self._submit(slot, request, lambda s, r: self._forward(s, r, first=first, progress=progress))
        except Exception:  # noqa: BLE001 - a bug must not lose the request silently
            log.exception("request %s (%s) failed inside the bridge", _printable(slot.id), slot.method)
            self.respond_error(slot, errortable.internal_error())
            self._release(slot)

    def _respond_result(
        self,
        slot: Slot,
        method: str,
        result: dict[str, Any],
        raw: jsonrpc.RawStrings | None = None,
        *,
        params: Any = None,
        from_cache: bool = False,
    ) -> None:
        """Shape a complete result for the client and write it.

        A list result first goes through the list rules: the cache keeps a
        result of the server (not one it gave itself), and the tool filter
        hides tools.
        """
        result = self.lists.page(method, params, result, cache=not from_cache)
        shaped, notes = translate.shape_result(method, result, icon_rule=self.options.icon_rule)
        for note in notes:
            log.info("%s", note)
        self.respond(slot, shaped, raw=raw)

    def _forward(
        self,
        slot: Slot,
        request: Request,
        *,
        first: Callable[[], dict[str, Any]] | None = None,
        progress: _ProgressForwarder | None = None,
    ) -> None:
        """Forward a request on a slot thread: the rounds until a complete result.

        ``first`` gives the outcome of a first round that :meth:`_begin_forward` sent.
        """
        client = self._client
        assert client is not None
        params, client_token, meta = translate.forward_params(request.params)
        if progress is None and client_token is not None:
            progress = _ProgressForwarder(self, client_token, self.options.max_progress_rate)
        rounds = _Rounds(self, slot, request.method, params)
        try:
            while True:
                round_number = rounds.session.rounds + 1
                slot.waiting_for = "upstream"
                if first is not None:
                    result, first = first(), None
                else:
                    result = client.request(
                        request.method,
                        rounds.params,
                        timeout=self._timeout_for(request.method, round_number),
                        cancel=slot.cancel,
                        capabilities=self._upstream_caps,
                        log_level=self._log_level,
                        meta=meta,
                        allow_input_required=request.method in INPUT_METHODS,
                        on_progress=progress,
                        trace=self._tracer(slot, request.method, round_number),
                    )
                rounds.after_result(result)
                if result.get("resultType") == "input_required":
                    rounds.next_round(result)
                    continue
                self._respond_result(slot, request.method, result, params=request.params)
                return
        except Cancelled:
            rounds.failed()
        except McpError as exc:
            rounds.failed()
            if isinstance(exc, RpcError) and rounds.sent_state and exc.error.code == jsonrpc.INVALID_PARAMS:
                self._refused_state(slot, request.method, exc)
                return
            self.respond_error(slot, self._error_for(exc, request.method, request.params))
        except input_rules.ClientFailed as failure:
            rounds.failed()
            log.info(
                "request %s (%s): the client answered an input request with an error: %s",
                _printable(slot.id),
                request.method,
                _printable(failure.error.get("message", "")),
            )
            self.respond_error(slot, failure.error)
        except input_rules.InputError as failure:
            rounds.failed()
            log.warning(
                "request %s (%s): the input requests of the upstream server failed: %s",
                _printable(slot.id),
                request.method,
                failure.detail or failure.cause,
            )
            self.respond_error(slot, errortable.error_object(failure.cause, failure.detail))
        except _Silent:
            rounds.failed()

    def _refused_state(self, slot: Slot, method: str, exc: RpcError) -> None:
        """The upstream refused the requestState of a round (behaviour: refused state)."""
        text = translate.refused_state_text(method, exc.error.message)
        if method == "tools/call":
            self.respond(slot, {"content": [{"type": "text", "text": text}], "isError": True})
            return
        error: dict[str, Any] = {"code": exc.error.code, "message": text}
        if exc.error.data is not jsonrpc.NO_DATA:
            error["data"] = exc.error.data
        self.respond_error(slot, error)

    def _error_for(self, exc: McpError, method: str, params: Any = None) -> dict[str, Any]:
        if isinstance(exc, RpcError):
            self.lists.failed(method, params, exc.error.code)
        if isinstance(exc, SignInError):
            return exc.error_object()
        if isinstance(exc, Closed) and self._client is not None and self._client.gone:
            return errortable.error_object("upstream_exited")
        error = errortable.error_from_mcp(exc)
        if isinstance(exc, RpcError):
            return translate.legacy_error(method, error)
        return error

    # ------------------------------------------------------- notifications

    def _on_upstream_notification(self, message: Notification) -> None:
        if message.method == "notifications/message":
            params = translate.log_params(message.params)
            if params is None or self._log_level is None:
                return
            if translate.log_passes(params["level"], self._log_level):
                self.write_notification("notifications/message", params)
        else:
            log.debug("dropped the notification %s of the upstream server", _printable(message.method))

    def _start_listener(self) -> None:
        declared = self._declared
        if declared is None or not (
            declared.tools or declared.prompts or declared.resources or declared.subscribe
        ):
            return
        from .notify import Listener

        assert self._client is not None
        self._listener = Listener(self, self._client, declared)
        self._listener.start()

    @property
    def closing_reason(self) -> Ended | None:
        return self._closing_reason

    @property
    def log_level(self) -> str | None:
        return self._log_level

    @property
    def upstream_capabilities(self) -> dict[str, Any]:
        return self._upstream_caps

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._client_kinds_caps

    def next_elicitation_id(self) -> str:
        return self._elicitation_ids.next()

    def ask_url_consent(
        self, url: str, message: str, elicitation_id: str, *, timeout: float, cancel: CancelToken
    ) -> bool:
        """Ask the client to open ``url`` for a sign-in (a URL elicitation); True when it accepted.

        The request has a ``b-`` id. On a cancellation or the time limit the client
        gets ``notifications/cancelled`` for it.

        Raises:
            WaitEnded: ``canceled``, ``timeout`` or ``closed``.
        """
        ids = self.pending.new_ids(1)
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        try:
            self.write_request(ids[0], input_rules.ELICITATION_CREATE, params)
            try:
                answer = self.pending.wait(ids, timeout=timeout, cancel=cancel)[ids[0]]
            except WaitEnded as ended:
                if ended.reason != "closed":
                    reason = "no answer in time" if ended.reason == "timeout" else cancel.reason
                    for request_id in self.pending.remove(ids):
                        self.write_notification(
                            "notifications/cancelled",
                            {"requestId": request_id, "reason": reason or "the client canceled the request"},
                        )
                raise
        finally:
            self.pending.remove(ids)
        return isinstance(answer, dict) and answer.get("action") == "accept"

    # ------------------------------------------------------------- watcher

    def _watch_loop(self) -> None:
        interval = self.options.watch_interval
        while not self._stop.wait(interval):
            upstream = self._client if self._client is not None else self._passthrough
            if upstream is not None and upstream.gone and self._state is State.READY:
                self._upstream_lost(upstream)
                return
            self._report_long_requests()
            self._release_memory_when_quiet()

    def _release_memory_when_quiet(self) -> None:
        """Call :attr:`release_memory` once the large frames stopped for :data:`QUIET_SECONDS`.

        The memory of a large frame is kept while they come one after another, so
        the next one does not pay for fresh pages; a quiet connection gives it back.
        """
        count = self._large_frames
        now = time.monotonic()
        if count != self._large_seen:
            self._large_seen, self._large_seen_at = count, now
        elif (
            count != self._large_released
            and now - self._large_seen_at >= QUIET_SECONDS
            and self.release_memory is not None
        ):
            self._large_released = count
            try:
                self.release_memory()
            except Exception as exc:  # noqa: BLE001 - a hook must not stop the watcher
                log.debug("releasing memory failed: %s", type(exc).__name__)
            else:
                log.debug("released the free memory of the large frames")

    def _report_long_requests(self) -> None:
        now = time.monotonic()
        with self._slots_lock:
            slots = list(self._slots.values())
        for slot in slots:
            waited = now - slot.started
            if waited >= slot.next_report:
                slot.next_report += 30.0
                if slot.waiting_for == "client":
                    log.info(
                        "still waiting for the answers of the client to the input requests of %s "
                        "(request %s, %d s)",
                        slot.method,
                        _printable(slot.id),
                        int(waited),
                    )
                else:
                    log.info(
                        "still waiting for the upstream server: %s (request %s, %d s)",
                        slot.method,
                        _printable(slot.id),
                        int(waited),
                    )

    def _upstream_lost(self, client: Client | LegacyPassthrough) -> None:
        with self._state_lock:
            if self._state is State.CLOSING:
                return
            self._state = State.CLOSING
            self._closing_reason = Ended.UPSTREAM_LOST
        status = client.exit_status or "an unknown status"
        log.error("the upstream server exited with %s", status)
        with self._slots_lock:
            slots = list(self._slots.values())
        error = errortable.error_object("upstream_exited")
        for slot in slots:
            self.respond_error(slot, error)
            slot.cancel.cancel("the upstream server stopped")
        self.pending.close()
        if self._listener is not None:
            self._listener.stop()
        self.lists.clear("the end of the connection")
        self._wait_for_slots(self.options.shutdown_grace)
        self._close_output()
        self._executor.shutdown(wait=False, cancel_futures=True)
        client.close(self.options.shutdown_grace)
        self._finish(Ended.UPSTREAM_LOST)

    # ------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """The end of the input: cancel everything, wait at most the grace, close the upstream."""
        with self._state_lock:
            if self._state is State.CLOSING:
                return
            self._state = State.CLOSING
            self._closing_reason = Ended.EOF
        self._stop.set()
        if self.on_eof is not None:
            self.on_eof()
        with self._slots_lock:
            slots = list(self._slots.values())
        for slot in slots:
            slot.cancel.cancel("the client closed the connection")
        self.pending.close()
        if self._listener is not None:
            self._listener.stop()
        self.lists.clear("the end of the connection")
        self._wait_for_slots(self.options.shutdown_grace)
        self._close_output()
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            self._client.close(self.options.shutdown_grace)
        if self._passthrough is not None:
            self._passthrough.close(self.options.shutdown_grace)

    def close(self) -> None:
        """Stop as at the end of the input (SIGTERM)."""
        self.shutdown()
        self._finish(Ended.EOF)

    def kill_upstream(self) -> None:
        """Kill the upstream process group at once (the watchdog's last step)."""
        client = self._client
        if client is not None:
            client.kill()
        if self._passthrough is not None:
            self._passthrough.kill()

    def _wait_for_slots(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        with self._slots_idle:
            self._draining = True
            while self._slots:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.debug("%d requests did not stop in the grace period", len(self._slots))
                    return
                self._slots_idle.wait(remaining)


def discover_error(exc: McpError, timeout: float) -> dict[str, Any]:
    """The error of a failed ``server/discover`` (error table: discover_failed)."""
    if isinstance(exc, SignInError):
        return exc.error_object()
    if isinstance(exc, RpcError):
        error = errortable.error_object("discover_failed", exc.error.message)
        if exc.error.code != jsonrpc.URL_ELICITATION_REQUIRED:
            error["code"] = exc.error.code
        return error
    if isinstance(exc, RequestTimeout):
        return errortable.error_object(
            "discover_failed", f"no response in {errortable.format_duration(timeout)}"
        )
    detail = "server/discover"
    if exc.http_status is not None:
        detail += f", HTTP status {exc.http_status}"
    return errortable.error_object(exc.cause, detail)


class _Silent(Exception):
    """The request ends without a response (the connection is closing)."""


class _Rounds:
    """The input rounds of one forwarded request: ask the client, check, retry upstream."""

    def __init__(self, frontend: Frontend, slot: Slot, method: str, params: dict[str, Any]) -> None:
        self.frontend = frontend
        self.slot = slot
        self.method = method
        self.original = params
        self.params = params
        self.sent_state = False
        self.session = input_rules.Session(
            input_rules.ClientKinds.from_capabilities(frontend.client_capabilities),
            frontend.next_elicitation_id,
        )

    def after_result(self, result: dict[str, Any]) -> None:
        """Complete the URL elicitations that the new result no longer asks for."""
        for elicitation_id in self.session.completions_after_round(result):
            self.frontend.write_notification(
                input_rules.ELICITATION_COMPLETE, {"elicitationId": elicitation_id}
            )

    def failed(self) -> None:
        for elicitation_id in self.session.completions_on_failure():
            self.frontend.write_notification(
                input_rules.ELICITATION_COMPLETE, {"elicitationId": elicitation_id}
            )

    def next_round(self, result: dict[str, Any]) -> None:
        """Run one round: raises InputError, ClientFailed, Cancelled or _Silent on failure."""
        planned = self.session.plan_round(result)
        for warning in planned.warnings:
            log.warning("%s", warning)
        answers: dict[str, Any] = {}
        if planned.outgoing:
            answers = self._ask(planned.outgoing)
        responses = self.session.input_responses(answers)
        self.params = input_rules.retry_params(self.original, responses, planned.request_state)
        self.sent_state = planned.request_state is not None

    def _ask(self, outgoing: tuple[input_rules.Outgoing, ...]) -> dict[str, Any]:
        frontend = self.frontend
        pending = frontend.pending
        ids = pending.new_ids(len(outgoing))
        self.slot.waiting_for = "client"
        self.slot.next_report = time.monotonic() - self.slot.started + 10.0
        try:
            for request_id, request in zip(ids, outgoing, strict=True):
                frontend.write_request(request_id, request.method, request.params)
            timeout = frontend.options.timeouts.input
            try:
                got = pending.wait(ids, timeout=timeout, cancel=self.slot.cancel)
            except WaitEnded as ended:
                self._cancel_unanswered(ids, ended.reason)
                if ended.reason == "timeout":
                    raise input_rules.InputError(
                        "input_timeout",
                        f"no answers in {errortable.format_duration(timeout)} "
                        f"(input requests of the round: {len(ids)})",
                    ) from None
                if ended.reason == "canceled":
                    raise Cancelled() from None
                raise _Silent() from None
        finally:
            pending.remove(ids)
            self.slot.waiting_for = "upstream"
        return {request.key: got[request_id] for request_id, request in zip(ids, outgoing, strict=True)}

    def _cancel_unanswered(self, ids: list[str], reason: str) -> None:
        frontend = self.frontend
        if reason == "timeout":
            text = "no answer in time"
        elif reason == "canceled":
            text = self.slot.cancel.reason or "the client canceled the request"
        elif frontend.closing_reason is Ended.UPSTREAM_LOST:
            text = "the upstream server stopped"
        else:
            text = "the client closed the connection"
        for request_id in frontend.pending.remove(ids):
            frontend.write_notification("notifications/cancelled", {"requestId": request_id, "reason": text})


class _ProgressForwarder:
    """Give the upstream progress of a request to the client's progress token, rate limited."""

    def __init__(self, frontend: Frontend, token: Any, rate: int) -> None:
        self._frontend = frontend
        self._token = token
        self._rate = rate
        self._window = 0.0
        self._count = 0

    def __call__(self, params: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self._window >= 1.0:
            self._window = now
            self._count = 0
        if self._count >= self._rate:
            return
        translated = translate.progress_params(self._token, params)
        if translated is None:
            return
        self._count += 1
        self._frontend.write_notification("notifications/progress", translated)


class _Counter:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._n = 0

    def next(self) -> str:
        with self._lock:
            self._n += 1
            return f"{self._prefix}{self._n}"


def _printable(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 64 else text[:61] + "..."
