"""The modern upstream session: forward a request of the client to a 2026-07-28 server.

Theory of operation
-------------------

The front end gives each forwarded request of the client a slot and hands it
to the :class:`UpstreamSession` of the connection: a :class:`ModernSession`
over the :class:`~mcpbridge.mcp.client.Client` of a 2026-07-28 upstream, or the
2025-era :class:`~.passthrough.LegacyPassthrough`.

A :class:`ModernSession` sends the request upstream, round by round: an
``input_required`` result sends the input requests of the upstream server to
the client as the bridge's own ``b-`` requests (:class:`~.rounds.Rounds`), and the next
round goes upstream with their answers. The complete result gets the result
rules (:func:`~.translate.shape_result`) and goes to the client once. Progress
of every round reaches the client's progress token, rate limited. A
``tools/call`` declares the Tasks extension (``--tasks auto``): a task that the
server makes instead of a result is driven to its end on the same slot
(:class:`~.sessiontasks.SessionTasks`), and the client gets its result.

The **fast path** (``Options.forward_on_reader``): :meth:`ModernSession.begin_forward`
sends the first round from the reader thread without waiting, and the thread that
learns the outcome answers. Only what may block (the input rounds, the time limit,
a send that found no room) goes on on a slot thread.

The session speaks to the client only through its :class:`SessionHost`: the
output, the ``b-`` pending table and the slots of the front end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..mcp import jsonrpc
from ..mcp.call import Call
from ..mcp.cancel import WouldBlock
from ..mcp.client import Client
from ..mcp.droplog import DropLog
from ..mcp.errors import Cancelled, Closed, McpError, RequestTimeout, ResponseTooLarge, RpcError
from ..mcp.httpwire import ConnectError, HttpStatusError
from ..mcp.jsonrpc import Notification, Request, RequestId
from ..mcp.peer import Peer
from ..mcp.protocol import INPUT_METHODS, MODERN, RESULT_INPUT_REQUIRED, RESULT_TASK
from ..mcp.text import format_duration, printable
from ..oauth.errors import SignInError
from . import errortable, revisions, translate
from .dumptext import UpstreamState, Waiting
from .era import translated_error
from .listrules import ListRules
from .options import TaskMode
from .output import Host, Slot
from .rounds import ProgressForwarder, Rounds, RoundsHost, Silent
from .slots import Work

if TYPE_CHECKING:
    from .sessiontasks import SessionTasks

__all__ = [
    "ModernSession",
    "SessionHost",
    "UpstreamSession",
    "discover_error",
    "forward_upstream_log",
    "log_repairs",
    "start_words",
]

log = logging.getLogger("mcpbridge.bridge")
#: The lines of the sessions that a peer can make repeat: drops, repairs, failed input rounds.
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


class UpstreamSession(Protocol):
    """The seam between the front end and the upstream server of one connection.

    :class:`ModernSession` and :class:`~.passthrough.LegacyPassthrough` are the two.
    """

    def forward(self, slot: Slot, request: Request) -> None:
        """The work of a slot: carry one request of the client upstream and answer the slot."""
        ...

    @property
    def gone(self) -> bool:
        """True once the upstream process is gone for good."""
        ...

    @property
    def exit_status(self) -> str | None: ...

    def close(self, grace: float = 2.0) -> None:
        """Close the upstream connection (idempotent)."""
        ...

    def rest(self) -> None:
        """No request has been in flight for a while: the connection lets go of what it keeps
        for a busy one (idle keep-alive connections)."""
        ...

    def kill(self) -> None:
        """Kill the upstream process group at once (the watchdog's last step)."""
        ...

    def describe(self) -> UpstreamState:
        """The form, the era and the state of the upstream, for a thread dump."""
        ...


def upstream_state(peer: Peer, era: str) -> UpstreamState:
    """The state of the upstream server behind ``peer``, which speaks ``era``, for a thread dump."""
    return UpstreamState(peer.form, era, peer.gone, peer.exit_status, peer.closed)


class SessionHost(RoundsHost, Protocol):
    """What a session needs of the front end: beside what the input rounds need, the list
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


def forward_upstream_log(output: Host, level: str | None, message: Notification) -> None:
    """A notification of the upstream that names no request: its log messages reach the client.

    A log message below ``level`` (the client's last ``logging/setLevel``; ``None``:
    none yet, nothing passes) and every other notification are dropped.
    """
    if message.method == "notifications/message":
        params = translate.log_params(message.params)
        if params is None:
            _drops(
                logging.WARNING,
                "dropped log messages that are not valid",
                "dropped a notifications/message of the upstream server that is not valid "
                "(a level, the data and a string logger are needed)",
            )
            return
        if level is not None and translate.log_passes(params["level"], level):
            output.write_notification("notifications/message", params)
    else:
        _drops(
            logging.DEBUG,
            "dropped notifications that no request names",
            "dropped the notification %s of the upstream server: it names no request",
            printable(message.method),
        )


class ModernSession:
    """Forward the requests of the client to a 2026-07-28 upstream; see the module docstring."""

    def __init__(self, client: Client, host: SessionHost, *, discover_result: Any = None) -> None:
        """``discover_result``: the upstream's ``server/discover`` result (what it offers)."""
        self.client = client
        self._host = host
        self.options = host.options
        #: The tasks of the Tasks extension that the session carries (``--tasks auto``).
        self._tasks: SessionTasks | None = None
        if self.options.tasks is TaskMode.AUTO:
            from .sessiontasks import SessionTasks  # imported here: the tasks load after the discover

            self._tasks = SessionTasks(client, host, discover_result)

    @property
    def gone(self) -> bool:
        return self.client.gone

    @property
    def exit_status(self) -> str | None:
        return self.client.exit_status

    def close(self, grace: float = 2.0) -> None:
        self.client.close(grace)

    def rest(self) -> None:
        self.client.rest()

    def kill(self) -> None:
        self.client.kill()

    def describe(self) -> UpstreamState:
        return upstream_state(self.client, f"MCP {MODERN}")

    @property
    def native_tasks(self) -> bool:
        """True when the client makes tasks of its own (``capabilities.tasks``) and the server
        offers the Tasks extension: the bridge answers ``tasks/*`` of the client."""
        return self._tasks is not None and self._tasks.native

    def advertise(self, init: dict[str, Any]) -> dict[str, Any]:
        """The initialize result for the client, with ``capabilities.tasks`` for native tasks."""
        return self._tasks.advertise(init) if self._tasks is not None else init

    def answer_task_request(self, slot: Slot, request: Request) -> None:
        """The work of a slot for a ``tasks/*`` request of a client of native tasks."""
        assert self._tasks is not None
        self._tasks.answer(slot, request)

    def _capabilities_for(self, method: str) -> dict[str, Any]:
        """The client capabilities of an upstream request: a ``tools/call`` declares the Tasks extension."""
        if self._tasks is not None and method == "tools/call":
            return self._tasks.capabilities
        return self._host.upstream_capabilities

    def _allows_task(self, method: str) -> bool:
        return self._tasks is not None and method == "tools/call"

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
                printable(slot.id),
                _OUTCOMES.get(outcome, outcome),
                int(seconds * 1000),
            )

        return trace

    def begin_forward(self, slot: Slot, request: Request) -> bool:
        """Send the first round of a forwarded request from the reader thread, without waiting.

        The thread that learns the outcome (the upstream reader for an answer)
        runs :meth:`_forward_done`. Returns False, with nothing sent, when the
        upstream has no room for the request at once: then a slot thread sends it.
        """
        if self._tasks is not None and self._tasks.augmented(request):
            return False  # the task of the client is made on a slot thread
        self._host.lists.asked.sent(request.method)
        client = self.client
        method = request.method
        params, client_token, meta = translate.forward_params(request.params, self._host.host_profile)
        progress = (
            ProgressForwarder(
                self._host.output,
                client_token,
                self.options.max_progress_rate,
                self._host.client_revision,
            )
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
                capabilities=self._capabilities_for(method),
                log_level=self._host.log_level,
                meta=meta,
                allow_input_required=method in INPUT_METHODS,
                allow_task=self._allows_task(method),
                on_progress=progress,
                trace=self._tracer(slot, method, 1),
                raw=request.raw,
            )
        except McpError as exc:
            self._host.output.respond_error(slot, self._error_for(exc, method, request.params))
            self._host.release(slot)
            return True
        return call is not None

    def answer_from_cache(self, slot: Slot, request: Request, result: dict[str, Any]) -> bool:
        """Answer a list request with a page of the list cache, on the reader (it never waits)."""
        self._respond_result(slot, request.method, result, params=request.params, from_cache=True)
        self._host.release(slot)
        return True

    def _forward_done(
        self, slot: Slot, request: Request, call: Call, progress: ProgressForwarder | None
    ) -> None:
        """The outcome of the first round of :meth:`begin_forward`, on the thread that learned it.

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
                    self._host.release(slot)
                    return
            if call.needs_thread:
                first: Callable[[], dict[str, Any]] = call.result
            else:
                try:
                    result = call.result()
                except Cancelled:
                    self._host.release(slot)
                    return
                except McpError as exc:
                    self._host.output.respond_error(
                        slot, self._error_for(exc, request.method, request.params)
                    )
                    self._host.release(slot)
                    return
                if result.get("resultType") not in (RESULT_INPUT_REQUIRED, RESULT_TASK):
                    self._respond_result(slot, request.method, result, call.raw, params=request.params)
                    self._host.release(slot)
                    return

                def first() -> dict[str, Any]:
                    return result

            self._host.submit(slot, request, lambda s, r: self.forward(s, r, first=first, progress=progress))
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the request silently
            self._host.fail(slot, exc)
            self._host.release(slot)

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

        A list result first goes through the list rules: the cache keeps a result
        of the server (not one it gave itself), and the tool filter hides tools.
        """
        result = self._host.lists.page(method, params, result, cache=not from_cache)
        shaped, notes = translate.shape_result(method, result, icon_rule=self.options.icon_rule)
        log_repairs(notes)
        if self._tasks is not None:
            shaped = self._tasks.shape(method, shaped)
        host = self._host
        shaped, drops = revisions.shape_result(host.client_revision, host.host_profile, method, shaped)
        for drop in drops:
            _drops(logging.INFO, "parts of results left out for the revision of the client", "%s", drop)
        self._host.output.respond(slot, shaped, raw=raw)

    def forward(
        self,
        slot: Slot,
        request: Request,
        *,
        first: Callable[[], dict[str, Any]] | None = None,
        progress: ProgressForwarder | None = None,
    ) -> None:
        """Forward a request on a slot thread: the rounds until a complete result.

        ``first`` gives the outcome of a first round that :meth:`begin_forward` sent.
        """
        from .input import ClientFailed, InputError  # imported here: the rules load at the first request

        self._host.lists.asked.sent(request.method)
        client = self.client
        params, client_token, meta = translate.forward_params(request.params, self._host.host_profile)
        if progress is None and client_token is not None:
            progress = ProgressForwarder(
                self._host.output, client_token, self.options.max_progress_rate, self._host.client_revision
            )
        rounds = Rounds(self._host, slot, request.method, params)
        # The long strings of the last answer's line: the result is written on with them.
        long_strings: list[jsonrpc.RawStrings] = []
        try:
            while True:
                round_number = rounds.session.rounds + 1
                slot.waiting_for = Waiting.UPSTREAM
                long_strings.clear()
                if first is not None:
                    result, first = first(), None
                else:
                    result = client.request(
                        request.method,
                        rounds.params,
                        timeout=self._timeout_for(request.method, round_number),
                        cancel=slot.cancel,
                        capabilities=self._capabilities_for(request.method),
                        log_level=self._host.log_level,
                        meta=meta,
                        allow_input_required=request.method in INPUT_METHODS,
                        allow_task=self._allows_task(request.method),
                        on_progress=progress,
                        trace=self._tracer(slot, request.method, round_number),
                        long_strings=long_strings,
                    )
                rounds.after_result(result)
                if result.get("resultType") == RESULT_INPUT_REQUIRED:
                    rounds.next_round(result)
                    continue
                session_tasks = self._tasks
                augmented = session_tasks is not None and session_tasks.augmented(request)
                if result.get("resultType") == RESULT_TASK and session_tasks is not None:
                    if augmented:
                        session_tasks.adopt(slot, result, progress)
                        return
                    carried = session_tasks.carry(slot, result, progress)
                    if carried is None:  # the task failed, and the client has its error
                        rounds.failed()
                        return
                    result = carried
                    long_strings.clear()
                if augmented:
                    assert session_tasks is not None
                    shaped, _notes = translate.shape_result(
                        request.method, result, icon_rule=self.options.icon_rule
                    )
                    session_tasks.complete(slot, shaped)
                    return
                raw = long_strings[-1] if long_strings else None
                self._respond_result(slot, request.method, result, raw, params=request.params)
                return
        except Cancelled:
            rounds.failed()
        except McpError as exc:
            rounds.failed()
            if isinstance(exc, RpcError) and rounds.sent_state and exc.error.code == jsonrpc.INVALID_PARAMS:
                self._refused_state(slot, request.method, exc)
                return
            self._host.output.respond_error(slot, self._error_for(exc, request.method, request.params))
        except (ClientFailed, InputError) as failure:
            rounds.failed()
            self._input_failed(slot, request.method, failure)
        except Silent:
            rounds.failed()

    def _input_failed(self, slot: Slot, method: str, failure: Exception) -> None:
        """The input requests of a round failed: one drop line, and the error for the client."""
        from .input import ClientFailed, InputError

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

    def _refused_state(self, slot: Slot, method: str, exc: RpcError) -> None:
        """The upstream refused the requestState of a round (behaviour: refused state)."""
        text = translate.refused_state_text(method, exc.error.message)
        if method == "tools/call":
            self._host.output.respond(slot, {"content": [{"type": "text", "text": text}], "isError": True})
            return
        error: dict[str, Any] = {"code": exc.error.code, "message": text}
        if exc.error.data is not jsonrpc.NO_DATA:
            error["data"] = exc.error.data
        self._host.output.respond_error(slot, error)

    def _error_for(self, exc: McpError, method: str, params: Any = None) -> dict[str, Any]:
        if isinstance(exc, RpcError):
            self._host.lists.failed(method, params, exc.error.code)  # a refused cursor drops its list
        if isinstance(exc, SignInError):
            return errortable.error_from_sign_in(exc)
        if isinstance(exc, Closed) and self.client.gone:
            return errortable.error_object("upstream_exited")
        if isinstance(exc, ResponseTooLarge):
            log_too_large(exc)
        error = errortable.error_from_mcp(exc)
        if isinstance(exc, RpcError):
            return translated_error(method, error, protocol=self._host.options.protocol)
        return error


