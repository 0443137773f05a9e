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
from collections.abc import Callable
from typing import Any, BinaryIO

from ..mcp import jsonrpc
from ..mcp.cancel import CancelToken
from ..mcp.client import Client
from ..mcp.droplog import DropLog, flush_all
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
from . import errortable, legacy, revisions, translate
from .dumptext import FrontendState
from .listrules import ListRules
from .options import Connect, Options, Timeouts
from .output import LARGE_FRAME_BYTES, QUIET_SECONDS, LargeFrames, Output, Slot
from .passthrough import (
    FAILED_STARTS,
    LegacyPassthrough,
    LegacyUpstream,
    OpenFailed,
    falls_back,
    log_spawn_failed,
    stopped_during,
)
from .pending import BAD_LINE, ClientError, PendingAnswers
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


#: The longest sleep of the thread in :meth:`Frontend.run`, which runs the signal handlers.
_MAIN_WAIT_SLICE = 0.25


class State(enum.Enum):
    AWAITING = "awaiting_initialize"
    INITIALIZING = "initializing"
    READY = "ready"
    CLOSING = "closing"


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
        self._closing_reason: Ended | None = None
        #: The log lines of the connection that the client can make repeat (refusals, drops).
        self.drops = DropLog(log)
        #: The requests of the client in flight.
        self.slots = Slots(self.output, options.max_in_flight, self.drops)
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
                if self._state is State.CLOSING and self._closing_reason is Ended.EOF:
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
            if self._closing_reason is None:
                self.shutdown()
            self._finish(self._closing_reason or Ended.EOF)

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
        self.output.write_error(request_id, error)

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
            slot = self.slots.get(request_id)
            if slot is not None:
                slot.cancel.cancel("the client canceled the request")
        elif message.method == "notifications/initialized":
            if self._init_written and self._listener is None and self._session is not None:
                self._start_listener()
        else:
            self.drops(
                logging.DEBUG,
                "ignored notifications of the client",
                "ignored the notification %s of the client",
                printable(message.method),
            )

    def _handle_request(self, request: Request) -> None:
        kind = legacy.classify(request.method)
        if request.method == "tools/call" and self._state is State.READY:
            refused = self.lists.refuse_call(request.params)
            if refused is not None:  # a hidden tool, in either era: the server never sees the call
                self.output.write_error(request.id, refused)
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
            self.output.write(jsonrpc.Response(request.id, {}))
            return
        if kind is legacy.MethodClass.SET_LEVEL:
            try:
                self._log_level = legacy.parse_set_level(request.params)
            except legacy.InvalidParams:
                self.output.write_error(request.id, errortable.error_object("invalid_params"))
                return
            self.output.write(jsonrpc.Response(request.id, {}))
            return
        if kind is legacy.MethodClass.DISCOVER:
            self.output.write_error(request.id, errortable.error_object("method_not_found"))
            return
        state = self._state
        if state is State.CLOSING:
            if self._closing_reason is Ended.UPSTREAM_LOST:
                self.output.write_error(request.id, errortable.error_object("upstream_exited"))
            return
        if kind is legacy.MethodClass.INITIALIZE:
            with self._state_lock:
                won = self._state is State.AWAITING
                if won:
                    self._state = State.INITIALIZING
            if not won:
                self.output.write_error(request.id, errortable.error_object("already_initialized"))
                return
            self._admit(request, self._initialize)
            return
        if state is not State.READY:
            if legacy.has_modern_meta(request.params):
                self.output.write_error(request.id, errortable.error_object("method_not_found"))
            else:
                self.output.write_error(request.id, errortable.error_object("not_initialized"))
            return
        if kind is legacy.MethodClass.FORWARD:
            session = self._session
            assert session is not None
            cached = self.lists.lookup(request.method, request.params)
            if cached is not None:
                # Answered at once on the reader; the slot keeps the id in use until then.
                self._admit(
                    request, session.forward, functools.partial(session.answer_from_cache, result=cached)
                )
                return
            on_reader = session.begin_forward if self.options.forward_on_reader else None
            self._admit(request, session.forward, on_reader)
        elif kind is legacy.MethodClass.TASK and self._session is not None and self._session.native_tasks:
            self._admit(request, self._session.answer_task_request)
        elif kind in (legacy.MethodClass.SUBSCRIBE, legacy.MethodClass.UNSUBSCRIBE):
            if self._listener is None or not self._listener.accepts_subscriptions:
                self.output.write_error(request.id, errortable.error_object("method_not_found"))
                return
            try:
                uri = legacy.parse_subscribe(request.params)
            except legacy.InvalidParams:
                self.output.write_error(request.id, errortable.error_object("invalid_params"))
                return
            subscribe = kind is legacy.MethodClass.SUBSCRIBE
            self._admit(request, lambda slot, req: self._listener.change(slot, uri, subscribe=subscribe))
        else:
            self.output.write_error(request.id, errortable.error_object("method_not_found"))

    # ---------------------------------------------------------------- slots

    def _admit(
        self,
        request: Request,
        work: Work,
        on_reader: Callable[[Slot, Request], bool] | None = None,
    ) -> None:
        """Give the request a slot and run ``work`` on it; ``on_reader`` may start it here first.

        ``on_reader`` runs on the reader thread and must not block; it returns
        False when ``work`` must run on a slot thread after all.
        """
        slot = self.slots.admit(request)
        if slot is None:
            if request.method == "initialize":
                self._set_state(State.AWAITING)
            return
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

    def _set_state(self, state: State) -> None:
        with self._state_lock:
            if self._state is not State.CLOSING:
                self._state = state

    def _initialize(self, slot: Slot, request: Request) -> None:
        try:
            params = legacy.parse_initialize(request.params)
        except legacy.InvalidParams:
            self._set_state(State.AWAITING)
            self.output.respond_error(slot, errortable.error_object("invalid_params"))
            return
        self._revision = revisions.negotiate(params.protocol_version)
        self._profile = revisions.choose_profile(
            self.options.host_profile, params.client_info["name"], self._revision
        )
        self._client_kinds_caps = revisions.client_capabilities(self._revision, params.capabilities)
        self._upstream_caps = translate.client_capabilities_for_upstream(self._client_kinds_caps)
        connect = self._connect
        if self._legacy is not None and self.options.protocol in ("legacy", "auto"):
            # None: the passthrough carries the connection, or initialize failed.
            modern = self._pass_through(slot, request, None, None)
            if modern is None:
                return
            connect = modern
        try:
            client = connect(params.client_info, self._on_upstream_notification)
        except McpError as exc:
            self._set_state(State.AWAITING)
            log_spawn_failed(self.drops, exc)
            self.output.respond_error(slot, errortable.error_object(exc.cause))
            return
        try:
            result = client.discover(
                timeout=self.options.timeouts.discover, cancel=slot.cancel, capabilities=self._upstream_caps
            )
        except McpError as exc:
            if falls_back(exc, protocol=self.options.protocol, upstream=self._legacy, drops=self.drops):
                self._pass_through(slot, request, client, exc)
                return
            client.close(self.options.shutdown_grace)
            self._set_state(State.AWAITING)
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
            self.output.respond_error(slot, error)
            return
        self._session = ModernSession(client, self, discover_result=result)
        init = self._session.advertise(
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
            if self._state is State.CLOSING:
                return
            self._state = State.READY
        log.info(
            "the upstream server speaks MCP %s; the client MCP %s, with the host profile %s",
            MODERN,
            self._revision,
            self._profile,
        )
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

        self.output.write_locked(frames)

    # ------------------------------------------------- 2025-era upstream

    def _pass_through(
        self, slot: Slot, request: Request, probe: Client | None, probe_error: McpError | None
    ) -> Connect | None:
        """Send the client's initialize upstream: when the server takes it, a LegacyPassthrough
        carries the connection from now on; else the connect of server/discover, or None."""
        assert self._legacy is not None
        passthrough = LegacyPassthrough(
            self.output, self._legacy, self.options, lists=self.lists, drops=self.drops
        )
        first = probe is None and self.options.protocol == "auto"
        try:
            result = passthrough.open(request.params, probe, probe_error, slot.cancel, first=first)
        except OpenFailed as failed:
            self._set_state(State.AWAITING)
            if failed.error is not None:
                self.output.respond_error(slot, failed.error)
            return None
        if result is None:
            return passthrough.modern_connect(self._connect)
        self._passthrough = passthrough
        with self._state_lock:
            closing = self._state is State.CLOSING
            if not closing:
                self._state = State.READY
        if closing:
            passthrough.close(self.options.shutdown_grace)
            return None
        self._write_initialize_result(slot, result)
        return None

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
        return self._closing_reason is Ended.UPSTREAM_LOST

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
            if upstream is not None and upstream.gone and self._state is State.READY:
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
        self._end_slots()
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
        """The end of the input: cancel everything, wait at most the grace, close the upstream."""
        if not self._enter_closing(Ended.EOF):
            return
        self._stop.set()
        if self.on_eof is not None:
            self.on_eof()
        self.slots.cancel_all("the client closed the connection")
        self._end_slots()
        upstream = self._upstream
        if upstream is not None:
            upstream.close(self.options.shutdown_grace)

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
            if self._state is State.CLOSING:
                return False
            self._state = State.CLOSING
            self._closing_reason = reason
            return True

    def _end_slots(self) -> None:
        """Wake the waits of the slots, stop the listener, wait the grace, close the output."""
        self.pending.close()
        if self._listener is not None:
            self._listener.stop()
        self.lists.clear("the end of the connection")
        self.slots.drain(self.options.shutdown_grace)
        self.output.close(0.0 if self._stalled else self.options.shutdown_grace)
        self.slots.close()


class _Counter:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._n = 0

    def next(self) -> str:
        with self._lock:
            self._n += 1
            return f"{self._prefix}{self._n}"
