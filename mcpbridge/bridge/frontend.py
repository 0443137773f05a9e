"""The front end: one 2025-11-25 client connection on a pair of byte streams.

Theory of operation
-------------------

The **reader** thread reads the client's lines, parses them and classifies
them. It answers ``ping``, ``logging/setLevel``, ``server/discover`` and every
bad line itself, resolves the client's answers to the bridge's own requests,
and hands every other request to a **slot** (module ``slots``): a task of a
bounded ``ThreadPoolExecutor``. Only a line shaped as a response answers a
request of the bridge: a message with a ``method`` member never does, whatever
its id. The reader never waits for a slot: at the limit of requests in flight a
request gets ``too_many_requests`` at once, so the reader always reads
cancellations and answers. It waits only for room in the output: a client that
reads slower than the bridge answers it meets the bound of the output (module
``output``), and then the reader stops reading it until it reads, or until the
stall rule of the watcher ends the connection.

Each slot owns a :class:`Slot` with a cancel token. A slot writes its response
once; the check that it may write and the write are one step under the
**output lock**, and a canceled slot writes nothing. Every frame goes out under
the output lock as one line and is flushed. After the output closes nothing is
written.

A forwarded request goes to the :class:`~.session.UpstreamSession` of the
connection: a :class:`~.session.ModernSession` (its **fast path** sends the
first round from the reader thread, see ``Options.forward_on_reader``) or the
2025-era :class:`~.passthrough.LegacyPassthrough`. Both write to the client only
through the :class:`~.output.Output` (module ``output``).

The **list rules** of the connection (:class:`~.listrules.ListRules`) come first:
the reader answers a ``tools/call`` of a tool that ``--allow-tool`` and
``--deny-tool`` hide with the error of an unknown tool, in either era, and on
the modern path a list request with a fresh page in the list cache from that
page. Both sessions give each list result to the rules (the cache keeps it, the
filter hides tools), and the listen stream drops the cache at a list change or
a gap.

The reader looks up what to do with each request and notification in the
lifecycle table, :data:`~.lifecycle.LIFECYCLE` (module ``lifecycle``: the state
of the connection and the class of the message give an action), and does it.
The rules that the table does not show:

* Only the ``initialize`` that moves the state from ``AWAITING`` (or ``FAILED``)
  to ``INITIALIZING`` starts the upstream server; its slot is the one that may
  end that state (:meth:`Frontend._conclude_locked`).
* Whatever ends an initialize (an error, a bug, a cancel, a time limit), the
  state leaves ``INITIALIZING`` before its answer is written: to ``READY``
  (``READY_2025`` for a 2025-era server), to ``FAILED`` after an error, to
  ``AWAITING`` after a cancel. The client's next requests can come at once.
* The requests that come while initialize runs wait in :attr:`Frontend._held`
  with a slot each (no thread), and go on after its answer as the state that
  followed says.
* At the end of the input (:meth:`Frontend.shutdown`) the reader reads no more;
  the requests in flight get the grace (``Options.shutdown_grace``) to answer,
  and those still without an answer get ``input_ended``. When requests wait for
  an initialize under way, it first ends (within its time limit).
* A client of 2025-03-26 may send a JSON-RPC batch: the reader takes each element
  as a line of its own, and every answer to it goes into one
  :class:`~.output.Batch`, written as one array once the last is in.

A **watcher** thread looks at the upstream every 200 ms: when a child process
is gone it answers every request in flight with ``upstream_exited`` and ends
the connection. When the client has read nothing for ``output_stall_timeout``
(:data:`~.options.OUTPUT_STALL_TIMEOUT`) while output waits for it, the watcher
ends the connection as at the end of the input (the *stall rule*). It also logs
requests that wait for a long time.
"""

from __future__ import annotations

