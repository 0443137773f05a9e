"""Pass a 2025-era upstream server through to the client.

Theory of operation
-------------------

The front end probes the upstream server with ``server/discover``. When the
answer says that the server is of the 2025 era (:func:`means_legacy`), or when
``--protocol legacy`` skips the probe, the ``initialize`` slot of the front end
hands the connection to a :class:`LegacyPassthrough`. It sends ``initialize``
upstream with the client's own parameters and answers the client with the
upstream's own result. From then on both sides speak the same era, and the
bridge only carries the messages:

* Each request of the client goes upstream from its slot, with an id of the
  bridge (1, 2, 3...); the answer goes back with the client's id. A canceled
  slot sends ``notifications/cancelled`` with the upstream id and writes no
  response; a request past its time limit is canceled upstream and gets the
  ``timeout`` error.
* Each request of the upstream server (elicitation, sampling, roots, ping) goes
  to the client with an id ``u-1``, ``u-2``...; the client's answer goes back
  upstream with the server's id. A ``notifications/cancelled`` of the server
  names its own id: the client gets it with the ``u-`` id.
* Every other notification passes unchanged in both directions: list changes,
  resource updates, progress and log messages from the server;
  ``notifications/initialized`` and root changes from the client. Progress is
  limited to the rate of the front end (50 a second for each token) and reaches
  the client only for a request in flight that asked for it.
* A result goes to the client as the server wrote it, but for what VS Code needs of
  every server (:func:`~.translate.shape_legacy_result`): the schema repairs of
  ``tools/list``, a string-or-nothing ``nextCursor``, and the icon rule of the front
  end (only ``data:`` icons from a server at a URL, its ``serverInfo`` icons
  included). The translation's own rules (a text copy of ``structuredContent``, the
  2026-07-28 members) are not for a 2025-era result. A result that is not an object,
  which no MCP revision allows and VS Code refuses, fails its request with
  ``invalid_response`` by the rule of the 2026-07-28 path
  (:func:`~mcpbridge.mcp.client.object_result`), with a warning line.
  A line of the client that answers a ``u-`` request but cannot be read
  answers the server with an error, so that its request does not wait forever.

:class:`LegacyPeer` is the raw JSON-RPC peer under it: a pending table of the
bridge's requests, their deadlines, and nothing of MCP (no ``_meta``, no
``resultType``). ``mcp-bridge-vscode check`` uses it too.

A stdio child that answered the probe with an error usually keeps running
(the Python SDK answers -32602, the TypeScript SDK -32601). :class:`StdioUpstream`
gives the probe's :class:`~mcpbridge.mcp.client.Client` a *seat* on the child,
and the passthrough takes the child over from that seat instead of starting
the command again. A child that closed is started again.

The probe is quiet: the Python SDK 1.x logs the validation error of every request
type it knows for a method it does not know, about 95 lines on stderr whatever the
parameters. The stderr lines of the child wait for its answer to the probe
(:class:`_ProbeStderr`), and such a page becomes one line with its count.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Final, Protocol

from ..mcp.cancel import CancelToken
from ..mcp.client import Client, object_result
from ..mcp.droplog import DropLog
from ..mcp.errorbase import BridgeError
from ..mcp.errors import Cancelled, Closed, InvalidResponse, McpError, RequestTimeout, RpcError, SpawnFailed
from ..mcp.framing import TooLong
from ..mcp.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MISSING_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from ..mcp.peer import Entry, Outcome, Peer, bad_line
from ..mcp.rate import RateWindow
from ..mcp.text import format_duration, printable
from ..mcp.transport import OnClosed, OnFrameError, OnMessage, Transport, run_callback
from . import errortable, legacy, translate
from .dumptext import UpstreamState
from .listrules import ListRules
from .options import Options, Timeouts
from .output import Host, Slot
from .session import discover_error, log_repairs, upstream_state
from .upstream import UPSTREAM_MAX_DEPTH, _write_child_stderr

__all__ = [
    "AUTO",
    "FAILED_STARTS",
    "LEGACY",
    "LegacyPassthrough",
    "LegacyPeer",
    "LegacyTransports",
    "LegacyUpstream",
    "OpenFailed",
    "StdioUpstream",
    "falls_back",
    "log_spawn_failed",
    "means_legacy",
    "time_limit",
]

log = logging.getLogger("mcpbridge.bridge")

#: The values of ``--protocol`` (``Options.protocol``) besides :data:`~mcpbridge.mcp.protocol.MODERN`.
AUTO: Final = "auto"
LEGACY: Final = "legacy"

#: The errors that only a server of revision 2026-07-28 sends: such a server is modern.
MODERN_ERROR_CODES: Final = frozenset(
    {HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
#: HTTP statuses that a 2025-era server gives a modern request (§A11 of the digest).
LEGACY_HTTP_STATUSES: Final = frozenset({400, 404, 405})
#: The prefix of the ids of the upstream's requests as the client sees them.
SERVER_REQUEST_PREFIX: Final = "u-"
#: The methods that may wait for the client's answers to the server's requests, and
#: ``tasks/result``, which the server holds until the task ends.
_LONG_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read", "tasks/result"})
#: The results that get VS Code's rules of every era (schema repairs, cursor, icons).
_SHAPED_METHODS: Final = frozenset(
    {"tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/templates/list"}
)
#: The kind of the log lines of a failed start of the upstream server in a connection's drop log:
#: the client may send ``initialize`` again after each.
FAILED_STARTS: Final = "failed starts of the upstream server"
#: What the server gets for a request of its own that is not a valid message.
_INVALID_SERVER_REQUEST: Final = ErrorObject(INVALID_REQUEST, "Invalid Request")
#: The stderr lines of a child that wait for its answer to ``server/discover``: at most these bytes.
PROBE_STDERR_BYTES: Final = 64 * 1024
#: After a refused ``server/discover``, this many waiting stderr lines pass as they are; more
#: become one line with their count.
PROBE_STDERR_LINES: Final = 5
#: What the server gets for a line of the client that answers its request but cannot be read.
_UNREADABLE_ANSWER: Final = ErrorObject(INTERNAL_ERROR, "The answer of the client could not be read.")


def time_limit(method: str, timeouts: Timeouts) -> float:
    """The time limit of a request of the client to a 2025-era server: a call's for a request
    that may wait for the client or for the end of a task, a list's for the others."""
    return timeouts.call if method in _LONG_METHODS else timeouts.list