#: The HTTP statuses of a start that show a URL where no MCP server answers: a plain web
#: server that has no such path (404), takes no POST (405, 501).
NOT_MCP_STATUSES = frozenset({404, 405, 501})
#: Those of them that no server of the 2025 era gives ``server/discover``: the others show
#: such a server too, which ``--protocol 2026-07-28`` does not try.
_NOT_MCP_AT_DISCOVER = frozenset({501})
#: What the log line of such a start says to do.
_NOT_MCP_ADVICE = "the URL does not serve MCP; check its path (often /mcp)"


def start_words(
    step: str, exc: McpError, *, statuses: frozenset[int] = NOT_MCP_STATUSES
) -> tuple[dict[str, Any], str] | None:
    """The words of a failed start at a URL that the user can fix: the error for the client
    and the text of the log line (after the step); ``None`` for any other failure.

    * An HTTP status of ``statuses``, or a web page, without a JSON-RPC message: the URL
      serves no MCP. Only the last failure of a start gets these words: the era fallback
      reads such statuses of ``server/discover`` first, and a ``server/discover`` that
      no fallback follows gets them only for a status that no 2025-era server gives it.
    * A refused connection: nothing listens at the host and port of the URL.
    """
    if isinstance(exc, ConnectError) and exc.refused:
        detail = (exc.detail or "").removeprefix("connect: ")
        advice = "start the server first, or check the port of the URL"
        if not exc.loopback:
            advice = "start the server, or check the host and the port of the URL"
        return errortable.error_object("connection_refused", f"{step}: {detail}"), f"{detail}: {advice}"
    if not isinstance(exc, HttpStatusError):
        return None
    page = exc.media == "text/html"
    if exc.http_status not in statuses and not page:
        return None
    answer = f"HTTP status {exc.http_status}" + (", a web page" if page else "")
    return errortable.error_object("not_mcp_endpoint", f"{step}: {answer}"), f"{answer}: {_NOT_MCP_ADVICE}"


