"""The JSON-RPC peer under the upstream clients: ids, the pending table, deadlines, cancellation.

Theory of operation
-------------------

A :class:`Peer` sends requests over one :class:`~.transports.Transport` and
matches the answers to them. Every request gets the next integer id (1, 2,
3...) and an :class:`Entry` in the *pending table*, a dict from id to entry
guarded by one lock; each caller sleeps on a :class:`threading.Condition` of its
own thread (on that lock), so an answer wakes only its caller.

A request waits at most its time limit. One :class:`DeadlineTimer` thread fires
the deadline of a request while its :meth:`Transport.send` still runs (over
HTTP the send carries the whole exchange). A timeout and a cancellation wake the
caller and stop a send in progress; the caller then tells the server with
``notifications/cancelled``. When the transport closes, every pending request
fails at once with the error of the close.

Two peers build on it: :class:`~.client.Client` (MCP 2026-07-28: ``_meta``,
result types, listen streams, progress) and the raw 2025-era
:class:`~mcpbridge.mcp.client.legacypeer.LegacyPeer`, which adds nothing to the
messages. The lock guards decisions only: no I/O and no callback runs under it.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from ..cancel import NO_WAIT, CancelToken, WouldBlock
from ..deadline import Deadline
from ..droplog import DropLog
from ..errors import InvalidResponse, McpError, ResponseTooLarge, fresh
from ..ids import recover_id, shows_response
from ..jsonrpc import ErrorResponse, FrameError, Notification, Request, RequestId, Response
from ..text import escaped, format_duration
from ..transports import PeerForm, Transport, run_callback
from ..transports.framing import TooLong

__all__ = ["BadLine", "DeadlineTimer", "Entry", "Interrupt", "Outcome", "Peer", "bad_line"]

log = logging.getLogger("mcpbridge.upstream")

#: The timer thread's wait when no deadline is near (it wakes at once for a new one).
IDLE_WAIT: Final = 60.0
#: The wait for each thread of a peer at its close.
JOIN_TIMEOUT: Final = 2.0
#: The timer rebuilds its heap when more than half of it are removed deadlines.
_COMPACT_AT: Final = 64

Outcome = Response | ErrorResponse | McpError


class Interrupt(enum.Enum):
    """Why the caller of a request stopped waiting before its outcome; set on the thread that stopped it."""

    #: The caller's cancel token fired.
    CANCEL = "cancel"
    #: The request's deadline passed.
    TIMEOUT = "timeout"


class BadLine(NamedTuple):
    """What a line of the server that is not a valid message tells of itself."""

    #: Its id, when one could be read.
    id: RequestId | None
    #: It is shaped as a response: only then may it stand for the answer to a request.
    is_response: bool
    #: What it is, for a log line (its size or its fault, never its content).
    what: str
    #: The limit of the line in bytes when it is over that limit, else 0.
    limit: int = 0

    @property
    def answered(self) -> RequestId | None:
        """The id of the request that the line answers: ``None`` unless it is a response."""
        return self.id if self.is_response else None

    def error(self, prefix: str) -> InvalidResponse:
        """The error of the request that the line answers: :class:`ResponseTooLarge` for a line
        over the limit, else :class:`InvalidResponse`; its detail is ``prefix`` and what the line is."""
        detail = f"{prefix}the response is {self.what}"
        if self.limit:
            return ResponseTooLarge(detail, limit=self.limit)
        return InvalidResponse(detail)


def bad_line(error: FrameError | TooLong) -> BadLine:
    """Read what a line that is not a valid message tells of itself (see :class:`BadLine`)."""
    if isinstance(error, TooLong):
        return BadLine(
            recover_id(error.head, error.tail),
            shows_response(error.head),
            f"a line of {error.size} bytes, over the limit of {error.limit} bytes",
            error.limit,
        )
    return BadLine(error.id, error.is_response, f"a line that is {error.words}")


class Entry:
    """One request in flight. Its fields change only under the peer's lock."""

    __slots__ = (
        "id",
        "method",
        "outcome",
        "interrupted",
        "reason",
        "_token",
        "ready",
        "on_done",
        "notified",
        "sent",
        "removers",
    )

    def __init__(self, request_id: RequestId, method: str, ready: threading.Condition | None) -> None:
        self.id = request_id
        self.method = method
        self.outcome: Outcome | None = None
        #: Set when the caller stopped waiting (see :class:`Interrupt`).
        self.interrupted: Interrupt | None = None
        self.reason = ""
        self._token: CancelToken | None = None
        #: The caller of this request sleeps here: the condition of its thread on the
        #: peer's lock. An answer wakes only its own caller, not every caller in flight.
        #: ``None`` for a request whose caller does not wait (``Client.begin``).
        self.ready = ready
        #: Called once when the outcome is known (``Client.begin``); ``notified`` once it was.
        self.on_done: Callable[[], None] | None = None
        self.notified = False
        self.sent = False
        #: Remove the cancel callback and the deadline of a request that nobody waits for.
        self.removers: tuple[Callable[[], None], ...] = ()

    @property
    def token(self) -> CancelToken:
        """Given to :meth:`Transport.send`: fires on a cancellation or at the deadline."""
        token = self._token
        if token is None:
            token = self._token = CancelToken()
        return token

    def wake(self) -> None:
        """Wake the caller that waits for this entry (under the peer's lock)."""
        if self.ready is not None:
            self.ready.notify_all()

    def settled_locked(self) -> bool:
        """True once when a request of ``Client.begin`` has its outcome: then the caller notifies."""
        if self.on_done is None or self.notified or (self.outcome is None and self.interrupted is None):
            return False
        self.notified = True
        return True


