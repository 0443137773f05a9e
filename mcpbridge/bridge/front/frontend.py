"""The front end: one 2025-11-25 client connection on a pair of byte streams.

Theory of operation
-------------------

The **reader** thread reads the client's lines and hands each to its
:class:`~.lines.ClientLines` (module ``lines``), which parses it, answers a bad
line and takes a batch apart. The reader classifies each message. It answers
``ping``, ``logging/setLevel``, ``server/discover`` and every bad line itself,
resolves the client's answers to the bridge's own requests, and hands every
other request to a **slot** (module ``slots``): a task of a
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

A forwarded request goes to the :class:`~.sessions.session.UpstreamSession` of the
connection. For a :class:`~.sessions.session.ModernSession` it becomes a
:class:`~.sessions.run.RequestRun` (module ``run`` follows a ``tools/call`` from the
reader thread to the upstream client and back; its **fast path** sends the first
round from the reader thread, see ``Options.forward_on_reader``); the 2025-era
:class:`~.sessions.passthrough.LegacyPassthrough` forwards it on a slot thread. Both
write to the client only through the :class:`~.output.Output` (module ``output``).

The **list rules** of the connection (:class:`~.listrules.ListRules`) come first:
the reader answers a ``tools/call`` of a tool that ``--allow-tool`` and
``--deny-tool`` hide with the error of an unknown tool, in either era, and on
the modern path a list request with a fresh page in the list cache from that
page. Both sessions give each list result to the rules (the cache keeps it, the
filter hides tools), and the listen stream drops the cache at a list change or
a gap.

The reader looks up what to do with each request and notification in the
lifecycle table, :data:`~.lifecycle.LIFECYCLE` (module ``lifecycle``: the state
of the connection and the class of the message give an action), and does it
(:meth:`Frontend.act`). The state belongs to the :class:`~.initialize.Initializer`
of the connection (module ``initialize``): it starts the upstream server for the
``initialize`` that wins, decides its era, holds the requests that come
meanwhile and gives them back to :meth:`Frontend.act` after its answer (its
module names the rules of an initialize). The other rules that the table does
not show:

* At the end of the input (:meth:`Frontend.shutdown`) the reader reads no more;
  the requests in flight get the grace (``Options.shutdown_grace``) to answer,
  and those still without an answer get ``input_ended``. When requests wait for
  an initialize under way, it first ends (within its time limit).
* A client of 2025-03-26 may send a JSON-RPC batch: the reader takes each element
  as a line of its own, and every answer to it goes into one
  :class:`~.output.Batch`, written as one array once the last is in (module
  ``lines``).

A **watcher** thread looks at the upstream every 200 ms: when a child process
is gone it answers every request in flight with ``upstream_exited`` and ends
the connection. When the client has read nothing for ``output_stall_timeout``
(:data:`~.options.OUTPUT_STALL_TIMEOUT`) while output waits for it, the watcher
ends the connection as at the end of the input (the *stall rule*). It also logs
requests that wait for a long time.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO

from ...mcp import jsonrpc
from ...mcp.cancel import CancelToken
from ...mcp.droplog import DropLog, flush_all
from ...mcp.jsonrpc import ErrorResponse, Notification, Request, Response
from ...mcp.protocol import ELICITATION_CREATE
from ...mcp.text import format_duration, printable
from ...mcp.transports import PeerForm
from ...mcp.transports.framing import LineReader
from ..rules import errortable, legacy, revisions
from ..sessions.passthrough import LegacyUpstream
from ..sessions.session import UpstreamSession, discover_error
from . import lifecycle
from .initialize import Initializer
from .lifecycle import END_STATES, READY_STATES, Action, State
from .lines import ClientLines
from .listrules import ListRules
from .options import Connect, Options, Timeouts
from .output import LARGE_FRAME_BYTES, QUIET_SECONDS, LargeFrames, Output, Slot
from .pending import BAD_LINE, ClientError, PendingAnswers
from .slots import Slots, Work

if TYPE_CHECKING:
    from .dumptext import FrontendState

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
        self._large_frames = LargeFrames()
        #: The client's output; the parts behind the front end write through it.
        self.output = Output(stdout, self._large_frames.count, max_queued=options.max_output_bytes)
        self.options = options
        #: The log lines of the connection that the client can make repeat (refusals, drops).
        self.drops = DropLog(log)
        #: The lines of the client: their messages, the errors of bad lines, the batches.
        self._lines = ClientLines(self, self.output, options, self.drops, self._large_frames)
        #: The requests of the client in flight.
        self.slots = Slots(self.output, options.max_in_flight, self.drops, self._lines.write_error)
        self._log_level: str | None = None
        self.pending = PendingAnswers()
        #: The tool filter and the list cache of the connection.
        self.lists = ListRules(options.tool_filter, self.drops)
        #: The initialize, the state of the connection and the session of the upstream.
        self._init = Initializer(self, connect, legacy)
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
        ending = [watcher]
        if self._end_reason is Ended.EOF:
            reader.join(timeout=1.0)
            ending.append(reader)
        for thread in ending:
            if thread.is_alive():  # the process ends anyway; say which thread did not
                log.warning("the thread %s did not end at the end of the connection", thread.name)
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
                if self._init.state is State.CLOSING:
                    break
                try:
                    self._lines.handle(item, lines.control_free)
                except Exception as exc:  # noqa: BLE001 - one line must not end the connection
                    # Only the type: the message of an error can hold content of the line.
                    self.drops(
                        logging.ERROR,
                        "failed to handle lines of the client",
                        "the bridge failed to handle a line of the client: %s",
                        type(exc).__name__,
                    )
        finally:
            if self._init.state not in END_STATES:
                self.shutdown()
            self._finish(Ended.UPSTREAM_LOST if self._init.state is State.LOST else Ended.EOF)

    def takes_batches(self) -> bool:
        """A client of 2025-03-26 may send batches, once the connection is ready."""
        return self._init.revision.version == BATCH_REVISION and self._init.state in READY_STATES

    def handle_message(self, message: jsonrpc.Message) -> None:
        """Do with a message of the client what the lifecycle table says (an answer resolves a request)."""
        if isinstance(message, Request):
            self._handle_request(message)
        elif isinstance(message, Notification):
            self._handle_notification(message)
        else:
            self._handle_answer(message)

    def resolve_bad_answer(self, request_id: Any) -> bool:
        """A bad response with the id of a request of the bridge (``b-``) or the upstream (``u-``).

        The request that waits for it learns that its answer was lost; True when one did.
        Only a line shaped as a response comes here: a request or a notification of the
        client, valid or not, answers nothing, whatever its id.
        """
        if self.pending.resolve(request_id, BAD_LINE):
            return True
        passthrough = self._init.passthrough
        return passthrough is not None and passthrough.on_unreadable_answer(request_id)

    def _handle_answer(self, message: Response | ErrorResponse) -> None:
        if self._init.passthrough is not None and self._init.passthrough.on_client_answer(message):
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
        action = lifecycle.action(self._init.state, kind)
        if action is Action.PASS:
            passthrough = self._init.passthrough
            assert passthrough is not None
            passthrough.forward_notification(message)
        elif action is Action.CANCEL:
            request_id = legacy.parse_cancelled(message.params)
            slot = self.slots.get(request_id) if request_id is not None else None
            if slot is not None:
                slot.cancel.cancel("the client canceled the request")
        elif action is Action.LISTEN:
            if self._init.result_written and self._listener is None and self._init.session is not None:
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
        self.act(lifecycle.action(self._init.state, kind), request, kind, None)

    def act(self, action: Action, request: Request, kind: legacy.MethodClass, slot: Slot | None) -> None:
        """Do ``action`` of the lifecycle table; ``slot``: the slot of a request that was held."""
        if action is Action.START:
            if not self._init.start(request):
                self._reply(request, None, error=errortable.error_object("already_initialized"))
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
            passthrough = self._init.passthrough
            assert passthrough is not None
            if not self._refused_call(request, slot):
                self._admit(request, passthrough.forward, slot=slot)
        elif action is Action.TASKS:
            session = self._init.session
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
            self._lines.write_error(request.id, error)
        else:
            self._lines.write_result(request.id, result)

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
            state = self._init.hold(slot, request, kind)
            if state is not None:
                self.act(lifecycle.action(state, kind), request, kind, slot)
        elif action is Action.NOT_CONNECTED:
            error = errortable.error_object("not_connected", f"the initialize failed: {self._init.failure}")
            self._reply(request, slot, error=error)
        else:
            self._reply(request, slot, error=errortable.error_object("not_initialized"))

    def _refused_call(self, request: Request, slot: Slot | None) -> bool:
        """A ``tools/call`` of a tool that the list rules hide: the error of an unknown tool."""
        if request.method != "tools/call":
            return False
        refused = self.lists.refuse_call(request.params)
        if refused is not None:  # a hidden tool, in either era: the server never sees the call
            self._reply(request, slot, error=refused)
        return refused is not None

    def _forward(self, request: Request, slot: Slot | None) -> None:
        """A request for the 2026-07-28 server: a run carries it (module ``run`` says its way)."""
        session = self._init.session
        assert session is not None
        if self._refused_call(request, slot):
            return
        cached = self.lists.lookup(request.method, request.params)
        slot = self._slot_for(request, slot)
        if slot is None:
            return
        run = session.request_run(slot, request)
        if cached is not None:
            run.answer_from_cache(cached)  # at once on the reader; the slot kept the id in use until then
        elif not (self.options.forward_on_reader and run.send_first_round()):
            self.slots.submit(slot, request, lambda _slot, _request: run.on_slot())

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
        *,
        slot: Slot | None = None,
    ) -> None:
        """Give the request a slot (unless it has one) and run ``work`` on a slot thread."""
        slot = self._slot_for(request, slot)
        if slot is not None:
            self.slots.submit(slot, request, work)

    def _slot_for(self, request: Request, slot: Slot | None) -> Slot | None:
        """``slot``, or a new slot for ``request``; ``None`` when it was refused (and answered)."""
        if slot is None:
            slot = self.slots.admit(request)
            if slot is not None:
                self._lines.join(slot)
        return slot

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

    # ------------------------------------------------------- notifications

    def _start_listener(self) -> None:
        from ..sessions.notify import (
            Listener,  # imported here: the listen streams start after the answer to initialize
        )

        declared = self._init.declared
        if declared is None or not declared.listens:
            return
        assert self._init.session is not None
        self._listener = Listener(
            self.output,
            self._init.session.client,
            declared,
            capabilities=self._init.upstream_capabilities,
            log_level=lambda: self._log_level,
            shutdown_grace=self.options.shutdown_grace,
            lists=self.lists,
        )
        self._listener.start()

    @property
    def upstream_lost(self) -> bool:
        """True once the connection closes because the upstream server stopped."""
        return self._init.state is State.LOST

    @property
    def log_level(self) -> str | None:
        return self._log_level

    @property
    def upstream_capabilities(self) -> dict[str, Any]:
        return self._init.upstream_capabilities

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities of the client, in the terms of its revision."""
        return self._init.client_capabilities

    @property
    def client_revision(self) -> revisions.Revision:
        return self._init.revision

    @property
    def host_profile(self) -> revisions.Profile:
        return self._init.profile

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
            upstream = self._init.upstream
            if upstream is not None and upstream.gone and self._init.state in READY_STATES:
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
        from .dumptext import FrontendState  # loaded at the first dump (see dumptext)

        upstream = self._init.upstream
        return FrontendState(
            state=self._init.state.value,
            slots=self.slots.describe(wait),
            output=self.output.describe(wait),
            pending=self.pending.describe(wait),
            upstream=upstream.describe() if upstream is not None else None,
        )

    def _upstream_lost(self, client: UpstreamSession) -> None:
        if not self._enter_closing(Ended.UPSTREAM_LOST):
            return
        if client.form is PeerForm.URL:
            log.error(
                "the upstream server ended the session of the bridge (its event stream closed): the "
                "bridge stops; restart the server in VS Code once the upstream server runs again"
            )
        else:
            log.error("the upstream server exited with %s", client.exit_status or "an unknown status")
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
        if not self._stalled and self._init.holds:
            # Requests wait for an initialize under way (a file of requests piped in): it goes on
            # within its own time limit, and the grace counts from its answer.
            self._init.wait_ended(self.options.timeouts.discover + grace)
        deadline = time.monotonic() + grace
        if not self._stalled:
            self.slots.drain(grace)
        self.slots.cancel_all("the input of the bridge ended", errortable.error_object("input_ended"))
        upstream = self._init.take_upstream()
        self._end_slots(max(_LAST_DRAIN, deadline - time.monotonic()))
        if upstream is not None:
            upstream.close(grace)

    def close(self) -> None:
        """Stop as at the end of the input (SIGTERM)."""
        self.shutdown()
        self._finish(Ended.EOF)

    def kill_upstream(self) -> None:
        """Kill the upstream process group at once (the watchdog's last step)."""
        upstream = self._init.upstream
        if upstream is not None:
            upstream.kill()

    def _enter_closing(self, reason: Ended) -> bool:
        """Move to CLOSING for ``reason``; False when the connection was closing already."""
        return self._init.enter(State.LOST if reason is Ended.UPSTREAM_LOST else State.CLOSING)

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


class _Counter:
    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._n = 0

    def next(self) -> str:
        with self._lock:
            self._n += 1
            return f"{self._prefix}{self._n}"