def means_legacy(exc: McpError, *, protocol: str, over_http: bool) -> bool:
    """Tell whether a failed ``server/discover`` shows a server of the 2025 era.

    Only ``--protocol auto`` falls back. A JSON-RPC error is legacy unless its
    code is one that only a modern server sends. Over stdio, no answer in the
    time limit is legacy too; a child that exited without an answer is not.
    Over HTTP, status 400, 404 or 405 without a JSON-RPC error of the request
    is legacy.
    """
    if protocol != AUTO:
        return False
    if isinstance(exc, RpcError):
        return exc.error.code not in MODERN_ERROR_CODES
    if over_http:
        return isinstance(exc, InvalidResponse) and exc.http_status in LEGACY_HTTP_STATUSES
    return isinstance(exc, RequestTimeout)


def stopped_during(step: str, exit_status: str | None) -> str:
    """The log line of an upstream server that stopped during ``step``, with its exit code or signal."""
    if exit_status is not None:
        return f"the upstream server exited during {step} ({exit_status})"
    return f"the upstream server closed the connection during {step}"


def log_spawn_failed(drops: DropLog, exc: McpError) -> None:
    """Log that the upstream command did not start, in ``drops``, the drop log of the connection."""
    drops(
        logging.ERROR,
        FAILED_STARTS,
        "the upstream server did not start: %s",
        exc.detail or exc.cause,
        exc_info=exc,
    )


def falls_back(exc: McpError, *, protocol: str, upstream: LegacyUpstream | None, drops: DropLog) -> bool:
    """Whether a failed ``server/discover`` sends the bridge to the 2025-era ``upstream``.

    Never without such an upstream; see :func:`means_legacy`. The fallback writes one debug
    line in ``drops``, the drop log of the connection; the era line of
    :meth:`LegacyPassthrough.open` tells the user.
    """
    if upstream is None or not means_legacy(exc, protocol=protocol, over_http=upstream.over_http):
        return False
    detail = exc.error.message if isinstance(exc, RpcError) else exc.detail or exc.cause
    drops(
        logging.DEBUG,
        "fallbacks to initialize of MCP 2025-11-25",
        "server/discover failed (%s): the bridge tries initialize of MCP 2025-11-25",
        printable(detail),
        exc_info=exc,
    )
    return True


# ---------------------------------------------------------------------------------------------
# How the front end reaches a 2025-era upstream
# ---------------------------------------------------------------------------------------------


class SignInGuard(Protocol):
    """The sign-in of a URL upstream, as the requests of the passthrough need it.

    :class:`~mcpbridge.oauth.authorizer.OAuthAuthorizer` is one.
    """

    @property
    def sign_in_timeout(self) -> float: ...

    def interactive(self) -> bool:
        """Whether the next request can need a sign-in in the browser."""
        ...

    def guard(self, *, cancel: CancelToken | None, timeout: float) -> AbstractContextManager[object]:
        """Let a sign-in start within the request that runs inside, bounded by ``cancel`` and ``timeout``."""
        ...


