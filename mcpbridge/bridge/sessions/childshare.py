"""A child process shared by the two eras' clients, and the quiet stderr of the probe.

A stdio child that refused a request of one era usually keeps running and answers
the other. :class:`StdioUpstream` gives each client a *seat* on the child: under
``--protocol auto`` the passthrough sends the client's ``initialize`` from its seat,
and after the refusal of a server of revision 2026-07-28 only, the modern
:class:`~mcpbridge.mcp.client.Client` takes the child over for ``server/discover``
(:meth:`StdioUpstream.modern_connect`). The other way round (``check``), the
passthrough takes the child over from the seat of a refused ``server/discover``
instead of starting the command again. A child that closed is started again.

The probe is quiet: the Python SDK 1.x logs the validation error of every request
type it knows for a method it does not know, about 95 lines on stderr whatever the
parameters. The stderr lines of the child wait for its answer to the probe
(:class:`_ProbeStderr`), and such a page becomes one line with its count.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

from ...mcp.cancel import CancelToken
from ...mcp.client import DEFAULT_MAX_DEPTH, Client
from ...mcp.errors import Closed, McpError
from ...mcp.jsonrpc import ErrorResponse, FrameError, Message, Notification
from ...mcp.transports import OnClosed, OnFrameError, OnMessage, PeerForm, Transport
from ...mcp.transports.framing import TooLong
from .era import ModernConnect, SignInGuard
from .upstream import _write_child_stderr

__all__ = ["PROBE_STDERR_BYTES", "PROBE_STDERR_LINES", "Seat", "StdioUpstream"]

log = logging.getLogger("mcpbridge.bridge")

#: The stderr lines of a child that wait for its answer to ``server/discover``: at most these bytes.
PROBE_STDERR_BYTES: Final = 64 * 1024
#: After a refused ``server/discover``, this many waiting stderr lines pass as they are; more
#: become one line with their count.
PROBE_STDERR_LINES: Final = 5


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
        self._owner: Seat | None = None
        self._targets: tuple[OnMessage, OnFrameError, OnClosed] | None = None
        self._held: list[Callable[[tuple[OnMessage, OnFrameError, OnClosed]], None]] = []
        self._started = False

    def seat(self) -> Seat:
        """A new seat that owns the child from now on; the former seat can only close itself."""
        with self._deliver:
            seat = Seat(self)
            self._owner = seat
            self._targets = None
            return seat

    def owns(self, seat: Seat) -> bool:
        return self._owner is seat

    def attach(
        self,
        seat: Seat,
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


class Seat(Transport):
    """One owner's view of a shared child: the probe's client, then the passthrough."""

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    @property
    def shared(self) -> _Shared:
        """The child of this seat, which a new seat can take over."""
        return self._shared

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
    def form(self) -> PeerForm:
        return self._shared.inner.form

    @property
    def exit_status(self) -> str | None:
        return self._shared.inner.exit_status


class StdioUpstream:
    """An upstream command for both eras.

    :meth:`connect` is the ``connect`` of the front end (the discover probe);
    :meth:`transport` is its :class:`~.era.LegacyUpstream`: it takes over the child
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
        from ...mcp.transports.stdio import StdioChildTransport

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
            max_depth=DEFAULT_MAX_DEPTH,
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
        # A seat, so that a modern client can take the child over after a refused initialize.
        return _Shared(self._child(self._stderr_sink)).seat()

    def modern_connect(self, refused: Transport, connect: ModernConnect) -> ModernConnect:
        """The connect of the modern client on the child of ``refused`` while it runs, else
        on a new child (the :meth:`connect` of this upstream; ``connect`` is not needed)."""

        def on_child(client_info: dict[str, Any], on_notification: Callable[[Notification], None]) -> Client:
            if not isinstance(refused, Seat) or refused.gone:
                return self.connect(client_info, on_notification)
            log.debug("the bridge keeps the upstream process of initialize for server/discover")
            client = Client(
                refused.shared.seat(),
                client_info=client_info,
                max_depth=DEFAULT_MAX_DEPTH,
                on_notification=on_notification,
            )
            client.start()
            return client

        return on_child