import enum
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from ..mcp import jsonrpc
from ..mcp.cancel import CancelToken
from ..mcp.client import Client
from ..mcp.droplog import DropLog, flush_all
from ..mcp.errorbase import BridgeError
from ..mcp.errors import Cancelled, Closed, McpError
from ..mcp.framing import LineReader, TooLong
from ..mcp.ids import shows_response
from ..mcp.jsonrpc import (
    ErrorResponse,
    FrameError,
    Notification,
    Request,
    Response,
)
from ..mcp.protocol import ELICITATION_CREATE, MODERN
from ..mcp.text import format_duration, printable
from . import errortable, legacy, lifecycle, revisions, translate
from .dumptext import FrontendState
from .lifecycle import END_STATES, READY_STATES, Action, State
from .listrules import ListRules
from .options import Connect, Options, Timeouts
from .output import LARGE_FRAME_BYTES, QUIET_SECONDS, Batch, LargeFrames, Output, Slot
from .passthrough import (
    FAILED_STARTS,
    LegacyPassthrough,
    LegacyUpstream,
    OpenFailed,
    falls_back,
    log_spawn_failed,
    stopped_during,
)
from .pending import BAD_LINE, ClientError, PendingAnswers, WaitEnded
from .session import (
    ModernSession,
    UpstreamSession,
    discover_error,
    discover_failure_text,
    forward_upstream_log,
)
from .slots import Slots, Work

__all__ = [
    "LARGE_FRAME_BYTES",
    "QUIET_SECONDS",
    "Connect",
    "Ended",
    "Frontend",
    "Options",
    "Slot",
    "State",
    "Timeouts",
    "discover_error",
]

log = logging.getLogger("mcpbridge.bridge")


#: A request that waits for the end of initialize: its slot, the request and its class.
_Held = tuple[Slot, Request, legacy.MethodClass]

#: The revision whose clients may send JSON-RPC batches (the later ones removed them).
BATCH_REVISION = "2025-03-26"

#: The wait for the slots canceled at the end of the input, when the grace is over.
_LAST_DRAIN = 0.2

#: The longest sleep of the thread in :meth:`Frontend.run`, which runs the signal handlers.
_MAIN_WAIT_SLICE = 0.25