class LegacyUpstream(Protocol):
    """The seam between the front end and a 2025-era upstream server."""

    #: True for a URL: then only HTTP statuses and JSON-RPC errors mean legacy, not a time-out.
    over_http: bool
    #: The sign-in of a URL upstream, or ``None``.
    sign_in: SignInGuard | None

    def transport(self, probe: Client | None) -> Transport:
        """An unstarted transport to the upstream server.

        ``probe`` is the client of the failed ``server/discover``, or ``None``
        (``--protocol legacy``). The caller closes ``probe`` afterwards.
        """
        ...


class LegacyTransports:
    """A :class:`LegacyUpstream` that makes a new transport each time (a URL)."""

    def __init__(
        self, make: Callable[[], Transport], *, over_http: bool = True, sign_in: SignInGuard | None = None
    ) -> None:
        self._make = make
        self.over_http = over_http
        self.sign_in = sign_in

    def transport(self, probe: Client | None) -> Transport:
        return self._make()


class _ProbeStderr:
    """The stderr lines of a child while the bridge probes it with ``server/discover``.

    The lines wait (at most :data:`PROBE_STDERR_BYTES`; beyond, they pass) until the
    child answers:

    * a message that is not an error: they pass as they are, in order;
    * an error: they wait on until the next message or the end of the child, so that the
      lines written before the error are here (stderr and stdout are two pipes); then more
      than :data:`PROBE_STDERR_LINES` become one line with their count, fewer pass;
    * no answer (the end of the child, or the probe that gave up): they pass.

    From then on each line passes at once.
    """

    def __init__(self, sink: Callable[[str], None]) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        #: The waiting lines; ``None`` once they passed.
        self._held: list[str] | None = []
        self._bytes = 0
        self._refused = False

    def line(self, text: str) -> None:
        """One stderr line of the child (the sink of its transport)."""
        with self._lock:
            if self._held is not None:
                size = len(text.encode("utf-8", "surrogateescape"))
                if self._bytes + size <= PROBE_STDERR_BYTES:
                    self._held.append(text)
                    self._bytes += size
                    return
                self._release()
            self._sink(text)

    def answered(self, message: Message) -> None:
        """A message of the child: the first error refuses the probe; else the wait ends."""
        with self._lock:
            if self._held is None:
                return
            if isinstance(message, ErrorResponse) and not self._refused:
                self._refused = True
                return
            self._finish()

    def gave_up(self) -> None:
        """The probe ended without an answer: the lines pass, unless the child refused it."""
        with self._lock:
            if not self._refused:
                self._release()

    def closed(self) -> None:
        """The child ended."""
        with self._lock:
            self._finish()

    def _finish(self) -> None:
        if self._refused and self._held is not None and len(self._held) > PROBE_STDERR_LINES:
            count = len(self._held)
            self._held = None
            log.info(
                "the upstream server wrote %d lines on stderr as it refused server/discover, a request "
                "of MCP 2026-07-28; --log-level debug shows them",
                count,
            )
        else:
            self._release()

    def _release(self) -> None:
        held, self._held = self._held or [], None
        for text in held:
            self._sink(text)


class _Shared:
    """A child process and the seat that owns it now.

    Deliveries run under ``_deliver``; while no seat has started, they wait in
    ``_held`` and the next seat to start gets them first, in order. ``stderr``, when
    given, holds the stderr lines of the child during the probe.
    """

    def __init__(self, inner: Transport, stderr: _ProbeStderr | None = None) -> None:
        self.inner = inner
        self.stderr = stderr
        self._deliver = threading.Lock()
        self._owner: _Seat | None = None
        self._targets: tuple[OnMessage, OnFrameError, OnClosed] | None = None
        self._held: list[Callable[[tuple[OnMessage, OnFrameError, OnClosed]], None]] = []
        self._started = False

    def seat(self) -> _Seat:
        """A new seat that owns the child from now on; the former seat can only close itself."""
        with self._deliver:
            seat = _Seat(self)
            self._owner = seat
            self._targets = None
            return seat

    def owns(self, seat: _Seat) -> bool:
        return self._owner is seat

    def attach(
        self,
        seat: _Seat,
        targets: tuple[OnMessage, OnFrameError, OnClosed],
    ) -> None:
        with self._deliver:
            if self._owner is not seat:
                raise Closed("the upstream process belongs to another connection")
            for item in self._held:
                item(targets)
            self._held.clear()
            self._targets = targets
            first = not self._started
            self._started = True
        if first:
            self.inner.start(self._on_message, self._on_frame_error, self._on_closed)

    def _route(self, item: Callable[[tuple[OnMessage, OnFrameError, OnClosed]], None]) -> None:
        with self._deliver:
            if self._targets is None:
                self._held.append(item)
            else:
                item(self._targets)

    def _on_message(self, message: Message) -> None:
        if self.stderr is not None:
            self.stderr.answered(message)
        self._route(lambda targets: targets[0](message))

    def _on_frame_error(self, error: FrameError | TooLong) -> None:
        self._route(lambda targets: targets[1](error))

    def _on_closed(self, error: McpError | None) -> None:
        if self.stderr is not None:
            self.stderr.closed()
        self._route(lambda targets: targets[2](error))


