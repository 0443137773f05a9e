"""One forwarded request of the client, from the reader thread to the upstream server and back.

Theory of operation
-------------------

For each request that the front end forwards to a 2026-07-28 server it makes a
:class:`RequestRun` (:meth:`~.session.ModernSession.request_run`) and starts it
on the reader thread (``Frontend._forward`` in module ``frontend``). A
``tools/call`` goes this way:

1. **Reader thread.** With ``Options.forward_on_reader`` (the *fast path*),
   :meth:`RequestRun.send_first_round` sends the first round with
   :meth:`Client.begin <mcpbridge.mcp.client.Client.begin>` and does not wait.
   When it cannot (the option is off, the upstream has no room at once, or the
   client made a task-augmented call), the front end gives the run to a slot
   thread: step 3.
2. **The thread that learns the outcome** of that :class:`~mcpbridge.mcp.client.call.Call`
   (the upstream reader for an answer, the timer at the deadline, the thread that
   canceled) runs :meth:`RequestRun.first_round_done`: a complete result or an
   error is answered there. What may block (an input round, a task, telling the
   upstream that the time limit passed, or of a cancellation when it has no room)
   goes on on a slot thread.
3. **Slot thread.** :meth:`RequestRun.on_slot` runs the rounds, each one a
   :meth:`Client.request <mcpbridge.mcp.client.Client.request>`: an
   ``input_required`` result asks the client (:class:`~.rounds.Rounds`), and the
   next round carries the answers. A task that the server makes instead of a
   result goes to :class:`~.sessiontasks.SessionTasks`: carried to its result for
   a client that waits for it, or adopted as a task of the client's own.

Every round goes upstream with the arguments of :meth:`RequestRun.prepare`, on
either path, and every result that the client gets goes through
:meth:`RequestRun.shape_for_client`: the list rules, the result rules of module
``translate``, the ``taskSupport`` of the tools and the revision of the client.
A list request with a fresh page in the list cache is answered on the reader
from that page (:meth:`RequestRun.answer_from_cache`).

The states of a run
-------------------

A run is in one :class:`RunState` at a time. The thread that learns an outcome
moves the run on; one thread hands it to the next (the client's lock between
``begin`` and the ``on_done`` of the call, the slot executor between the reader
and a slot thread), so two threads never move one run. The upstream request of
one round is a :class:`~mcpbridge.mcp.client.call.Call` of ``begin`` (with its own
states) or a ``request`` that the slot thread waits for. These orders are legal
(:data:`RUN_TRANSITIONS`)::

    NEW          ──► FIRST_ROUND | ROUNDS | RESPONDED
    FIRST_ROUND  ──► ROUNDS | RESPONDED | FAILED | CANCELLED
    ROUNDS       ──► TASK | RESPONDED | FAILED | CANCELLED
    TASK         ──► RESPONDED | FAILED | CANCELLED

* ``NEW``: made on the reader; nothing went upstream. A page of the list cache
  answers it at once.
* ``FIRST_ROUND``: the reader sent the first round (the fast path); its outcome
  comes to :meth:`RequestRun.first_round_done`. When nothing could be sent, a slot
  thread sends it.
* ``ROUNDS``: on a slot thread, the rounds until a result that asks for no input.
* ``TASK``: the server made a task; :class:`~.sessiontasks.SessionTasks` drives it
  on the slot.
* ``RESPONDED``: the client has the result (for a task of its own: the record
  that ``tasks/result`` reads has it).
* ``FAILED``: the client has an error (or the ``isError`` result of a refused
  ``requestState``).
* ``CANCELLED``: the run ended without an answer: the client canceled, or the
  connection ends and the front end answers what is left.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ...mcp import jsonrpc
from ...mcp.cancel import WouldBlock
from ...mcp.client import Client
from ...mcp.client.call import Call, RequestOptions
from ...mcp.droplog import DropLog
from ...mcp.errorbase import BridgeError
from ...mcp.errors import Cancelled, Closed, McpError, ResponseTooLarge, RpcError
from ...mcp.jsonrpc import Request, RequestId
from ...mcp.protocol import INPUT_METHODS, RESULT_INPUT_REQUIRED, RESULT_TASK
from ...mcp.text import printable
from ...oauth.errors import SignInError
from ..front.listrules import ListRules
from ..front.output import Slot, Waiting
from ..front.slots import Work
from ..rules import errortable, revisions, translate
from ..rules.roundfailures import ClientFailed, InputError
from .era import translated_error
from .rounds import ProgressForwarder, Rounds, RoundsHost, Silent

__all__ = [
    "RUN_TRANSITIONS",
    "IllegalTransition",
    "RequestRun",
    "RunHost",
    "RunState",
    "RunTasks",
    "UpstreamCall",
    "limit_option",
    "log_repairs",
    "log_too_large",
]

log = logging.getLogger("mcpbridge.bridge")
#: The lines of the runs that a peer can make repeat: drops, repairs, failed input rounds.
_drops = DropLog(log)


def log_repairs(notes: list[str]) -> None:
    """Log the repairs of a result for VS Code (a tool schema it would refuse), as its list repeats."""
    for note in notes:
        _drops(logging.INFO, "repairs of tool schemas", "%s", note)


def limit_option(exc: ResponseTooLarge) -> str:
    """The option that raises the limit that ``exc`` went over."""
    return "--max-response-bytes" if exc.over_http else "--max-line-bytes"


def log_too_large(exc: ResponseTooLarge) -> None:
    """Log an answer over a limit of the bridge: which limit, and the option that raises it."""
    _drops(
        logging.WARNING,
        "answers over the limit of the bridge",
        "%s; to take such answers, raise %s",
        exc.detail or exc.cause,
        limit_option(exc),
    )


#: The words of the exchange log line for the result types of the upstream client.
_OUTCOMES = {"complete": "response", "input_required": "input required", "task": "a task"}


class RunState(enum.Enum):
    """Where a :class:`RequestRun` is; see the module docstring and :data:`RUN_TRANSITIONS`."""

    NEW = "new"
    FIRST_ROUND = "first round"
    ROUNDS = "rounds"
    TASK = "task"
    RESPONDED = "responded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: The states that end a run.
_ENDS: Final = frozenset({RunState.RESPONDED, RunState.FAILED, RunState.CANCELLED})

#: The states that may follow each state of a :class:`RequestRun`.
RUN_TRANSITIONS: Final[dict[RunState, frozenset[RunState]]] = {
    RunState.NEW: frozenset({RunState.FIRST_ROUND, RunState.ROUNDS, RunState.RESPONDED}),
    RunState.FIRST_ROUND: frozenset({RunState.ROUNDS}) | _ENDS,
    RunState.ROUNDS: frozenset({RunState.TASK}) | _ENDS,
    RunState.TASK: _ENDS,
    RunState.RESPONDED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}


class IllegalTransition(BridgeError):
    """A run was moved to a state that :data:`RUN_TRANSITIONS` does not allow: a bug of the bridge."""

    def __init__(self, before: RunState, after: RunState) -> None:
        super().__init__(f"a request run cannot go from {before.value} to {after.value}")
        self.before = before
        self.after = after


class RunHost(RoundsHost, Protocol):
    """What a run needs of the front end: beside what the input rounds need, the list
    rules, the log level, the upstream capabilities and the slots."""

    @property
    def lists(self) -> ListRules:
        """The tool filter and the list cache of the connection."""
        ...

    @property
    def log_level(self) -> str | None:
        """The level of the client's last ``logging/setLevel``."""
        ...

    @property
    def host_profile(self) -> revisions.Profile:
        """The profile of the host: the ``_meta`` keys that go upstream, how strict a result is."""
        ...

    @property
    def upstream_capabilities(self) -> dict[str, Any]: ...

    def submit(self, slot: Slot, request: Request, work: Work) -> None:
        """Run ``work`` on a slot thread; the slot is released when it ends."""
        ...

    def release(self, slot: Slot) -> None:
        """The slot ended without a slot thread."""
        ...

    def fail(self, slot: Slot, exc: Exception) -> None:
        """A bug of the bridge failed the request of ``slot``: an error line, and the error for the client."""
        ...


