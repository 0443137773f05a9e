"""The initialize of a client connection: it starts the upstream server and decides its era.

The front end (:class:`~.frontend.Frontend`) owns one :class:`Initializer`, and
with it the state of the connection (:class:`~.lifecycle.State`) and its lock.
The reader asks it to start an ``initialize`` (:meth:`Initializer.start`) and to
hold the requests that come meanwhile (:meth:`Initializer.hold`); the rest of the
work runs on the slot of the initialize (:meth:`Initializer._initialize`). It
needs of the front end only what :class:`InitializeHost` says: what a session
needs, and what the lifecycle table does with a request.

The slot starts the upstream server (:meth:`Initializer._start_upstream`). Under
``--protocol auto`` it sends the client's ``initialize`` first (module era): a server
that answers it, and each server under ``--protocol legacy``, gets a
:class:`~.sessions.passthrough.LegacyPassthrough` that carries the connection from then on
(:meth:`Initializer._pass_through`); one that refuses it as a 2026-07-28 server does,
and each server under ``--protocol 2026-07-28``, gets ``server/discover`` and a
:class:`~.sessions.session.ModernSession`.

The rules of the state that the lifecycle table does not show:

* Only the ``initialize`` that moves the state from ``AWAITING`` (or ``FAILED``)
  to ``INITIALIZING`` starts the upstream server; its slot is the one that may
  end that state (:meth:`Initializer._conclude_locked`).
* Whatever ends an initialize (an error, a bug, a cancel, a time limit), the
  state leaves ``INITIALIZING`` before its answer is written: to ``READY``
  (``READY_2025`` for a 2025-era server), to ``FAILED`` after an error, to
  ``AWAITING`` after a cancel. The client's next requests can come at once.
* The requests that come while initialize runs wait in :attr:`Initializer._held`
  with a slot each (no thread), and go on after its answer as the state that
  followed says (:meth:`Initializer._release_held`).
* Once the end of the connection took the upstream
  (:meth:`Initializer.take_upstream`), an initialize that ends later closes the
  upstream that it started and keeps the state.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from ...mcp.client import Client
from ...mcp.droplog import DropLog
from ...mcp.errorbase import BridgeError
from ...mcp.errors import Cancelled, Closed, McpError
from ...mcp.jsonrpc import Notification, Request
from ...mcp.protocol import MODERN
from ..rules import errortable, legacy, revisions, translate
from ..sessions.passthrough import (
    FAILED_STARTS,
    LegacyPassthrough,
    LegacyUpstream,
    OpenFailed,
    log_spawn_failed,
    stopped_during,
)
from ..sessions.session import (
    ModernSession,
    SessionHost,
    UpstreamSession,
    discover_error,
    discover_failure_text,
    forward_upstream_log,
)
from . import lifecycle
from .lifecycle import END_STATES, Action, State
from .options import Connect, UpstreamRevision
from .output import Output, Slot, response_frame_locked
from .pending import WaitEnded, WaitReason
from .slots import Slots

__all__ = ["InitializeHost", "Initializer"]

log = logging.getLogger("mcpbridge.bridge")

#: A request that waits for the end of initialize: its slot, the request and its class.
_Held = tuple[Slot, Request, legacy.MethodClass]


class InitializeHost(SessionHost, Protocol):
    """What the initialize needs of the front end: what a session needs (the session of a
    2026-07-28 server gets the front end as its host), the parts of the connection, and
    the lifecycle table's action."""

    @property
    def output(self) -> Output: ...

    @property
    def slots(self) -> Slots:
        """The requests of the client in flight."""
        ...

    @property
    def drops(self) -> DropLog:
        """The log lines of the connection that the client can make repeat."""
        ...

    def act(self, action: Action, request: Request, kind: legacy.MethodClass, slot: Slot | None) -> None:
        """Do ``action`` of the lifecycle table with ``request``, on ``slot`` when it has one."""
        ...