def discover_error(exc: McpError, timeout: float) -> dict[str, Any]:
    """The error of a failed ``server/discover`` that no fallback follows: ``discover_failed``,
    or the words of :func:`start_words`, ``stopped_at_start`` or a sign-in cause."""
    if isinstance(exc, SignInError):
        return errortable.error_from_sign_in(exc)
    words = start_words("server/discover", exc, statuses=_NOT_MCP_AT_DISCOVER)
    if words is not None:
        return words[0]
    if isinstance(exc, RpcError):
        error = errortable.error_object("discover_failed", exc.error.message)
        if exc.error.code != jsonrpc.URL_ELICITATION_REQUIRED:
            error["code"] = exc.error.code
        return error
    if isinstance(exc, RequestTimeout):
        return errortable.error_object("discover_failed", f"no response in {format_duration(timeout)}")
    if isinstance(exc, Closed):
        detail = exc.detail or ""
        return errortable.error_object("stopped_at_start", f"server/discover: {detail}" if detail else None)
    detail = "server/discover"
    if exc.http_status is not None:
        detail += f", HTTP status {exc.http_status}"
    return errortable.error_object(exc.cause, detail)


def discover_failure_text(exc: McpError, error: dict[str, Any]) -> str:
    """What the log says of a failed ``server/discover``: the detail of its error, and for a
    failure of the connection what failed (a TLS or proxy step, a refused connection)."""
    words = start_words("server/discover", exc, statuses=_NOT_MCP_AT_DISCOVER)
    if words is not None:
        return words[1]
    data = error["data"]
    text = str(data.get("detail", data["cause"]))
    if not isinstance(exc, (RpcError, RequestTimeout, SignInError)) and exc.detail and exc.detail not in text:
        text = f"{text}: {exc.detail}"
    return text