class _Seat(Transport):
    """One owner's view of a shared child: the probe's client, then the passthrough."""

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None:
        self._shared.attach(self, (on_message, on_frame_error, on_closed))

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        if not self._shared.owns(self):
            raise Closed("the upstream process belongs to another connection")
        self._shared.inner.send(message, cancel=cancel)

    def close(self, grace: float = 2.0) -> None:
        if self._shared.owns(self):
            self._shared.inner.close(grace)

    def kill(self) -> None:
        if self._shared.owns(self):
            kill = getattr(self._shared.inner, "kill", None)
            if callable(kill):
                kill()

    @property
    def gone(self) -> bool:
        return self._shared.inner.gone

    @property
    def form(self) -> str:
        return self._shared.inner.form

    @property
    def exit_status(self) -> str | None:
        return self._shared.inner.exit_status


class StdioUpstream:
    """An upstream command for both eras.

    :meth:`connect` is the ``connect`` of the front end (the discover probe);
    :meth:`transport` is its :class:`LegacyUpstream`: it takes over the child
    of the probe while that child runs, else it starts the command again.
    Each stderr line of a child goes to ``stderr_sink`` (by default to our stderr);
    those of a probed child wait for its answer (:class:`_ProbeStderr`), but at the
    debug level. :attr:`stray_lines` counts the lines of their stdout that were not messages.
    """

    over_http = False
    sign_in: SignInGuard | None = None

    def __init__(
        self,
        argv: Sequence[str],
        *,
        max_line_bytes: int,
        stderr_sink: Callable[[str], None] | None = _write_child_stderr,
    ) -> None:
        self._argv = list(argv)
        self._max_line_bytes = max_line_bytes
        self._stderr_sink = stderr_sink
        self._lock = threading.Lock()
        self._probes: weakref.WeakKeyDictionary[Client, _Shared] = weakref.WeakKeyDictionary()
        self._stray_lines = 0

    @property
    def stray_lines(self) -> int:
        """The lines that the children wrote to stdout that were not messages (a debug print,
        most often), whatever the log level showed of them."""
        with self._lock:
            return self._stray_lines

    def _count_stray_line(self) -> None:
        with self._lock:
            self._stray_lines += 1

    def _child(self, stderr_sink: Callable[[str], None] | None) -> Transport:
        from ..mcp.stdio import StdioChildTransport

        return StdioChildTransport(
            self._argv,
            max_line_bytes=self._max_line_bytes,
            stderr_sink=stderr_sink,
            on_stray_line=self._count_stray_line,
        )

    def connect(self, client_info: dict[str, Any], on_notification: Callable[[Notification], None]) -> Client:
        """Start the command and a started client of revision 2026-07-28 on it."""
        stderr = None
        if self._stderr_sink is not None and not log.isEnabledFor(logging.DEBUG):
            stderr = _ProbeStderr(self._stderr_sink)
        shared = _Shared(self._child(stderr.line if stderr is not None else self._stderr_sink), stderr)
        client = Client(
            shared.seat(),
            client_info=client_info,
            max_depth=UPSTREAM_MAX_DEPTH,
            on_notification=on_notification,
        )
        client.start()
        with self._lock:
            self._probes[client] = shared
        return client

    def transport(self, probe: Client | None) -> Transport:
        with self._lock:
            shared = self._probes.pop(probe, None) if probe is not None else None
        if shared is not None and shared.stderr is not None:
            shared.stderr.gave_up()
        if shared is not None and not shared.inner.gone:
            log.debug("the bridge keeps the upstream process of server/discover")
            return shared.seat()
        return self._child(self._stderr_sink)


# ---------------------------------------------------------------------------------------------
# The raw peer
# ---------------------------------------------------------------------------------------------