class Initializer:
    """The initialize of one connection, and the state of the connection; see the module docstring."""

    def __init__(self, host: InitializeHost, connect: Connect, legacy: LegacyUpstream | None) -> None:
        self._host = host
        #: The parts of the connection that the front end owns.
        self.output, self.options, self.slots = host.output, host.options, host.slots
        self.lists, self.drops = host.lists, host.drops
        self._connect = connect
        #: How to reach a 2025-era upstream; ``None``: the bridge never falls back.
        self._legacy = legacy
        #: Set when the upstream speaks the 2025 era: then it carries every message in READY.
        self._passthrough: LegacyPassthrough | None = None
        #: Set when the upstream speaks 2026-07-28 (a successful discover).
        self._session: ModernSession | None = None
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
        #: The revision that the client speaks and the profile of its host (from initialize).
        self._revision = revisions.LATEST
        self._profile = revisions.VSCODE
        self._client_kinds_caps: dict[str, Any] = {}
        self._upstream_caps: dict[str, Any] = {}
        self._init_written = False
        self._declared: translate.Declared | None = None

    # ------------------------------------------------------------ the reader

    @property
    def state(self) -> State:
        """The state of the connection."""
        return self._state

    @property
    def session(self) -> ModernSession | None:
        """The session of a 2026-07-28 server, once its initialize succeeded."""
        return self._session

    @property
    def passthrough(self) -> LegacyPassthrough | None:
        """The passthrough to a 2025-era server, once its initialize succeeded."""
        return self._passthrough

    @property
    def upstream(self) -> UpstreamSession | None:
        """The session of the upstream server once initialize succeeded."""
        return self._session if self._session is not None else self._passthrough

    @property
    def failure(self) -> str:
        """The cause of the last initialize that failed."""
        return self._failure

    @property
    def result_written(self) -> bool:
        """The result of initialize went to the client."""
        return self._init_written

    @property
    def declared(self) -> translate.Declared | None:
        """The notifications that the upstream server declared, once initialize succeeded."""
        return self._declared

    @property
    def revision(self) -> revisions.Revision:
        return self._revision

    @property
    def profile(self) -> revisions.Profile:
        return self._profile

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._client_kinds_caps

    @property
    def upstream_capabilities(self) -> dict[str, Any]:
        return self._upstream_caps

    @property
    def holds(self) -> bool:
        """Requests wait for the end of an initialize."""
        return bool(self._held)

    def start(self, request: Request) -> bool:
        """Start the upstream server on a slot for ``request``; False when the state allows no
        initialize (the client gets ``already_initialized``)."""
        with self._state_lock:
            before = self._state
            won = before in (State.AWAITING, State.FAILED)
            if won:
                self._state = State.INITIALIZING
                self._no_initialize.clear()
        if not won:
            return False
        slot = self.slots.admit(request)
        with self._state_lock:
            if slot is None:
                if self._state is State.INITIALIZING:
                    self._state = before
                self._no_initialize.set()
                return True
            self._init_slot = slot
        self.slots.submit(slot, request, self._initialize)
        return True

    def hold(self, slot: Slot, request: Request, kind: legacy.MethodClass) -> State | None:
        """Hold ``request`` on ``slot`` while an initialize runs (``None``); else the state whose
        action it gets."""
        with self._state_lock:
            state = self._state
            if state is State.INITIALIZING:
                self._held.append((slot, request, kind))
                return None
        return state

    def wait_ended(self, timeout: float) -> bool:
        """Wait at most ``timeout`` s until no initialize runs; False on the time limit."""
        return self._no_initialize.wait(timeout)

    def enter(self, state: State) -> bool:
        """Move to the end state ``state``; False when the connection was ending already."""
        with self._state_lock:
            if self._state in END_STATES:
                return False
            self._state = state
            return True

    def take_upstream(self) -> UpstreamSession | None:
        """The end of the connection takes the upstream to close it: an initialize that ends
        later closes its own."""
        with self._state_lock:
            self._upstream_taken = True
            return self.upstream

    # ------------------------------------------------------ the initialize slot

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
        connect = self._connect
        passes = self.options.protocol in (UpstreamRevision.LEGACY, UpstreamRevision.AUTO)
        if self._legacy is not None and passes:
            # None: the passthrough carries the connection, or the initialize failed.
            modern = self._pass_through(slot, request)
            if modern is None:
                return
            connect = modern
        try:
            client = connect(params.client_info, self._on_upstream_notification)
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
        session = ModernSession(client, self._host, discover_result=result)
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
        def frames() -> list[bytes]:
            # Marked in the same step as the write: the client may send
            # notifications/initialized the moment it reads the result.
            data = response_frame_locked(slot, init)
            if data:
                self._init_written = True
            return [data]

        self.output.write_locked(frames)

    # ------------------------------------------------- 2025-era upstream

    def _pass_through(self, slot: Slot, request: Request) -> Connect | None:
        """Send the client's initialize upstream: when the server takes it, a LegacyPassthrough
        carries the connection from now on; else the connect of server/discover, or None."""
        assert self._legacy is not None
        passthrough = LegacyPassthrough(
            self.output, self._legacy, self.options, lists=self.lists, drops=self.drops
        )
        first = self.options.protocol is UpstreamRevision.AUTO
        try:
            result = passthrough.open(request.params, slot.cancel, first=first)
        except OpenFailed as failed:
            self._initialize_failed(slot, failed.error)
            return None
        except Exception:
            passthrough.close(self.options.shutdown_grace)
            raise
        if result is None:
            return passthrough.modern_connect(self._connect)
        with self._state_lock:
            closing = self._state is State.LOST or self._upstream_taken
            if not closing:
                self._passthrough = passthrough
                self._conclude_locked(slot, State.READY_2025)
        if closing:
            passthrough.close(self.options.shutdown_grace)
            return None
        self._write_initialize_result(slot, result)
        self._release_held(State.READY_2025)
        return None

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

    def _release_held(self, state: State) -> None:
        """Initialize ended in ``state``: do with each held request what that state does."""
        with self._state_lock:
            held, self._held = self._held, []
        for slot, request, kind in held:
            if slot.cancel.cancelled:
                self.slots.release(slot)
            else:
                self._host.act(lifecycle.action(state, kind), request, kind, slot)

    def _on_upstream_notification(self, message: Notification) -> None:
        forward_upstream_log(self.output, self._host.log_level, message)


def _named_error(exc: Exception) -> dict[str, Any] | None:
    """The error that the client gets for ``exc``, which ended an initialize; ``None`` for a bug.

    A canceled initialize gets no response (the output writes nothing for a canceled slot).
    """
    if isinstance(exc, McpError):
        return errortable.error_from_mcp(exc)
    if isinstance(exc, WaitEnded):  # the consent of the client to a sign-in
        timed_out = exc.reason is WaitReason.TIMEOUT
        return errortable.error_object("input_timeout" if timed_out else "not_connected")
    cause = getattr(exc, "cause", None)
    if isinstance(exc, BridgeError) and isinstance(cause, str) and cause in errortable.ERRORS:
        return errortable.error_object(cause)
    return None


