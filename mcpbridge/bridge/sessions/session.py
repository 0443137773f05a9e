"""The modern upstream session: forward a request of the client to a 2026-07-28 server.

Theory of operation
-------------------

The front end gives each forwarded request of the client a slot and hands it
to the :class:`UpstreamSession` of the connection: a :class:`ModernSession`
over the :class:`~mcpbridge.mcp.client.Client` of a 2026-07-28 upstream, or the
2025-era :class:`~.passthrough.LegacyPassthrough`.

A :class:`ModernSession` gives each forwarded request a
:class:`~.run.RequestRun` (:meth:`ModernSession.request_run`), which carries it
upstream round by round and answers it once: an ``input_required`` result sends
the input requests of the upstream server to the client as the bridge's own
``b-`` requests (:class:`~.rounds.Rounds`), and the next round goes upstream with
their answers. Progress of every round reaches the client's progress token, rate
limited. A ``tools/call`` declares the Tasks extension (``--tasks auto``): a task
that the server makes instead of a result is driven to its end on the same slot
(:class:`~.sessiontasks.SessionTasks`), and the client gets its result. Module
``run`` says the path of a request from the reader thread (the **fast path** of
``Options.forward_on_reader`` sends its first round there) to the upstream
client and back, and the states of a run.

The session speaks to the client only through its :class:`SessionHost`: the
output, the ``b-`` pending table and the slots of the front end.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from ...mcp import jsonrpc
from ...mcp.client import Client
from ...mcp.client.peer import Peer
from ...mcp.droplog import DropLog
from ...mcp.errors import Closed, McpError, RequestTimeout, RpcError
from ...mcp.jsonrpc import Notification, Request
from ...mcp.protocol import MODERN
from ...mcp.text import format_duration, printable
from ...mcp.transports import PeerForm
from ...mcp.transports.httpwire import ConnectError, HttpStatusError
from ...oauth.errors import SignInError
from ..front.options import TaskMode
from ..front.output import Host, Slot
from ..rules import errortable, translate
from .run import RequestRun, RunHost, log_repairs, log_too_large

if TYPE_CHECKING:
    from ..front.dumptext import UpstreamState
    from .sessiontasks import SessionTasks

__all__ = [
    "ModernSession",
    "SessionHost",
    "UpstreamSession",
    "discover_error",
    "forward_upstream_log",
    "log_repairs",
    "log_too_large",
    "start_words",
]

log = logging.getLogger("mcpbridge.bridge")
#: The lines of the sessions that a peer can make repeat: dropped notifications of the upstream.
_drops = DropLog(log)


class UpstreamSession(Protocol):
    """The seam between the front end and the upstream server of one connection.

    :class:`ModernSession` and :class:`~.passthrough.LegacyPassthrough` are the two.
    """

    @property
    def gone(self) -> bool:
        """True once the upstream process is gone for good."""
        ...

    @property
    def exit_status(self) -> str | None: ...

    @property
    def form(self) -> PeerForm:
        """How the upstream server is reached: a command, a URL, the same process."""
        ...

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
    from ..front.dumptext import UpstreamState  # loaded at the first dump (see dumptext)

    return UpstreamState(peer.form.value, era, peer.gone, peer.exit_status, peer.closed)


class SessionHost(RunHost, Protocol):
    """What a session needs of the front end: what its runs need (:class:`~.run.RunHost`)."""


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

    @property
    def form(self) -> PeerForm:
        return self.client.form

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

    def request_run(self, slot: Slot, request: Request) -> RequestRun:
        """A new run of a forwarded request of the client on ``slot`` (module ``run``)."""
        return RequestRun(self.client, self._host, self._tasks, slot, request)


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
