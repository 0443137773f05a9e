"""Pass a 2025-era upstream server through to the client.

Theory of operation
-------------------

The ``initialize`` slot of the front end hands the connection to a
:class:`LegacyPassthrough` first under ``--protocol auto`` (a command or a URL), and
under ``--protocol legacy``. It sends ``initialize`` upstream with the client's own
parameters (for a URL within the sign-in, whose 401 it may get first) and answers the
client with the upstream's own result: a server that speaks the client's revision is
reached in it, as a direct connection reaches it. When the server refuses that
``initialize`` as a server of revision 2026-07-28 only does
(:func:`~.era.refuses_as_modern`), the front end goes on with ``server/discover``
(:meth:`LegacyPassthrough.modern_connect`: on the same child for a command) and
translates. From then on both sides speak the same era, and the bridge only
carries the messages:

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
  the client only for a request in flight that asked for it; a list change reaches
  it only once it asked for that list (:class:`~.front.listrules.AskedLists`).
* A result goes to the client as the server wrote it, but for what VS Code needs of
  every server (:func:`~.rules.translate.shape_legacy_result`): the schema repairs of
  ``tools/list``, a string-or-nothing ``nextCursor``, and the icon rule of the front
  end (only ``data:`` icons from a server at a URL, its ``serverInfo`` icons
  included). The translation's own rules (a text copy of ``structuredContent``, the
  2026-07-28 members) are not for a 2025-era result. A result that is not an object,
  which no MCP revision allows and VS Code refuses, fails its request with
  ``invalid_response`` by the rule of the 2026-07-28 path
  (:func:`~mcpbridge.mcp.client.call.object_result`), with a warning line.
  A line of the client that answers a ``u-`` request but cannot be read
  answers the server with an error, so that its request does not wait forever.

The passthrough runs on the raw JSON-RPC peer
:class:`~mcpbridge.mcp.client.legacypeer.LegacyPeer`. Which era a server speaks and how
the front end reaches a 2025-era one are in :mod:`mcpbridge.bridge.sessions.era`; a child
shared by the probe and the passthrough is in :mod:`mcpbridge.bridge.sessions.childshare`.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Final

from ...mcp.cancel import CancelToken
from ...mcp.client import Client
from ...mcp.client.call import object_result
from ...mcp.client.legacypeer import LegacyPeer
from ...mcp.droplog import DropLog
from ...mcp.errorbase import BridgeError
from ...mcp.errors import (
    Cancelled,
    Closed,
    InvalidResponse,
    McpError,
    RequestTimeout,
    ResponseTooLarge,
    SpawnFailed,
)
from ...mcp.jsonrpc import (
    INTERNAL_ERROR,
    ErrorObject,
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from ...mcp.protocol import MODERN
from ...mcp.rate import RateWindow
from ...mcp.text import format_duration, printable
from ...mcp.transports import PeerForm, Transport
from ...oauth.errors import SignInError
from ..front.listrules import ListRules
from ..front.options import Options, Timeouts
from ..front.output import Host, Slot, Waiting
from ..rules import errortable, legacy, translate
from .era import (
    FAILED_STARTS,
    LegacyUpstream,
    ModernConnect,
    log_spawn_failed,
    refused_legacy,
    refuses_as_modern,
    stopped_during,
    stopped_error,
)
from .session import log_repairs, log_too_large, start_words, upstream_state

if TYPE_CHECKING:
    from ..front.dumptext import UpstreamState

# The front end imports the names of mcpbridge.bridge.sessions.era that it needs from here.
__all__ = [
    "FAILED_STARTS",
    "LegacyPassthrough",
    "LegacyUpstream",
    "OpenFailed",
    "log_spawn_failed",
    "stopped_during",
    "time_limit",
]

log = logging.getLogger("mcpbridge.bridge")

#: The prefix of the ids of the upstream's requests as the client sees them.
SERVER_REQUEST_PREFIX: Final = "u-"
#: The methods that may wait for the client's answers to the server's requests, and
#: ``tasks/result``, which the server holds until the task ends.
_LONG_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read", "tasks/result"})
#: The results that get VS Code's rules of every era (schema repairs, cursor, icons).
_SHAPED_METHODS: Final = frozenset(
    {"tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/templates/list"}
)
#: What the server gets for a line of the client that answers its request but cannot be read.
_UNREADABLE_ANSWER: Final = ErrorObject(INTERNAL_ERROR, "The answer of the client could not be read.")


def time_limit(method: str, timeouts: Timeouts) -> float:
    """The time limit of a request of the client to a 2025-era server: a call's for a request
    that may wait for the client or for the end of a task, a list's for the others."""
    return timeouts.call if method in _LONG_METHODS else timeouts.list


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
        #: The requests of the client in flight upstream (for a thread dump), by ``id`` of the slot.
        self._in_flight: dict[int, Slot] = {}
        #: The server's requests that wait for the client's answer: when asked, and the slot of
        #: the client's request that waits for that answer when it is clear which (see
        #: :meth:`_on_server_request`).
        self._asked: dict[str, tuple[float, Slot | None]] = {}
        self._progress = _ProgressGate(options.max_progress_rate)
        self._drops = drops if drops is not None else DropLog(log)
        #: The revision that the upstream server chose in its initialize result.
        self.protocol_version: str | None = None
        #: The transport of an ``initialize`` that a modern server refused (see :meth:`modern_connect`).
        self._refused: Transport | None = None

    # -------------------------------------------------------------- opening

    def open(
        self,
        params: dict[str, Any] | None,
        cancel: CancelToken,
        *,
        first: bool = False,
    ) -> dict[str, Any] | None:
        """Connect, send ``initialize`` with ``params`` and return the upstream's result.

        ``first``: ``--protocol auto``, before any ``server/discover``; then ``None`` means that
        the upstream refused ``initialize`` as a server of revision 2026-07-28 only does, and
        the front end goes on with ``server/discover`` through :meth:`modern_connect`.

        Raises:
            OpenFailed: with the error for the client, or ``None`` when the client canceled.
        """
        grace = self._options.shutdown_grace
        transport = self._upstream.transport(None)
        peer = LegacyPeer(
            transport, on_request=self._on_server_request, on_notification=self._on_server_notification
        )
        self._peer = peer
        try:
            peer.start()
            outcome = self._request(
                peer, "initialize", params, timeout=self._options.timeouts.discover, cancel=cancel
            )
        except McpError as exc:
            peer.close(grace)
            raise OpenFailed(self._start_error(exc, first=first)) from exc
        if isinstance(outcome, ErrorResponse):
            if first and refuses_as_modern(outcome.error):
                self._refused = transport
                log.info(
                    "the upstream server refused initialize of MCP %s, the client's revision (%s): "
                    "it speaks MCP %s only, thus the bridge translates",
                    printable(str((params or {}).get("protocolVersion"))),
                    printable(outcome.error.message),
                    MODERN,
                )
                return None
            peer.close(grace)
            raise OpenFailed(self._refusal(outcome.error))
        return self._opened(peer, outcome.result, first=first)

    def _start_error(self, exc: McpError, *, first: bool) -> dict[str, Any] | None:
        """The error for the client of an ``initialize`` that failed with ``exc``; ``None``: canceled."""
        timeout = self._options.timeouts.discover
        if isinstance(exc, Cancelled):
            return None
        if isinstance(exc, Closed):
            peer = self._peer
            status = peer.exit_status if peer is not None else None
            self._drops(logging.ERROR, FAILED_STARTS, "%s", stopped_during("initialize", status))
            return stopped_error("initialize", status)
        if not isinstance(exc, RequestTimeout):
            return self._open_error(exc)
        if first:
            # One time limit, that of server/discover: a server silent on initialize
            # gets no server/discover after it.
            detail = f"initialize, no response in {format_duration(timeout)}"
            self._drops(logging.ERROR, FAILED_STARTS, "initialize failed: %s", detail)
            return errortable.error_object("timeout", detail)
        return errortable.error_object("timeout", exc.detail)

    def _refusal(self, error: ErrorObject) -> dict[str, Any]:
        """The error for the client of an ``initialize`` that the server refused with ``error``."""
        refused = refused_legacy(error, protocol=self._options.protocol)
        if refused is not None:
            self._drops(logging.ERROR, FAILED_STARTS, "%s", refused[1])
            return refused[0]
        self._drops(logging.ERROR, FAILED_STARTS, "initialize failed: %s", printable(error.message))
        return error.to_obj()

    def _opened(self, peer: LegacyPeer, result: Any, *, first: bool) -> dict[str, Any]:
        """The result of ``initialize`` for the client, once the server took it; its era line."""
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if not isinstance(result, dict) or not isinstance(version, str):
            peer.close(self._options.shutdown_grace)
            raise OpenFailed(self._open_error(InvalidResponse("initialize: the result is not valid")))
        self.protocol_version = version
        if first:
            log.info(
                "the upstream server speaks MCP %s, the client's revision: the bridge passes it "
                "through; --protocol %s translates instead",
                printable(version),
                MODERN,
            )
        else:
            log.info(
                "the upstream server speaks MCP %s, of the 2025 era: the bridge passes its messages through",
                printable(version),
            )
        return translate.initialize_icons(result, self._options.icon_rule)

    def modern_connect(self, connect: ModernConnect) -> ModernConnect:
        """After :meth:`open` returned ``None``: how the front end reaches the server in 2026-07-28.

        ``connect`` is the front end's own. A command's modern client takes over the child
        that refused ``initialize``; the passthrough lets go of it once that client started.
        """
        peer, refused = self._peer, self._refused
        if peer is None or refused is None:
            return connect
        self._peer = self._refused = None
        inner = self._upstream.modern_connect(refused, connect)
        grace = self._options.shutdown_grace

        def connect_after(
            client_info: dict[str, Any], on_notification: Callable[[Notification], None]
        ) -> Client:
            try:
                return inner(client_info, on_notification)
            finally:
                # Closes nothing but its own seat once the modern client owns the child.
                peer.close(grace)

        return connect_after

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
        words = start_words("initialize", exc)
        if words is not None:
            self._drops(logging.ERROR, FAILED_STARTS, "initialize failed: %s", words[1], exc_info=exc)
            return words[0]
        if isinstance(exc, SignInError):
            # The sign-in of a URL ran in initialize, the first request of --protocol auto.
            error = errortable.error_from_sign_in(exc)
            self._drops(
                logging.ERROR, FAILED_STARTS, "initialize failed: %s", error["data"].get("detail", exc.cause)
            )
            return error
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
        with self._lock:
            self._in_flight[id(slot)] = slot
        try:
            self._forward(slot, request)
        finally:
            with self._lock:
                self._in_flight.pop(id(slot), None)

    def _forward(self, slot: Slot, request: Request) -> None:
        peer = self._peer
        assert peer is not None
        self._lists.asked.sent(request.method)
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
                if isinstance(exc, ResponseTooLarge):
                    log_too_large(exc)
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
            self._settle(request_id)
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
        """Carry a request of the server to the client with a ``u-`` id.

        A 2025-era message does not say which request of the client it serves; when
        exactly one is in flight (and the request is no ``ping``), that one waits for
        the client's answer (``waiting_for``, as a round of the 2026-07-28 path).
        """
        client_id = f"{SERVER_REQUEST_PREFIX}{next(self._counter)}"
        with self._lock:
            self._to_server[client_id] = request.id
            self._to_client[request.id] = client_id
            slots = list(self._in_flight.values())
            waiting = slots[0] if len(slots) == 1 and request.method != "ping" else None
            self._asked[client_id] = (time.monotonic(), waiting)
            if waiting is not None:
                waiting.waiting_for = Waiting.CLIENT
        if self._host.write_request(client_id, request.method, request.params):
            return
        with self._lock:
            self._to_server.pop(client_id, None)
            self._to_client.pop(request.id, None)
            self._settle(client_id)
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
            if self._lists.asked.tells(message.method):
                self._host.write_notification(message.method, message.params)
            return
        server_id = legacy.parse_cancelled(message.params)
        with self._lock:
            client_id = self._to_client.pop(server_id, None) if server_id is not None else None
            if client_id is not None:
                self._to_server.pop(client_id, None)
                self._settle(client_id)
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

    @property
    def form(self) -> PeerForm:
        peer = self._peer
        return peer.form if peer is not None else PeerForm.OTHER

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

    def _settle(self, client_id: str) -> None:
        """The server's request ``client_id`` ended; its slot waits for the upstream again unless
        another request of the server waits for the client for it. Called under the lock."""
        _asked, slot = self._asked.pop(client_id, (0.0, None))
        if slot is not None and all(other is not slot for _when, other in self._asked.values()):
            slot.waiting_for = Waiting.UPSTREAM

    def describe(self, wait: float = 0.5) -> UpstreamState:
        """The upstream's state for a thread dump, with the server's requests that wait for the
        client (none when the lock stays held ``wait`` seconds)."""
        peer = self._peer
        assert peer is not None, "the passthrough is not open"
        state = upstream_state(peer, f"MCP {self.protocol_version}, passed through")
        if not self._lock.acquire(timeout=wait):
            return state
        try:
            asked = tuple((client_id, when, False) for client_id, (when, _slot) in self._asked.items())
        finally:
            self._lock.release()
        return dataclasses.replace(state, client_requests=asked)