class Ended(enum.Enum):
    """How :meth:`Frontend.run` ended."""

    EOF = "eof"
    UPSTREAM_LOST = "upstream_lost"


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
        #: The client's output; the parts behind the front end write through it.
        self._large_frames = LargeFrames()
        self.output = Output(stdout, self._large_frames.count, max_queued=options.max_output_bytes)
        self._connect = connect
        self.options = options
        #: How to reach a 2025-era upstream; ``None``: the bridge never falls back.
        self._legacy = legacy
        #: Set when the upstream speaks the 2025 era: then it carries every message in READY.
        self._passthrough: LegacyPassthrough | None = None
        self._state = State.AWAITING
        self._state_lock = threading.Lock()
        #: The requests that wait for the end of initialize, with their slots (under the state lock).
        self._held: list[_Held] = []
        #: The cause of the last initialize that failed (``not_connected`` names it).
        self._failure = ""
        #: The slot of the initialize that runs (under the state lock).
        self._init_slot: Slot | None = None
        #: Clear while an initialize runs.
        self._no_initialize = threading.Event()
        self._no_initialize.set()
        #: The end of the connection took the upstream to close it (under the state lock).
        self._upstream_taken = False
        #: The log lines of the connection that the client can make repeat (refusals, drops).
        self.drops = DropLog(log)
        #: The requests of the client in flight.
        #: The batch of the client that the reader reads now (module ``output``, :class:`Batch`).
        self._batch: Batch | None = None
        self.slots = Slots(self.output, options.max_in_flight, self.drops, self._write_error)
        #: Set when the upstream speaks 2026-07-28 (a successful discover).
        self._session: ModernSession | None = None
        #: The revision that the client speaks and the profile of its host (from initialize).
        self._revision = revisions.LATEST
        self._profile = revisions.VSCODE
        self._client_kinds_caps: dict[str, Any] = {}
        self._upstream_caps: dict[str, Any] = {}
        self._log_level: str | None = None
        self._init_written = False
        self._declared: translate.Declared | None = None
        self.pending = PendingAnswers()
        #: The tool filter and the list cache of the connection.
        self.lists = ListRules(options.tool_filter, self.drops)
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._end_reason = Ended.EOF
        #: The client read nothing for too long (see :meth:`_output_stalled`).
        self._stalled = False
        self._listener: Any = None
        self._elicitation_ids = _Counter("elicitation-")
        #: Called at the end of the input, before the shutdown (the executable arms its watchdog).
        self.on_eof: Callable[[], None] | None = None
        #: Called on the watcher thread when large frames stopped passing for a while (the
        #: executable returns the free memory of the heap to the system).
        self.release_memory: Callable[[], None] | None = None
        #: Called on the reader thread for ``notifications/initialized`` (the sign-in's gate:
        #: from then on a sign-in needs the consent of the client).
        self.on_initialized: Callable[[], None] | None = None

    # ------------------------------------------------------------------ run

    def run(self) -> Ended:
        """Serve until the end of the input or the loss of the upstream server."""
        reader = threading.Thread(target=self._read_loop, name="mcpbridge-reader", daemon=True)
        watcher = threading.Thread(target=self._watch_loop, name="mcpbridge-watcher", daemon=True)
        self.output.set_reader(reader)
        reader.start()
        watcher.start()
        # In slices: Python runs a signal handler (SIGTERM) only in the main thread and only
        # when it wakes, and the kernel may deliver the signal to another thread.
        while not self._ended.wait(_MAIN_WAIT_SLICE):
            pass
        self._stop.set()
        flush_all()
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
                if self._state is State.CLOSING:
                    break
                try:
                    self._handle_line(item, lines.control_free)
                except Exception as exc:  # noqa: BLE001 - one line must not end the connection
                    # Only the type: the message of an error can hold content of the line.
                    self.drops(
                        logging.ERROR,
                        "failed to handle lines of the client",
                        "the bridge failed to handle a line of the client: %s",
                        type(exc).__name__,
                    )
        finally:
            if self._state not in END_STATES:
                self.shutdown()
            self._finish(Ended.UPSTREAM_LOST if self._state is State.LOST else Ended.EOF)

    def _handle_line(self, item: bytes | TooLong, control_free: bool = False) -> None:
        if isinstance(item, TooLong):
            request_id = legacy.recover_id(item.head, item.tail)
            if shows_response(item.head) and self._resolve_bad_answer(request_id):
                return
            self.output.write_error(
                request_id,
                errortable.error_object("line_too_long", f"limit: {self.options.max_line_bytes} bytes"),
            )
            return
        if len(item) >= LARGE_FRAME_BYTES:
            self._large_frames.count()
        if item[:64].lstrip()[:1] == b"[" and self._takes_batches():
            self._handle_batch(item)
            return
        try:
            message = jsonrpc.parse(item, max_depth=self.options.max_depth, control_free=control_free)
        except FrameError as exc:
            self._handle_frame_error(item, exc)
            return
        self._handle_message(message)

    def _takes_batches(self) -> bool:
        """A client of 2025-03-26 may send batches, once the connection is ready."""
        return self._revision.version == BATCH_REVISION and self._state in READY_STATES

    def _handle_batch(self, line: bytes) -> None:
        """A batch: each element as if it came alone, and their responses as one array."""
        try:  # the array is one level more than each of its messages
            elements = jsonrpc.parse_json(line, max_depth=self.options.max_depth + 1)
        except FrameError as exc:
            self._handle_frame_error(line, exc)
            return
        if not isinstance(elements, list) or not elements:
            self.output.write_error(None, errortable.error_object("invalid_request_shape"))
            return
        batch = self._batch = Batch()
        try:
            for element in elements:
                try:
                    message = jsonrpc.from_obj(element)
                except FrameError as exc:
                    self._handle_frame_error(b"", exc)
                    continue
                self._handle_message(message)
        finally:
            self._batch = None
            self.output.batch_frame(batch, None, end=True)

    def _write_error(self, request_id: Any, error: dict[str, Any]) -> None:
        """Write an error of the reader, into the batch that it reads if any."""
        if self._batch is None:
            self.output.write_error(request_id, error)
            return
        frame = {"jsonrpc": "2.0", "error": error}
        if request_id is not None:
            frame = {"jsonrpc": "2.0", "id": request_id, "error": error}
        self.output.batch_frame(self._batch, jsonrpc.serialize(frame))

    def _handle_message(self, message: jsonrpc.Message) -> None:
        if isinstance(message, Request):
            self._handle_request(message)
        elif isinstance(message, Notification):
            self._handle_notification(message)
        else:
            self._handle_answer(message)

    def _handle_frame_error(self, line: bytes, exc: FrameError) -> None:
        request_id = exc.id
        is_response = exc.is_response
        if request_id is None and exc.cause in ("parse_error", "too_deep"):
            # too_deep without an id: nesting past the parser's stack, the id was never read.
            request_id = legacy.recover_id(line[:256], line[-256:])
            is_response = shows_response(line[:256])
        if is_response and self._resolve_bad_answer(request_id):
            return
        if exc.is_response:
            self.drops(
                logging.DEBUG,
                "dropped responses of the client that are not valid",
                "dropped a response of the client that is not valid",
            )
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
        """A bad response with the id of a request of the bridge (``b-``) or the upstream (``u-``).

        The request that waits for it learns that its answer was lost; True when one did.
        Only a line shaped as a response comes here: a request or a notification of the
        client, valid or not, answers nothing, whatever its id.
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
            self.drops(
                logging.DEBUG,
                "dropped answers of the client that no request waits for",
                "dropped an answer of the client that no request waits for",
            )

    def _handle_notification(self, message: Notification) -> None:
        kind = legacy.classify_notification(message.method)
        if kind is legacy.NotificationClass.INITIALIZED and self.on_initialized is not None:
            self.on_initialized()
        action = lifecycle.action(self._state, kind)
        if action is Action.PASS:
            passthrough = self._passthrough
            assert passthrough is not None
            passthrough.forward_notification(message)
        elif action is Action.CANCEL:
            request_id = legacy.parse_cancelled(message.params)
            slot = self.slots.get(request_id) if request_id is not None else None
            if slot is not None:
                slot.cancel.cancel("the client canceled the request")
        elif action is Action.LISTEN:
            if self._init_written and self._listener is None and self._session is not None:
                self._start_listener()
        elif kind is legacy.NotificationClass.OTHER:
            self.drops(
                logging.DEBUG,
                "ignored notifications of the client",
                "ignored the notification %s of the client",
                printable(message.method),
            )

    def _handle_request(self, request: Request) -> None:
        kind = legacy.classify(request.method)
        self._act(lifecycle.action(self._state, kind), request, kind, None)

    def _act(self, action: Action, request: Request, kind: legacy.MethodClass, slot: Slot | None) -> None:
        """Do ``action`` of the lifecycle table; ``slot``: the slot of a request that was held."""
        if action is Action.START:
            self._start(request)
        elif action in _ERROR_OF:
            self._reply(request, slot, error=errortable.error_object(_ERROR_OF[action]))
        elif action is Action.PONG:
            self._reply(request, slot, result={})
        elif action is Action.SET_LEVEL:
            try:
                self._log_level = legacy.parse_set_level(request.params)
            except legacy.InvalidParams:
                self._reply(request, slot, error=errortable.error_object("invalid_params"))
            else:
                self._reply(request, slot, result={})
        elif action in (Action.NOT_INITIALIZED, Action.NOT_CONNECTED, Action.HOLD):
            self._before_ready(action, request, kind, slot)
        elif action is Action.FORWARD:
            self._forward(request, slot)
        elif action is Action.PASS:
            passthrough = self._passthrough
            assert passthrough is not None
            if not self._refused_call(request, slot):
                self._admit(request, passthrough.forward, slot=slot)
        elif action is Action.TASKS:
            session = self._session
            if session is None or not session.native_tasks:
                self._reply(request, slot, error=errortable.error_object("method_not_found"))
            else:
                self._admit(request, session.answer_task_request, slot=slot)
        elif action is Action.SUBSCRIBE:
            self._subscribe(request, kind, slot)
        elif slot is not None:  # NO_RESPONSE
            self.slots.release(slot)

    def _reply(
        self, request: Request, slot: Slot | None, *, result: Any = None, error: dict[str, Any] | None = None
    ) -> None:
        """Answer ``request`` at once: on its slot when it has one (then released), else on the reader."""
        if slot is not None:
            if error is not None:
                self.output.respond_error(slot, error)
            else:
                self.output.respond(slot, result)
            self.slots.release(slot)
        elif error is not None:
            self._write_error(request.id, error)
        elif self._batch is not None:
            self.output.batch_frame(self._batch, jsonrpc.serialize(jsonrpc.Response(request.id, result)))
        else:
            self.output.write(jsonrpc.Response(request.id, result))

    def _before_ready(
        self, action: Action, request: Request, kind: legacy.MethodClass, slot: Slot | None
    ) -> None:
        """A request before the upstream is ready: held while initialize runs, else an error."""
        if legacy.has_modern_meta(request.params):  # a client of both revisions probes 2026-07-28
            self._reply(request, slot, error=errortable.error_object("method_not_found"))
            return
        if action is Action.HOLD:
            if slot is None:
                slot = self.slots.admit(request)
                if slot is None:
                    return
            with self._state_lock:
                state = self._state
                if state is State.INITIALIZING:
                    self._held.append((slot, request, kind))
                    return
            self._act(lifecycle.action(state, kind), request, kind, slot)
        elif action is Action.NOT_CONNECTED:
            error = errortable.error_object("not_connected", f"the initialize failed: {self._failure}")
            self._reply(request, slot, error=error)
        else:
            self._reply(request, slot, error=errortable.error_object("not_initialized"))

    def _release_held(self, state: State) -> None:
        """Initialize ended in ``state``: do with each held request what that state does."""
        with self._state_lock:
            held, self._held = self._held, []
        for slot, request, kind in held:
            if slot.cancel.cancelled:
                self.slots.release(slot)
            else:
                self._act(lifecycle.action(state, kind), request, kind, slot)

    def _start(self, request: Request) -> None:
        with self._state_lock:
            before = self._state
            won = before in (State.AWAITING, State.FAILED)
            if won:
                self._state = State.INITIALIZING
                self._no_initialize.clear()
        if not won:
            self._reply(request, None, error=errortable.error_object("already_initialized"))
            return
        slot = self.slots.admit(request)
        with self._state_lock:
            if slot is None:
                if self._state is State.INITIALIZING:
                    self._state = before
                self._no_initialize.set()
                return
            self._init_slot = slot
        self.slots.submit(slot, request, self._initialize)

    def _conclude_locked(self, slot: Slot, state: State) -> bool:
        """The initialize of ``slot`` ends in ``state`` (the caller holds the state lock).

        False when it had ended already. At the end of the connection the state stays.
        """
        if self._init_slot is not slot:
            return False
        self._init_slot = None
        if self._state is State.INITIALIZING:
            self._state = state
        self._no_initialize.set()
        return True

    def _refused_call(self, request: Request, slot: Slot | None) -> bool:
        """A ``tools/call`` of a tool that the list rules hide: the error of an unknown tool."""
        if request.method != "tools/call":
            return False
        refused = self.lists.refuse_call(request.params)
        if refused is not None:  # a hidden tool, in either era: the server never sees the call
            self._reply(request, slot, error=refused)
        return refused is not None

    def _forward(self, request: Request, slot: Slot | None) -> None:
        session = self._session
        assert session is not None
        if self._refused_call(request, slot):
            return
        cached = self.lists.lookup(request.method, request.params)
        if cached is not None:
            # Answered at once on the reader; the slot keeps the id in use until then.
            answer = functools.partial(session.answer_from_cache, result=cached)
            self._admit(request, session.forward, answer, slot=slot)
            return
        on_reader = session.begin_forward if self.options.forward_on_reader else None
        self._admit(request, session.forward, on_reader, slot=slot)

    def _subscribe(self, request: Request, kind: legacy.MethodClass, slot: Slot | None) -> None:
        listener = self._listener
        if listener is None or not listener.accepts_subscriptions:
            self._reply(request, slot, error=errortable.error_object("method_not_found"))
            return
        try:
            uri = legacy.parse_subscribe(request.params)
        except legacy.InvalidParams:
            self._reply(request, slot, error=errortable.error_object("invalid_params"))
            return
        subscribe = kind is legacy.MethodClass.SUBSCRIBE
        self._admit(request, lambda slot, req: listener.change(slot, uri, subscribe=subscribe), slot=slot)

    # ---------------------------------------------------------------- slots

    def _admit(
        self,
        request: Request,
        work: Work,
        on_reader: Callable[[Slot, Request], bool] | None = None,
        *,
        slot: Slot | None = None,
    ) -> None:
        """Give the request a slot (unless it has one) and run ``work`` on it; ``on_reader`` may
        start it here first.

        ``on_reader`` must not block (it runs on the reader, or on the slot thread of
        initialize for a request that was held); it returns False when ``work`` must run on
        a slot thread after all.
        """
        if slot is None:
            slot = self.slots.admit(request)
            if slot is None:
                return
            if self._batch is not None:
                self.output.join_batch(slot, self._batch)
        if on_reader is not None and on_reader(slot, request):
            return
        self.slots.submit(slot, request, work)

    def submit(self, slot: Slot, request: Request, work: Work) -> None:
        """Run ``work`` on a slot thread; the slot is released when it ends."""
        self.slots.submit(slot, request, work)

    def release(self, slot: Slot) -> None:
        """The slot ended without a slot thread."""
        self.slots.release(slot)

    def fail(self, slot: Slot, exc: Exception) -> None:
        """A bug of the bridge failed the request of ``slot``: an error line, and the error for the client."""
        self.slots.fail(slot, exc)

    # --------------------------------------------------------------- output

    def write_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Write a notification to the client."""
        return self.output.write_notification(method, params)

    # ------------------------------------------------------------ lifecycle

    def _initialize(self, slot: Slot, request: Request) -> None:
        """The work of the initialize slot.

        However it ends (an error of the upstream, a cancel, a time limit, a bug of the
        bridge), the state leaves ``INITIALIZING``: to ``READY`` or ``READY_2025``, or to
        ``FAILED`` or ``AWAITING``, from where a new ``initialize`` can start the upstream
        again. A client that it started and that carries no session is closed.
        """
        opened: list[Client] = []
        try:
            self._start_upstream(slot, request, opened)
        except Exception as exc:
            for client in opened:
                client.close(self.options.shutdown_grace)
            opened.clear()
            error = _named_error(exc)
            if error is None:
                self._initialize_failed(slot, bug=exc)
                return
            if not isinstance(exc, McpError):
                self.drops(logging.ERROR, FAILED_STARTS, "initialize failed: %s", error["data"]["cause"])
            self._initialize_failed(slot, error)
        finally:
            for client in opened:  # the connection ended while the upstream started
                client.close(self.options.shutdown_grace)
            with self._state_lock:
                stuck = self._init_slot is slot
            if stuck:
                self._initialize_failed(slot)

    def _initialize_failed(
        self, slot: Slot, error: dict[str, Any] | None = None, *, bug: Exception | None = None
    ) -> None:
        """The initialize failed: first the state from which initialize can be sent again, then its
        answer, then the answers of the requests held meanwhile.

        After a cancel (no ``error``, no ``bug``) that state is ``AWAITING``; else it is
        ``FAILED``, and the requests get ``not_connected`` with the cause of the failure.
        """
        if bug is not None:
            cause: str | None = errortable.INTERNAL_CAUSE
        elif error is not None:
            data = error.get("data")
            cause = str(data["cause"]) if isinstance(data, dict) and "cause" in data else "rpc"
        else:
            cause = None
        state = State.AWAITING if cause is None else State.FAILED
        with self._state_lock:
            if self._conclude_locked(slot, state) and cause is not None:
                self._failure = cause
        if bug is not None:
            self.slots.fail(slot, bug)
        elif error is not None:
            self.output.respond_error(slot, error)
        self._release_held(state)

    def _start_upstream(self, slot: Slot, request: Request, opened: list[Client]) -> None:
        """Start the upstream and answer initialize; ``opened`` gets a client to close on a failure."""
        try:
            params = legacy.parse_initialize(request.params)
        except legacy.InvalidParams:
            self._initialize_failed(slot, errortable.error_object("invalid_params"))
            return
        self._revision = revisions.negotiate(params.protocol_version)
        self._profile = revisions.choose_profile(
            self.options.host_profile, params.client_info["name"], self._revision
        )
        self._client_kinds_caps = revisions.client_capabilities(self._revision, params.capabilities)
        self._upstream_caps = translate.client_capabilities_for_upstream(self._client_kinds_caps)
        if self._legacy is not None and self.options.protocol == "legacy":
            self._pass_through(slot, request, None, None)
            return
        try:
            client = self._connect(params.client_info, self._on_upstream_notification)
        except McpError as exc:
            log_spawn_failed(self.drops, exc)
            self._initialize_failed(slot, errortable.error_object(exc.cause))
            return
        opened.append(client)
        try:
            result = client.discover(
                timeout=self.options.timeouts.discover, cancel=slot.cancel, capabilities=self._upstream_caps
            )
        except McpError as exc:
            if falls_back(exc, protocol=self.options.protocol, upstream=self._legacy, drops=self.drops):
                opened.clear()  # the passthrough owns the probe now
                self._pass_through(slot, request, client, exc)
                return
            opened.clear()
            client.close(self.options.shutdown_grace)
            if isinstance(exc, Cancelled):
                return
            error = discover_error(exc, self.options.timeouts.discover)
            if isinstance(exc, Closed):
                self.drops(
                    logging.ERROR, FAILED_STARTS, "%s", stopped_during("server/discover", client.exit_status)
                )
            else:
                self.drops(
                    logging.ERROR,
                    FAILED_STARTS,
                    "server/discover failed: %s",
                    discover_failure_text(exc, error),
                    exc_info=exc,
                )
            self._initialize_failed(slot, error)
            return
        session = ModernSession(client, self, discover_result=result)
        init = session.advertise(
            translate.initialize_result(
                result,
                fallback_name=self.options.fallback_name,
                version=self.options.version,
                icon_rule=self.options.icon_rule,
                protocol_version=self._revision.version,
            )
        )
        self._declared = translate.declared_notifications(init)
        with self._state_lock:
            if self._state is State.LOST or self._upstream_taken:
                return  # the connection ended: the client is closed with ``opened``
            self._session = session
            opened.clear()
            self._conclude_locked(slot, State.READY)
        log.info(
            "the upstream server speaks MCP %s; the client MCP %s, with the host profile %s",
            MODERN,
            self._revision,
            self._profile,
        )
        self._write_initialize_result(slot, init)
        self._release_held(State.READY)

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

        self.output.write_locked(frames)

    # ------------------------------------------------- 2025-era upstream

    def _pass_through(
        self, slot: Slot, request: Request, probe: Client | None, probe_error: McpError | None
    ) -> None:
        """The upstream speaks the 2025 era: a LegacyPassthrough carries the connection from now on."""
        assert self._legacy is not None
        passthrough = LegacyPassthrough(
            self.output, self._legacy, self.options, lists=self.lists, drops=self.drops
        )
        try:
            result = passthrough.open(request.params, probe, probe_error, slot.cancel)
        except OpenFailed as failed:
            self._initialize_failed(slot, failed.error)
            return
        except Exception:
            passthrough.close(self.options.shutdown_grace)
            if probe is not None:
                probe.close(self.options.shutdown_grace)
            raise
        with self._state_lock:
            closing = self._state is State.LOST or self._upstream_taken
            if not closing:
                self._passthrough = passthrough
                self._conclude_locked(slot, State.READY_2025)
        if closing:
            passthrough.close(self.options.shutdown_grace)
            return
        self._write_initialize_result(slot, result)
        self._release_held(State.READY_2025)

    # ------------------------------------------------------- notifications

    def _on_upstream_notification(self, message: Notification) -> None:
        forward_upstream_log(self.output, self._log_level, message)

    def _start_listener(self) -> None:
        from .notify import Listener  # imported here: the listen streams start after the answer to initialize

        declared = self._declared
        if declared is None or not declared.listens:
            return
        assert self._session is not None
        self._listener = Listener(
            self.output,
            self._session.client,
            declared,
            capabilities=self._upstream_caps,
            log_level=lambda: self._log_level,
            shutdown_grace=self.options.shutdown_grace,
            lists=self.lists,
        )
        self._listener.start()

    @property
    def upstream_lost(self) -> bool:
        """True once the connection closes because the upstream server stopped."""
        return self._state is State.LOST

    @property
    def log_level(self) -> str | None:
        return self._log_level

    @property
    def upstream_capabilities(self) -> dict[str, Any]:
        return self._upstream_caps

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities of the client, in the terms of its revision."""
        return self._client_kinds_caps

    @property
    def client_revision(self) -> revisions.Revision:
        return self._revision

    @property
    def host_profile(self) -> revisions.Profile:
        return self._profile

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
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        request = (ELICITATION_CREATE, params)
        [answer] = self.pending.ask(self.output, [request], timeout=timeout, cancel=cancel)
        return isinstance(answer, dict) and answer.get("action") == "accept"

    # ------------------------------------------------------------- watcher

    def _watch_loop(self) -> None:
        interval = self.options.watch_interval
        while not self._stop.wait(interval):
            upstream = self._upstream
            if upstream is not None and upstream.gone and self._state in READY_STATES:
                self._upstream_lost(upstream)
                return
            stalled = self.output.waiting()
            if stalled >= self.options.output_stall_timeout:
                self._output_stalled(stalled)
                return
            self.slots.report_long()
            if self.slots.retire_idle() and upstream is not None:
                upstream.rest()
            self._large_frames.release_when_quiet(self.release_memory)

    def describe(self, wait: float) -> FrontendState:
        """What the connection does now, for a thread dump: no content, no secret.

        Waits at most ``wait`` seconds for each lock; a part whose lock stays held
        is ``None`` (the stacks of the dump show the thread that holds it).
        """
        upstream = self._upstream
        return FrontendState(
            state=self._state.value,
            slots=self.slots.describe(wait),
            output=self.output.describe(wait),
            pending=self.pending.describe(wait),
            upstream=upstream.describe() if upstream is not None else None,
        )

    @property
    def _upstream(self) -> UpstreamSession | None:
        """The session of the upstream server once initialize succeeded."""
        return self._session if self._session is not None else self._passthrough

    def _upstream_lost(self, client: UpstreamSession) -> None:
        if not self._enter_closing(Ended.UPSTREAM_LOST):
            return
        status = client.exit_status or "an unknown status"
        log.error("the upstream server exited with %s", status)
        self.slots.cancel_all("the upstream server stopped", errortable.error_object("upstream_exited"))
        self._end_slots(self.options.shutdown_grace)
        client.close(self.options.shutdown_grace)
        self._finish(Ended.UPSTREAM_LOST)

    def _output_stalled(self, seconds: float) -> None:
        """The client has read nothing for too long while output waits: end as at the end of input."""
        log.error(
            "the client has read nothing for %s while output waits for it, thus the bridge ends the "
            "connection",
            format_duration(float(int(seconds))),
        )
        self._stalled = True
        self.close()

    # ------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """The end of the input: answer what the client asked before it, within the grace;
        then answer the rest with ``input_ended``, and close the upstream.

        An initialize under way goes on too; when requests wait for it, the grace counts
        from its answer.
        """
        if not self._enter_closing(Ended.EOF):
            return
        self._stop.set()
        if self.on_eof is not None:
            self.on_eof()
        self.pending.close()  # the client answers none of the bridge's requests any more
        grace = self.options.shutdown_grace
        if not self._stalled and self._held:
            # Requests wait for an initialize under way (a file of requests piped in): it goes on
            # within its own time limit, and the grace counts from its answer.
            self._no_initialize.wait(self.options.timeouts.discover + grace)
        deadline = time.monotonic() + grace
        if not self._stalled:
            self.slots.drain(grace)
        self.slots.cancel_all("the input of the bridge ended", errortable.error_object("input_ended"))
        with self._state_lock:
            self._upstream_taken = True
            upstream = self._upstream
        self._end_slots(max(_LAST_DRAIN, deadline - time.monotonic()))
        if upstream is not None:
            upstream.close(grace)

    def close(self) -> None:
        """Stop as at the end of the input (SIGTERM)."""
        self.shutdown()
        self._finish(Ended.EOF)

    def kill_upstream(self) -> None:
        """Kill the upstream process group at once (the watchdog's last step)."""
        upstream = self._upstream
        if upstream is not None:
            upstream.kill()

    def _enter_closing(self, reason: Ended) -> bool:
        """Move to CLOSING for ``reason``; False when the connection was closing already."""
        with self._state_lock:
            if self._state in END_STATES:
                return False
            self._state = State.LOST if reason is Ended.UPSTREAM_LOST else State.CLOSING
            return True

    def _end_slots(self, drain: float) -> None:
        """Wake the waits of the slots, stop the listener, wait ``drain`` s for the slots, close
        the output."""
        self.pending.close()
        if self._listener is not None:
            self._listener.stop()
        self.lists.clear("the end of the connection")
        self.slots.drain(drain)
        self.output.close(0.0 if self._stalled else self.options.shutdown_grace)
        self.slots.close()


#: The actions of the lifecycle table that answer an error at once, with its cause.
_ERROR_OF: dict[Action, str] = {
    Action.ALREADY_INITIALIZED: "already_initialized",
    Action.METHOD_NOT_FOUND: "method_not_found",
    Action.UPSTREAM_EXITED: "upstream_exited",
}


def _named_error(exc: Exception) -> dict[str, Any] | None:
    """The error that the client gets for ``exc``, which ended an initialize; ``None`` for a bug.

    A canceled initialize gets no response (the output writes nothing for a canceled slot).
    """
    if isinstance(exc, McpError):
        return errortable.error_from_mcp(exc)
    if isinstance(exc, WaitEnded):  # the consent of the client to a sign-in
        return errortable.error_object("input_timeout" if exc.reason == "timeout" else "not_connected")
    cause = getattr(exc, "cause", None)
    if isinstance(exc, BridgeError) and isinstance(cause, str) and cause in errortable.ERRORS:
        return errortable.error_object(cause)
    return None


class _Counter:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._n = 0

    def next(self) -> str:
        with self._lock:
            self._n += 1
            return f"{self._prefix}{self._n}"