class LegacyPeer(Peer):
    """A raw JSON-RPC peer over a transport: integer ids, a pending table, deadlines.

    It adds nothing to the messages. The server's requests go to ``on_request``
    and its notifications to ``on_notification``, on the delivering thread (a
    callback must not block). Answers go out with :meth:`answer`.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        on_request: Callable[[Request], None],
        on_notification: Callable[[Notification], None],
    ) -> None:
        super().__init__(transport, timer_name="mcpbridge-legacy-timer", logger=log)
        self._on_request = on_request
        self._on_notification = on_notification
        #: Set by the first close: also after the transport ended by itself, it closes it.
        self._close_called = False

    def start(self) -> None:
        """Start the transport (a child process starts here).

        Raises:
            McpError: the transport did not start (``SpawnFailed`` for a command).
        """
        self._timer.start()
        try:
            self._transport.start(self._on_message, self._on_frame_error, self._on_closed)
        except BaseException:
            with self._cond:
                self._closed = Closed("the connection did not start")
            self._timer.stop()
            raise

    def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float,
        cancel: CancelToken | None = None,
    ) -> Response | ErrorResponse:
        """Send one request and wait at most ``timeout`` seconds for its answer.

        A timeout and a cancellation send ``notifications/cancelled`` upstream.

        Raises:
            RequestTimeout: no answer in ``timeout`` seconds.
            Cancelled: ``cancel`` fired.
            Closed: the connection is closed or the upstream process exited.
            InvalidResponse: the answer is a line that is not a valid message.
            McpError: the transport failed.
        """
        with self._cond:
            if self._closed is not None:
                raise Closed(self._closed.detail)
            entry = Entry(self._next_request_id_locked(), method, self._thread_condition())
            self._pending[entry.id] = entry
        message = Request(entry.id, method, params)
        deadline = time.monotonic() + timeout
        sent, send_error, outcome, why, reason = self._send_and_wait(entry, message, deadline, cancel)
        if outcome is None and why == "timeout":
            if sent or isinstance(send_error, Cancelled):
                self._send_cancelled(entry.id, f"no response in {format_duration(timeout)}")
            raise RequestTimeout(f"{method}: no response in {format_duration(timeout)}")
        if outcome is None and why == "cancel":
            if sent or isinstance(send_error, Cancelled):
                self._send_cancelled(entry.id, reason or "the client canceled the request")
            raise Cancelled(reason or None)
        if outcome is None:
            assert send_error is not None
            raise send_error
        if isinstance(outcome, McpError):
            raise outcome
        return outcome

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; a failure is only logged."""
        self._send_quietly(Notification(method, params), method)

    def answer(self, message: Response | ErrorResponse) -> None:
        """Send the answer to a request of the server; a failure is only logged."""
        self._send_quietly(message, "an answer")

    def close(self, grace: float = 2.0) -> None:
        """Fail what is pending with ``Closed``, close the transport, stop the deadline thread."""
        with self._cond:
            first, self._close_called = not self._close_called, True
            self._fail_pending_locked(Closed("the connection to the upstream server is closed"))
        if first:
            self._transport.close(grace)
            self._timer.stop()

    # ------------------------------------------------------------ internals

    def _send_quietly(self, message: Message, what: str) -> None:
        try:
            self._transport.send(message)
        except McpError as exc:
            self._drops(
                logging.DEBUG,
                "dropped messages that did not reach the upstream server",
                "%s was not sent to the upstream server: %s",
                printable(what),
                exc.cause,
                exc_info=exc,
            )

    def _resolve(self, request_id: RequestId, outcome: Outcome) -> bool:
        with self._cond:
            return self._settle_locked(request_id, lambda _entry: outcome) is not None

    def _on_message(self, message: Message) -> None:
        if isinstance(message, (Response, ErrorResponse)):
            if message.id is None:
                assert isinstance(message, ErrorResponse)
                self._drop_error_without_id(message.error.code)
            elif not self._resolve(message.id, message):
                self._drop_unmatched("a response", message.id)
        elif isinstance(message, Request):
            request = message
            run_callback(message.method, lambda: self._on_request(request), log)
        else:
            notification = message
            run_callback(message.method, lambda: self._on_notification(notification), log)

    def _on_frame_error(self, error: FrameError | TooLong) -> None:
        line = bad_line(error)
        if line.answered is not None:
            if not self._resolve(line.answered, InvalidResponse(f"the response is {line.what}")):
                self._drop_unmatched(line.what, line.answered)
        elif line.id is not None:
            # A request of the server: it resolves none of ours, and gets its error.
            self._drops(
                logging.WARNING,
                "refused requests of the upstream server that are not valid",
                "refused a request of the upstream server, %s",
                line.what,
            )
            self.answer(ErrorResponse(line.id, _INVALID_SERVER_REQUEST))
        else:
            self._drops(
                logging.WARNING,
                "dropped lines that are not valid messages",
                "dropped %s from the upstream server",
                line.what,
            )

    def _on_closed(self, error: McpError | None) -> None:
        self._drops.flush()
        with self._cond:
            self._fail_pending_locked(error if error is not None else Closed("the connection is closed"))