class DeadlineTimer:
    """Fires callbacks at deadlines, on one thread named ``name``."""

    def __init__(self, name: str = "mcpbridge-upstream-timer") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, list[Callable[[], None] | None]]] = []
        self._removed = 0
        self._seq = itertools.count()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def add(self, deadline: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` at ``deadline`` (a :func:`time.monotonic` value); returns a remover."""
        cell: list[Callable[[], None] | None] = [callback]
        with self._lock:
            if self._stopped:
                return lambda: None
            if self._removed > _COMPACT_AT and self._removed * 2 > len(self._heap):
                self._heap = [item for item in self._heap if item[2][0] is not None]
                heapq.heapify(self._heap)
                self._removed = 0
            heapq.heappush(self._heap, (deadline, next(self._seq), cell))
            if self._heap[0][2] is cell:
                self._cond.notify()

        def remove() -> None:
            with self._lock:
                if cell[0] is not None:
                    cell[0] = None
                    self._removed += 1

        return remove

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("the timer thread did not stop in %s", format_duration(JOIN_TIMEOUT))

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    while self._heap and self._heap[0][2][0] is None:
                        heapq.heappop(self._heap)
                        self._removed -= 1
                    # Each wait below is a slice: the loop looks at the heap again after it.
                    if not self._heap:
                        self._cond.wait(IDLE_WAIT)
                        continue
                    delay = self._heap[0][0] - time.monotonic()
                    if delay <= 0:
                        break
                    self._cond.wait(delay)
                _, _, cell = heapq.heappop(self._heap)
                callback, cell[0] = cell[0], None
            if callback is not None:
                run_callback("a deadline", callback, log)


class Peer:
    """The pending table of one connection; see the module docstring.

    A subclass registers an :class:`Entry` under the id of
    :meth:`_next_request_id_locked` in ``_pending``, sends it with
    :meth:`_send_and_wait`, routes each answer with :meth:`_settle_locked`, and
    fails everything with :meth:`_fail_pending_locked` when the connection is lost.
    """

    def __init__(self, transport: Transport, *, timer_name: str, logger: logging.Logger) -> None:
        self._transport = transport
        self._log = logger
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._local = threading.local()
        self._timer = DeadlineTimer(timer_name)
        # Guarded by _cond:
        self._pending: dict[RequestId, Entry] = {}
        self._next_id = 1
        self._closed: McpError | None = None
        #: What the peer drops, one line per kind at most every 10 s (:class:`~.droplog.DropLog`).
        self._drops = DropLog(logger)

    @property
    def gone(self) -> bool:
        """True once the upstream server is gone for good (a child that closed its stdout)."""
        return self._transport.gone

    @property
    def exit_status(self) -> str | None:
        """How the upstream process ended (``"code 3"``, ``"signal 9"``), if known."""
        return self._transport.exit_status

    @property
    def form(self) -> PeerForm:
        """How the upstream server is reached (:attr:`Transport.form`), never its address."""
        return self._transport.form

    @property
    def closed(self) -> bool:
        """True once the connection closed: every request fails at once."""
        return self._closed is not None

    def rest(self) -> None:
        """The connection rests: the transport lets go of what it keeps for a busy one."""
        self._transport.rest()

    def kill(self) -> None:
        """Kill the upstream process group at once (a watchdog's last step); waits for nothing.

        Only the stdio transport has a process to kill; for others this does nothing.
        """
        kill = getattr(self._transport, "kill", None)
        if callable(kill):
            kill()

    def _thread_condition(self) -> threading.Condition:
        """The condition on the peer's lock that the calling thread waits on (made once per thread).

        A thread waits for one request at a time; a wake-up meant for another of
        its requests is harmless, because each wait checks its own entry.
        """
        ready: threading.Condition | None = getattr(self._local, "ready", None)
        if ready is None:
            ready = threading.Condition(self._lock)
            self._local.ready = ready
        return ready

    def _drop_unmatched(self, what: str, request_id: RequestId) -> None:
        """Log ``what`` with an id that no pending request has: late (debug), or never sent (warning).

        The ids of the peer are the integers from 1: one below the next id was sent.
        """
        with self._lock:
            sent = isinstance(request_id, int) and 0 < request_id < self._next_id
        if sent:
            self._drops(
                logging.DEBUG,
                "dropped late responses",
                "dropped %s with the id %s: its request had ended "
                "(a time limit, a cancellation, an earlier answer)",
                what,
                escaped(str(request_id)),
            )
        else:
            self._drops(
                logging.WARNING,
                "dropped responses to unknown ids",
                "dropped %s with the id %s: the bridge sent no request with that id",
                what,
                escaped(str(request_id)),
            )

    def _drop_error_without_id(self, code: int) -> None:
        """Log an error response without an id: the server could not read a message of the peer."""
        self._drops(
            logging.WARNING,
            "dropped error responses without an id",
            "dropped an error response without an id (error %d): the upstream server could not tell "
            "which request it answers",
            code,
        )

    def _next_request_id_locked(self) -> int:
        request_id = self._next_id
        self._next_id += 1
        return request_id

    def _send_and_wait(
        self, entry: Entry, message: Request, deadline: float, cancel: CancelToken | None
    ) -> tuple[bool, McpError | None, Outcome | None, Interrupt | None, str]:
        """Send ``message`` for ``entry`` and wait until its answer, the deadline or ``cancel``.

        Returns (sent, the error of the send, the outcome, why the wait was
        interrupted, the reason of a cancellation); the entry is out of the table.
        """
        send_token = entry.token  # made before an interrupt can fire it
        ready = entry.ready
        assert ready is not None
        remove_cancel: Callable[[], None] | None = None
        if cancel is not None:
            token = cancel
            remove_cancel = cancel.add_callback(
                lambda: self._interrupt(entry, Interrupt.CANCEL, token.reason)
            )
        remove_deadline = self._timer.add(deadline, lambda: self._interrupt(entry, Interrupt.TIMEOUT, ""))
        try:
            sent = False
            send_error: McpError | None = None
            with self._cond:
                interrupted_before = entry.interrupted is not None
            if not interrupted_before:
                outer = getattr(self._local, "entry", None)
                self._local.entry = entry
                try:
                    self._transport.send(message, cancel=send_token)
                    sent = True
                except McpError as exc:
                    send_error = exc
                finally:
                    self._local.entry = outer
            with self._cond:
                if sent and not Deadline(None, until=deadline).wait_for(
                    ready, lambda: entry.outcome is not None or entry.interrupted is not None
                ):
                    entry.interrupted = Interrupt.TIMEOUT
                if self._pending.get(entry.id) is entry:
                    del self._pending[entry.id]
                outcome, why, reason = entry.outcome, entry.interrupted, entry.reason
        finally:
            if remove_cancel is not None:
                remove_cancel()
            remove_deadline()
        return sent, send_error, outcome, why, reason

    def _notify_done(self, entry: Entry) -> None:
        """Tell the caller that does not wait that its request has an outcome (no lock held)."""
        # Dropped here: it refers to the call, which refers to the entry. Without the
        # cycle the outcome (a large result and its line) goes as soon as the caller is done.
        on_done, entry.on_done = entry.on_done, None
        if on_done is not None:
            run_callback("the end of a request", on_done, self._log)
        # After the caller answered: a deadline or a cancellation that fires in between
        # finds the outcome there and does nothing.
        with self._lock:
            removers, entry.removers = entry.removers, ()
        for remove in removers:
            remove()

    def _interrupt(self, entry: Entry, why: Interrupt, reason: str) -> None:
        """A cancellation or the deadline: wake the waiter, stop a send in progress."""
        with self._lock:
            if entry.outcome is not None or entry.interrupted is not None:
                return
            entry.interrupted = why
            entry.reason = reason
            if self._pending.get(entry.id) is entry:
                del self._pending[entry.id]
            entry.wake()
            notify = entry.settled_locked()
            token = entry._token
        if token is not None:
            token.cancel(reason or why.value)
        if notify:
            self._notify_done(entry)

    def _send_cancelled(self, request_id: RequestId, reason: str, *, wait: bool = True) -> None:
        """Tell the server that a request is over; ``wait=False`` raises WouldBlock instead of waiting."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason:
            params["reason"] = reason
        try:
            note = Notification("notifications/cancelled", params)
            self._transport.send(note, cancel=None if wait else NO_WAIT)
        except WouldBlock:
            if not wait:
                raise
            self._drop_cancelled(request_id, "no room")
        except McpError as exc:
            self._drop_cancelled(request_id, exc.cause)

    def _drop_cancelled(self, request_id: RequestId, why: str) -> None:
        self._drops(
            logging.DEBUG,
            "dropped cancellations for the upstream server",
            "notifications/cancelled for %s was not sent: %s",
            escaped(str(request_id)),
            why,
        )

    def _settle_locked(self, request_id: RequestId, outcome: Callable[[Entry], Outcome]) -> Entry | None:
        """Resolve the pending request ``request_id`` with ``outcome(entry)``; ``None``: not pending.

        Returns the entry; the caller runs :meth:`_notify_done` after the lock when
        :meth:`Entry.settled_locked` said so.
        """
        entry = self._pending.pop(request_id, None)
        if entry is not None:
            entry.outcome = outcome(entry)
            entry.wake()
        return entry

    def _fail_pending_locked(self, error: McpError) -> list[Entry]:
        """Fail every pending request; return the ones to notify (after the lock)."""
        if self._closed is None:
            self._closed = error
        done: list[Entry] = []
        for entry in self._pending.values():
            if entry.outcome is None and entry.interrupted is None:
                entry.outcome = fresh(error)
            entry.wake()
            if entry.settled_locked():
                done.append(entry)
        self._pending.clear()
        return done