class RunTasks(Protocol):
    """What a run needs of the tasks of its session (:class:`~.sessiontasks.SessionTasks`)."""

    #: The client capabilities of an upstream ``tools/call``: the Tasks extension declared.
    capabilities: dict[str, Any]

    def augmented(self, request: Request) -> bool:
        """True for a task-augmented ``tools/call`` of a client of native tasks."""
        ...

    def shape(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result for the client: the tools of ``tools/list`` get their ``taskSupport``."""
        ...

    def carry(
        self, slot: Slot, created: dict[str, Any], progress: ProgressForwarder | None
    ) -> dict[str, Any] | None:
        """Drive a task to its end for a client that waits for its result; ``None``: it has an error."""
        ...

    def adopt(self, run: RequestRun, created: dict[str, Any]) -> RunState:
        """Answer the client's own task at once, drive it to its end; how the run ends."""
        ...

    def complete(self, slot: Slot, result: dict[str, Any]) -> None:
        """A task-augmented call that the server answered at once: a task that has completed."""
        ...


@dataclass(frozen=True)
class UpstreamCall:
    """The arguments of the upstream request of one round, for ``begin`` and ``request`` alike."""

    method: str
    params: dict[str, Any]
    timeout: float
    options: RequestOptions


class RequestRun:
    """One forwarded request of the client; see the module docstring.

    :param tasks: the tasks of the session (``--tasks auto``), else ``None``.
    """

    def __init__(
        self,
        client: Client,
        host: RunHost,
        tasks: RunTasks | None,
        slot: Slot,
        request: Request,
    ) -> None:
        self._client = client
        self._host = host
        self._tasks = tasks
        self._options = host.options
        self.slot = slot
        self.request = request
        self.state = RunState.NEW
        self._params, client_token, self._meta = translate.forward_params(request.params, host.host_profile)
        #: The client's progress token gets the progress of every round, rate limited.
        self.progress: ProgressForwarder | None = None
        if client_token is not None:
            rate = self._options.max_progress_rate
            self.progress = ProgressForwarder(host.output, client_token, rate, host.client_revision)

    def _advance(self, state: RunState) -> None:
        """Move to ``state``; raises :class:`IllegalTransition` when the table does not allow it."""
        if state not in RUN_TRANSITIONS[self.state]:
            raise IllegalTransition(self.state, state)
        self.state = state

    # ------------------------------------------------------------ the upstream call

    def prepare(self, round_number: int, params: dict[str, Any]) -> UpstreamCall:
        """The upstream request of round ``round_number`` (from 1) with ``params``.

        A ``tools/call`` declares the Tasks extension when the session carries tasks;
        the time limit is the call's, or for the first round of a read the read's.
        """
        method = self.request.method
        tasks = self._tasks if method == "tools/call" else None
        options = RequestOptions(
            cancel=self.slot.cancel,
            capabilities=tasks.capabilities if tasks is not None else self._host.upstream_capabilities,
            log_level=self._host.log_level,
            meta=self._meta,
            allow_input_required=method in INPUT_METHODS,
            allow_task=tasks is not None,
            on_progress=self.progress,
            trace=self._tracer(round_number),
        )
        return UpstreamCall(method, params, self._timeout(round_number), options)

    def _timeout(self, round_number: int) -> float:
        timeouts = self._options.timeouts
        method = self.request.method
        if method == "tools/call":
            return timeouts.call
        if method in ("prompts/get", "resources/read"):
            return timeouts.read if round_number == 1 else timeouts.call
        return timeouts.list

    def _tracer(self, round_number: int) -> Callable[[RequestId, str, float], None] | None:
        """The debug line of one upstream exchange, or ``None`` when debug lines are off."""
        if not log.isEnabledFor(logging.DEBUG):
            return None
        slot, method = self.slot, self.request.method

        def trace(upstream_id: RequestId, outcome: str, seconds: float) -> None:
            log.debug(
                "upstream request %s (%s, round %d of client request %s): %s after %d ms",
                upstream_id,
                method,
                round_number,
                printable(slot.id),
                _OUTCOMES.get(outcome, outcome),
                int(seconds * 1000),
            )

        return trace

    # ------------------------------------------------------------ the reader thread

    def answer_from_cache(self, result: dict[str, Any]) -> None:
        """Answer a list request with a page of the list cache, on the reader (it never waits)."""
        self._answer_result(result, from_cache=True)
        self._host.release(self.slot)

    def send_first_round(self) -> bool:
        """Send the first round from the reader thread, without waiting (the fast path).

        The thread that learns the outcome runs :meth:`first_round_done`. Returns
        False, with nothing sent, when a slot thread must send it (:meth:`on_slot`):
        the upstream has no room for it at once, or the client made a task-augmented call.
        """
        if self._tasks is not None and self._tasks.augmented(self.request):
            return False  # the task of the client is made on a slot thread
        self._advance(RunState.FIRST_ROUND)
        self._host.lists.asked.sent(self.request.method)
        first = self.prepare(1, self._params)
        try:
            call = self._client.begin(
                first.method,
                first.params,
                on_done=self.first_round_done,
                timeout=first.timeout,
                raw=self.request.raw,
                **first.options,
            )
        except McpError as exc:
            self._answer_error(exc)
            self._host.release(self.slot)
            return True
        return call is not None

    # ------------------------------------------------ the thread that learns the outcome

    def first_round_done(self, call: Call) -> None:
        """The outcome of the first round of :meth:`send_first_round`, on the thread that learned it.

        A complete result or an error is answered here at once. What may block (the
        input rounds, a task, telling the upstream of a cancellation) goes on on a slot thread.
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
                    self._end_without_slot(RunState.CANCELLED)
                    return
            if call.needs_thread:
                first: Callable[[], dict[str, Any]] = call.result
            else:
                try:
                    result = call.result()
                except Cancelled:
                    self._end_without_slot(RunState.CANCELLED)
                    return
                except McpError as exc:
                    self._answer_error(exc)
                    self._host.release(self.slot)
                    return
                if result.get("resultType") not in (RESULT_INPUT_REQUIRED, RESULT_TASK):
                    self._answer_result(result, call.raw)
                    self._host.release(self.slot)
                    return

                def first() -> dict[str, Any]:
                    return result

            self._host.submit(self.slot, self.request, lambda _slot, _request: self.on_slot(first))
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the request silently
            self._host.fail(self.slot, exc)
            self._host.release(self.slot)

    def _end_without_slot(self, state: RunState) -> None:
        """End the run in ``state`` with nothing written, and release its slot (no slot thread has it)."""
        self._advance(state)
        self._host.release(self.slot)

    # ------------------------------------------------------------ a slot thread

    def on_slot(self, first: Callable[[], dict[str, Any]] | None = None) -> None:
        """The work of the run's slot thread: the rounds until the client has its answer.

        ``first`` gives the outcome of a first round that :meth:`send_first_round` sent.
        """
        self._advance(RunState.ROUNDS)
        if first is None:  # else send_first_round has told the list rules
            self._host.lists.asked.sent(self.request.method)
        rounds = Rounds(self._host, self.slot, self._params)
        try:
            result, raw = self._rounds(rounds, first)
            self._complete(rounds, result, raw)
        except Cancelled:
            rounds.failed()
            self._advance(RunState.CANCELLED)
        except McpError as exc:
            rounds.failed()
            if isinstance(exc, RpcError) and rounds.sent_state and exc.error.code == jsonrpc.INVALID_PARAMS:
                self._refused_state(exc)
                return
            self._answer_error(exc)
        except (ClientFailed, InputError) as failure:
            rounds.failed()
            self._input_failed(failure)
        except Silent:  # the upstream is gone: the front end answers every request
            rounds.failed()
            self._advance(RunState.CANCELLED)

    def _rounds(
        self, rounds: Rounds, first: Callable[[], dict[str, Any]] | None
    ) -> tuple[dict[str, Any], jsonrpc.RawStrings | None]:
        """The rounds until a result that asks for no input: that result, and the long strings
        of its line (it is written on with them)."""
        long_strings: list[jsonrpc.RawStrings] = []
        while True:
            self.slot.waiting_for = Waiting.UPSTREAM
            long_strings.clear()
            if first is not None:
                result, first = first(), None
            else:
                call = self.prepare(rounds.count + 1, rounds.params)
                result = self._client.request(
                    call.method,
                    call.params,
                    timeout=call.timeout,
                    long_strings=long_strings,
                    **call.options,
                )
            rounds.after_result(result)
            if result.get("resultType") != RESULT_INPUT_REQUIRED:
                return result, long_strings[-1] if long_strings else None
            rounds.next_round(result)

    def _complete(self, rounds: Rounds, result: dict[str, Any], raw: jsonrpc.RawStrings | None) -> None:
        """Answer the last result of the rounds: a task is driven first (module ``sessiontasks``)."""
        tasks = self._tasks
        augmented = tasks is not None and tasks.augmented(self.request)
        if result.get("resultType") == RESULT_TASK and tasks is not None:
            self._advance(RunState.TASK)
            if augmented:
                self._advance(tasks.adopt(self, result))
                return
            carried = tasks.carry(self.slot, result, self.progress)
            if carried is None:  # the task failed, and the client has its error
                rounds.failed()
                self._advance(RunState.FAILED)
                return
            result, raw = carried, None
        if augmented:
            assert tasks is not None
            # A task-augmented call that the server answered at once: a task that has completed.
            self._advance(RunState.RESPONDED)
            tasks.complete(self.slot, self.shape_for_client(result, task_record=True))
            return
        self._answer_result(result, raw)

    # ------------------------------------------------------------ answers

    def shape_for_client(
        self, result: dict[str, Any], *, from_cache: bool = False, task_record: bool = False
    ) -> dict[str, Any]:
        """A complete upstream result of the run's request, as the client gets it.

        A list result first goes through the list rules: the cache keeps a result of
        the server (not one it gave itself: ``from_cache``), and the tool filter hides
        tools. Then the result rules (:func:`~.rules.translate.shape_result`), the
        ``taskSupport`` of the tools (:meth:`~.sessiontasks.SessionTasks.shape`) and
        the revision of the client (:func:`~.rules.revisions.shape_result`).

        ``task_record``: the result of a task of the client's own, which its record keeps
        for ``tasks/result``. It skips the revision step: only a client of 2025-11-25,
        whose shape the result rules give, has tasks of its own, and the profile's rule
        on a ``structuredContent`` that is not an object does not apply to such a result.
        """
        host, method = self._host, self.request.method
        result = host.lists.page(method, self.request.params, result, cache=not from_cache)
        shaped, notes = translate.shape_result(method, result, icon_rule=self._options.icon_rule)
        log_repairs(notes)
        if self._tasks is not None:
            shaped = self._tasks.shape(method, shaped)
        if task_record:
            return shaped
        shaped, drops = revisions.shape_result(host.client_revision, host.host_profile, method, shaped)
        for drop in drops:
            _drops(logging.INFO, "parts of results left out for the revision of the client", "%s", drop)
        return shaped

    def _answer_result(
        self, result: dict[str, Any], raw: jsonrpc.RawStrings | None = None, *, from_cache: bool = False
    ) -> None:
        """Shape a complete result for the client and write it: the run has responded."""
        self._advance(RunState.RESPONDED)
        self._host.output.respond(self.slot, self.shape_for_client(result, from_cache=from_cache), raw=raw)

    def _answer_error(self, exc: McpError) -> None:
        """The upstream request failed: the error for the client."""
        self._advance(RunState.FAILED)
        self._host.output.respond_error(self.slot, self._error_for(exc))

    def _input_failed(self, failure: Exception) -> None:
        """The input requests of a round failed: one drop line, and the error for the client."""
        self._advance(RunState.FAILED)
        slot, method = self.slot, self.request.method
        if isinstance(failure, ClientFailed):
            _drops(
                logging.INFO,
                "requests whose input requests the client answered with an error",
                "request %s (%s): the client answered an input request with an error: %s",
                printable(slot.id),
                method,
                printable(failure.error.get("message", "")),
            )
            self._host.output.respond_error(slot, failure.error)
        elif isinstance(failure, InputError):
            _drops(
                logging.WARNING,
                "requests whose input requests failed",
                "request %s (%s): the input requests of the upstream server failed: %s",
                printable(slot.id),
                method,
                failure.detail or failure.cause,
            )
            self._host.output.respond_error(slot, errortable.error_object(failure.cause, failure.detail))

    def _refused_state(self, exc: RpcError) -> None:
        """The upstream refused the requestState of a round (behaviour: refused state)."""
        self._advance(RunState.FAILED)
        method = self.request.method
        text = translate.refused_state_text(method, exc.error.message)
        if method == "tools/call":
            refused = {"content": [{"type": "text", "text": text}], "isError": True}
            self._host.output.respond(self.slot, refused)
            return
        error: dict[str, Any] = {"code": exc.error.code, "message": text}
        if exc.error.data is not jsonrpc.NO_DATA:
            error["data"] = exc.error.data
        self._host.output.respond_error(self.slot, error)

    def _error_for(self, exc: McpError) -> dict[str, Any]:
        method = self.request.method
        if isinstance(exc, RpcError):
            # A refused cursor drops its list.
            self._host.lists.failed(method, self.request.params, exc.error.code)
        if isinstance(exc, SignInError):
            return errortable.error_from_sign_in(exc)
        if isinstance(exc, Closed) and self._client.gone:
            return errortable.error_object("upstream_exited")
        if isinstance(exc, ResponseTooLarge):
            log_too_large(exc)
        error = errortable.error_from_mcp(exc)
        if isinstance(exc, RpcError):
            return translated_error(method, error, protocol=self._options.protocol)
        return error