# ---------------------------------------------------------------------------------------------
# The passthrough
# ---------------------------------------------------------------------------------------------


class OpenFailed(BridgeError):
    """``initialize`` of the 2025-era upstream failed.

    ``error`` is the error object for the client, or ``None`` when the client gets no answer.
    """

    def __init__(self, error: dict[str, Any] | None) -> None:
        super().__init__(error["message"] if error is not None else "canceled")
        self.error = error


class _ProgressGate:
    """The progress tokens of the client's requests in flight, each with its rate limit.

    Tokens are keyed with their JSON type: ``1``, ``1.0`` and ``true`` are three tokens.
    """

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._lock = threading.Lock()
        #: token key -> [the rate window of the token, its requests in flight]
        self._tokens: dict[tuple[type, Any], list[Any]] = {}

    @staticmethod
    def _key(token: Any) -> tuple[type, Any]:
        return (type(token), token)

    def open(self, token: translate.ProgressToken) -> None:
        with self._lock:
            entry = self._tokens.setdefault(self._key(token), [RateWindow(self._rate), 0])
            entry[1] += 1

    def close(self, token: translate.ProgressToken) -> None:
        key = self._key(token)
        with self._lock:
            entry = self._tokens.get(key)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    del self._tokens[key]

    def admit(self, params: Any) -> bool:
        """Whether a ``notifications/progress`` with ``params`` goes to the client now."""
        token = params.get("progressToken") if isinstance(params, dict) else None
        if not isinstance(token, (str, int, float)):
            return False
        with self._lock:
            entry = self._tokens.get(self._key(token))
            return entry is not None and bool(entry[0].admit())


class LegacyPassthrough:
    """Carry a 2025-era upstream connection for one front end; see the module docstring."""

    def __init__(
        self,
        host: Host,
        upstream: LegacyUpstream,
        options: Options,
        *,
        lists: ListRules | None = None,
        drops: DropLog | None = None,
    ) -> None:
        """``lists``: the tool filter of the connection (its cache stays unused: no ttlMs in 2025);
        ``drops``: the drop log of the connection (by default one of its own)."""
        self._host = host
        self._lists = lists if lists is not None else ListRules(options.tool_filter)
        self._options = options
        self._upstream = upstream
        self._peer: LegacyPeer | None = None
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        #: The ids of the server's requests in flight: ours (as the client sees them) to the server's.
        self._to_server: dict[str, RequestId] = {}
        self._to_client: dict[RequestId, str] = {}
        self._progress = _ProgressGate(options.max_progress_rate)
        self._drops = drops if drops is not None else DropLog(log)
        #: The revision that the upstream server chose in its initialize result.
        self.protocol_version: str | None = None

    # -------------------------------------------------------------- opening

    def open(
        self,
        params: dict[str, Any] | None,
        probe: Client | None,
        probe_error: McpError | None,
        cancel: CancelToken,
    ) -> dict[str, Any]:
        """Connect, send ``initialize`` with ``params`` and return the upstream's result.

        ``probe`` is the client of the failed ``server/discover`` (closed here),
        ``probe_error`` its error.

        Raises:
            OpenFailed: with the error for the client, or ``None`` when the client canceled.
        """
        options = self._options
        timeout = options.timeouts.discover
        grace = options.shutdown_grace
        for attempt in (1, 2):
            transport = self._upstream.transport(probe)
            reused = isinstance(transport, _Seat)
            if probe is not None:
                probe.close(grace)
                probe = None
            peer = LegacyPeer(
                transport, on_request=self._on_server_request, on_notification=self._on_server_notification
            )
            self._peer = peer
            try:
                peer.start()
                outcome = self._request(peer, "initialize", params, timeout=timeout, cancel=cancel)
            except Cancelled as exc:
                peer.close(grace)
                raise OpenFailed(None) from exc
            except Closed as exc:
                peer.close(grace)
                if reused and attempt == 1:
                    self._drops(
                        logging.INFO,
                        "restarts of the upstream server after server/discover",
                        "the upstream server closed after server/discover, thus the bridge starts it again",
                    )
                    continue
                self._drops(
                    logging.ERROR, FAILED_STARTS, "%s", stopped_during("initialize", peer.exit_status)
                )
                raise OpenFailed(errortable.error_object(Closed.cause, "initialize")) from exc
            except RequestTimeout as exc:
                peer.close(grace)
                if isinstance(probe_error, RequestTimeout):
                    raise OpenFailed(discover_error(probe_error, timeout)) from exc
                raise OpenFailed(errortable.error_object("timeout", exc.detail)) from exc
            except McpError as exc:
                peer.close(grace)
                raise OpenFailed(self._open_error(exc)) from exc
            if isinstance(outcome, ErrorResponse):
                peer.close(grace)
                self._drops(
                    logging.ERROR, FAILED_STARTS, "initialize failed: %s", printable(outcome.error.message)
                )
                raise OpenFailed(outcome.error.to_obj())
            result = outcome.result
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if not isinstance(result, dict) or not isinstance(version, str):
                peer.close(grace)
                raise OpenFailed(self._open_error(InvalidResponse("initialize: the result is not valid")))
            self.protocol_version = version
            log.info(
                "the upstream server speaks MCP %s, of the 2025 era: the bridge passes its messages through",
                printable(version),
            )
            return translate.initialize_icons(result, options.icon_rule)
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(
        self,
        peer: LegacyPeer,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float,
        cancel: CancelToken,
    ) -> Response | ErrorResponse:
        """``peer.request`` within the sign-in of a URL upstream: a 401 can start a sign-in.

        ``initialize`` waits for the sign-in time limit as well when a sign-in can start,
        as ``server/discover`` of the modern path does.
        """
        sign_in = self._upstream.sign_in
        guard: AbstractContextManager[object] = nullcontext()
        if sign_in is not None:
            if method == "initialize" and sign_in.interactive():
                timeout += sign_in.sign_in_timeout
            guard = sign_in.guard(cancel=cancel, timeout=timeout)
        with guard:
            return peer.request(method, params, timeout=timeout, cancel=cancel)

    def _open_error(self, exc: McpError) -> dict[str, Any]:
        if isinstance(exc, SpawnFailed):
            log_spawn_failed(self._drops, exc)
            return errortable.error_object(exc.cause)
        detail = "initialize"
        if exc.http_status is not None:
            detail += f", HTTP status {exc.http_status}"
        self._drops(
            logging.ERROR, FAILED_STARTS, "initialize failed: %s", exc.detail or exc.cause, exc_info=exc
        )
        return errortable.error_object(exc.cause, detail)

    # --------------------------------------------------- from the client

    def forward(self, slot: Slot, request: Request) -> None:
        """The work of a slot: carry one request of the client upstream and its answer back."""
        peer = self._peer
        assert peer is not None
        options = self._options
        timeout = time_limit(request.method, options.timeouts)
        params = request.params
        token = translate.progress_token(params.get("_meta")) if params is not None else None
        if token is not None:
            self._progress.open(token)
        started = time.monotonic()
        try:
            outcome = self._request(peer, request.method, params, timeout=timeout, cancel=slot.cancel)
        except Cancelled:
            self._trace(slot, request.method, "canceled", started)
            return
        except McpError as exc:
            self._trace(slot, request.method, exc.cause, started)
            if isinstance(exc, Closed) and peer.gone:
                self._host.respond_error(slot, errortable.error_object("upstream_exited"))
            else:
                self._host.respond_error(slot, errortable.error_from_mcp(exc))
            return
        finally:
            if token is not None:
                self._progress.close(token)
        if isinstance(outcome, ErrorResponse):
            self._trace(slot, request.method, f"error {outcome.error.code}", started)
            self._host.respond_error(slot, outcome.error.to_obj())
            return
        try:
            result = object_result(request.method, outcome.result)
        except InvalidResponse as exc:
            self._trace(slot, request.method, exc.cause, started)
            self._drops(
                logging.WARNING,
                "refused results that are not objects",
                "%s: the upstream server sent a result that is not an object, thus the client gets an error",
                printable(request.method),
            )
            self._host.respond_error(slot, errortable.error_from_mcp(exc))
            return
        self._trace(slot, request.method, "response", started)
        self._host.respond(slot, self._shape(request.method, params, result), raw=outcome.raw)

    def _shape(self, method: str, params: Any, result: dict[str, Any]) -> dict[str, Any]:
        if method not in _SHAPED_METHODS:
            return result
        # The tool filter; a 2025-era result has no ttlMs, so nothing is cached.
        result = self._lists.page(method, params, result, cache=False)
        shaped, notes = translate.shape_legacy_result(method, result, icon_rule=self._options.icon_rule)
        log_repairs(notes)
        return shaped

    def _trace(self, slot: Slot, method: str, outcome: str, started: float) -> None:
        log.debug(
            "upstream request (%s, client request %s): %s after %d ms",
            printable(method),
            printable(slot.id),
            outcome,
            int((time.monotonic() - started) * 1000),
        )

    def forward_notification(self, message: Notification) -> None:
        """Carry a notification of the client upstream (not ``notifications/cancelled``)."""
        peer = self._peer
        if peer is not None:
            peer.notify(message.method, message.params)

    def on_client_answer(self, message: Response | ErrorResponse) -> bool:
        """Carry the client's answer to a request of the server; tell whether the id was ours."""
        if isinstance(message, Response):
            return self._answer_server(message.id, lambda server_id: Response(server_id, message.result))
        return self._answer_server(message.id, lambda server_id: ErrorResponse(server_id, message.error))

    def on_unreadable_answer(self, request_id: Any) -> bool:
        """A line of the client with ``request_id`` could not be read; tell whether the id was ours.

        The server's request gets an error instead of the answer that was lost.
        """
        return self._answer_server(request_id, lambda server_id: ErrorResponse(server_id, _UNREADABLE_ANSWER))

    def _answer_server(
        self, request_id: Any, answer: Callable[[RequestId], Response | ErrorResponse]
    ) -> bool:
        """Send ``answer(<the server's id>)`` for the ``u-`` id ``request_id``; False: not such an id."""
        if not isinstance(request_id, str) or not request_id.startswith(SERVER_REQUEST_PREFIX):
            return False
        with self._lock:
            server_id = self._to_server.pop(request_id, None)
            if server_id is not None:
                self._to_client.pop(server_id, None)
        peer = self._peer
        if server_id is None or peer is None:
            self._drops(
                logging.DEBUG,
                "dropped answers of the client to requests of the server that ended",
                "dropped an answer of the client to a request of the server that ended",
            )
            return True
        message = answer(server_id)
        if isinstance(message, ErrorResponse) and message.error is _UNREADABLE_ANSWER:
            self._drops(
                logging.WARNING,
                "answers of the client that could not be read",
                "the answer of the client to a request of the upstream server could not be read",
            )
        peer.answer(message)
        return True

    # ---------------------------------------------------- from the server

    def _on_server_request(self, request: Request) -> None:
        client_id = f"{SERVER_REQUEST_PREFIX}{next(self._counter)}"
        with self._lock:
            self._to_server[client_id] = request.id
            self._to_client[request.id] = client_id
        if self._host.write_request(client_id, request.method, request.params):
            return
        with self._lock:
            self._to_server.pop(client_id, None)
            self._to_client.pop(request.id, None)
        peer = self._peer
        if peer is not None:
            peer.answer(
                ErrorResponse(request.id, ErrorObject(INTERNAL_ERROR, "The client closed the connection."))
            )

    def _on_server_notification(self, message: Notification) -> None:
        if message.method == "notifications/progress":
            if self._progress.admit(message.params):
                self._host.write_notification(message.method, message.params)
            else:
                self._drops(
                    logging.DEBUG,
                    "dropped progress notifications over the rate or for no request",
                    "dropped a progress notification: over the rate, or for no request in flight",
                )
            return
        if message.method != "notifications/cancelled":
            self._host.write_notification(message.method, message.params)
            return
        server_id = legacy.parse_cancelled(message.params)
        with self._lock:
            client_id = self._to_client.pop(server_id, None) if server_id is not None else None
            if client_id is not None:
                self._to_server.pop(client_id, None)
        if client_id is None:
            self._drops(
                logging.DEBUG,
                "dropped late cancellations",
                "dropped a notifications/cancelled of the upstream server for no request in flight",
            )
            return
        params = dict(message.params or {})
        params["requestId"] = client_id
        self._host.write_notification("notifications/cancelled", params)

    # ------------------------------------------------------------ lifecycle

    @property
    def gone(self) -> bool:
        """True once the upstream process is gone for good."""
        peer = self._peer
        return peer is not None and peer.gone

    @property
    def exit_status(self) -> str | None:
        peer = self._peer
        return peer.exit_status if peer is not None else None

    def close(self, grace: float = 2.0) -> None:
        """Close the upstream connection (idempotent), and tell the counts of the drops."""
        peer = self._peer
        if peer is not None:
            peer.close(grace)
        self._drops.flush()

    def rest(self) -> None:
        peer = self._peer
        if peer is not None:
            peer.rest()

    def kill(self) -> None:
        peer = self._peer
        if peer is not None:
            peer.kill()

    def describe(self) -> UpstreamState:
        peer = self._peer
        assert peer is not None, "the passthrough is not open"
        return upstream_state(peer, f"MCP {self.protocol_version}, passed through")
