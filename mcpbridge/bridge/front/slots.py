"""The requests of the client in flight: admission at the limit, the slot threads, the end.

Theory of operation
-------------------

The front end hands each request that it does not answer itself to
:meth:`Slots.admit`. A request gets a :class:`~.output.Slot` while fewer than
``max_in_flight`` are in flight and no request in flight has its id; else it
gets ``too_many_requests`` (or ``invalid_request_shape`` for an id in use) at
once, and the reader goes on reading. The work of a slot runs on a task of a
bounded ``ThreadPoolExecutor`` (threads ``mcpbridge-slot``) and the slot is
released when the work ends; a slot that was answered without a slot thread
(the fast path, the list cache) is released by whoever answered it.

The executor starts a slot thread whenever a request finds none idle, and
keeps its threads: a burst leaves them behind, and under a steady load their
number creeps up (a response reaches the client before its thread is idle
again, so the client's next request may find none). After
:data:`RETIRE_AFTER` seconds without a request in flight the watcher retires
them (:meth:`Slots.retire_idle`): the executor is shut down and its threads
joined, and the next request starts a fresh one. A connection that rests is
back to the threads it started with.

At the end of the connection the front end cancels every slot
(:meth:`Slots.cancel_all`), waits a bounded grace for them to end
(:meth:`Slots.drain`) and shuts the executor down (:meth:`Slots.close`). The
watcher asks :meth:`Slots.report_long` for the log lines of requests that wait
for a long time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ...mcp.deadline import Deadline
from ...mcp.droplog import DropLog
from ...mcp.jsonrpc import Request, RequestId
from ...mcp.text import format_duration, printable
from ..rules import errortable
from .output import Output, Slot, Waiting

if TYPE_CHECKING:
    from .dumptext import SlotsState

__all__ = ["Slots", "Work"]

log = logging.getLogger("mcpbridge.bridge")

#: The work of a slot: it runs on a slot thread and answers the slot.
Work = Callable[[Slot, Request], None]

#: The time between two log lines of a request that still waits.
_REPORT_EVERY = 30.0
#: The slot threads end after this many seconds without a request in flight.
RETIRE_AFTER = 30.0
#: The longest wait for the slot threads that retire.
JOIN_TIMEOUT = 2.0


class Slots:
    """The slots of one connection; see the module docstring.

    :param output: the client's output, for the errors of refused and failed requests.
    :param limit: the most requests in flight (``Options.max_in_flight``).
    :param drops: the log of the connection's refusals, one line a kind every 10 s.
    :param refuse: writes the error of a refused request (by default to ``output``; the
        front end gathers those of a batch).
    """

    def __init__(
        self,
        output: Output,
        limit: int,
        drops: DropLog,
        refuse: Callable[[RequestId, dict[str, Any]], None] | None = None,
    ) -> None:
        self._output = output
        self._refuse = refuse if refuse is not None else output.write_error
        self._limit = limit
        self._drops = drops
        self._slots: dict[RequestId, Slot] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        #: Set (under the lock) once the end waits for the slots: no retirement then.
        self._draining = False
        #: The threads of the current executor, as each starts (its initializer adds it).
        self._threads: list[threading.Thread] = []
        self._executor = self._new_executor()
        #: A request was admitted since the executor was made (under the lock): it may have threads.
        self._used = False
        #: When the last slot ended (the clock of :func:`time.monotonic`).
        self._quiet_since = time.monotonic()
        #: Set (under the lock) by :meth:`close`: no executor is made any more.
        self._closed = False

    def _new_executor(self) -> ThreadPoolExecutor:
        threads: list[threading.Thread] = []
        self._threads = threads
        return ThreadPoolExecutor(
            max_workers=self._limit,
            thread_name_prefix="mcpbridge-slot",
            initializer=lambda: threads.append(threading.current_thread()),
        )

    def get(self, request_id: RequestId) -> Slot | None:
        """The slot of the request ``request_id`` in flight, if any."""
        with self._lock:
            return self._slots.get(request_id)

    def admit(self, request: Request) -> Slot | None:
        """A new slot for ``request``; ``None`` when it was refused (and answered with an error)."""
        with self._lock:
            # A second request with the id of one in flight would hide the first from
            # the count of the limit and from its cancellation: refuse it.
            in_use = request.id in self._slots
            if not in_use and len(self._slots) < self._limit:
                slot = Slot(request.id, request.method)
                self._slots[request.id] = slot
                self._used = True
                return slot
        why = "its id is in use by a request in flight" if in_use else "too many requests in flight"
        self._drops(
            logging.WARNING,
            f"rejected requests: {why}",
            "rejected request %s (%s): %s",
            printable(request.id),
            printable(request.method),
            why,
        )
        cause = "invalid_request_shape" if in_use else "too_many_requests"
        self._refuse(request.id, errortable.error_object(cause))
        return None

    def submit(self, slot: Slot, request: Request, work: Work) -> None:
        """Run ``work`` on a slot thread; the slot is released when it ends."""
        # The slot is in flight since admit: retire_idle does not swap the executor meanwhile.
        try:
            self._executor.submit(self._run, slot, request, work)
        except RuntimeError:  # the executor shut down: the connection is closing
            self.release(slot)

    def _run(self, slot: Slot, request: Request, work: Work) -> None:
        try:
            work(slot, request)
        except Exception as exc:  # noqa: BLE001 - a bug must not kill the slot silently
            self.fail(slot, exc)
        finally:
            self.release(slot)

    def fail(self, slot: Slot, exc: Exception) -> None:
        """A bug of the bridge failed the request of ``slot``: an error line, and the error for the client."""
        self._drops(
            logging.ERROR,
            "requests that failed inside the bridge",
            "request %s (%s) failed inside the bridge",
            printable(slot.id),
            slot.method,
            exc_info=exc,
        )
        self._output.respond_error(slot, errortable.internal_error())

    def release(self, slot: Slot) -> None:
        """The slot ended: its id is free again (and its batch, if any, waits for it no more)."""
        if slot.batch is not None:
            self._output.slot_ended(slot)
        with self._lock:
            if self._slots.get(slot.id) is slot:
                del self._slots[slot.id]
                if not self._slots:
                    self._quiet_since = time.monotonic()
                    self._idle.notify_all()

    def retire_idle(self) -> bool:
        """End the slot threads after :data:`RETIRE_AFTER` seconds without a request in flight.

        Called by the watcher. Returns True when it retired them.
        """
        with self._lock:
            quiet = time.monotonic() - self._quiet_since
            if self._slots or self._draining or self._closed or not self._used or quiet < RETIRE_AFTER:
                return False
            retired, threads = self._executor, self._threads
            self._executor = self._new_executor()
            self._used = False
        # No slot is in flight: each thread is idle or ends its last task's bookkeeping now.
        retired.shutdown(wait=False)
        deadline = Deadline(JOIN_TIMEOUT)
        alive = sum(not deadline.join(thread) for thread in threads)
        if alive:
            log.warning("%d slot threads did not end in %s", alive, format_duration(JOIN_TIMEOUT))
        log.debug("the slot threads ended after %d s without a request", int(quiet))
        return True

    def cancel_all(self, reason: str, error: dict[str, Any] | None = None) -> None:
        """Cancel every slot in flight, first answering each with ``error`` when one is given.

        The errors only join the output's queue: the caller (the watcher) never waits for
        a client that reads nothing; the close of the output gives them its grace.
        """
        with self._lock:
            slots = list(self._slots.values())
        for slot in slots:
            if error is not None:
                self._output.respond_error(slot, error, wait=False)
            slot.cancel.cancel(reason)

    def report_long(self) -> None:
        """Log the requests that wait for a long time (first after 10 s, then every 30 s).

        Many requests that wait give one line of each kind every 10 s (the drop log) and a count.
        """
        now = time.monotonic()
        with self._lock:
            slots = list(self._slots.values())
        for slot in slots:
            waited = now - slot.started
            if waited >= slot.next_report:
                slot.next_report += _REPORT_EVERY
                if slot.waiting_for is Waiting.CLIENT:
                    kind = "requests that wait long for the client"
                    text = (
                        "still waiting for the answers of the client to the input requests of %s "
                        "(request %s, %d s)"
                    )
                else:
                    kind = "requests that wait long for the upstream server"
                    text = "still waiting for the upstream server: %s (request %s, %d s)"
                self._drops(logging.INFO, kind, text, slot.method, printable(slot.id), int(waited))

    def describe(self, wait: float) -> SlotsState | None:
        """The requests in flight, for a thread dump; ``None`` when the lock stays held ``wait`` s."""
        from .dumptext import RequestState, SlotsState  # loaded at the first dump (see dumptext)

        if not self._lock.acquire(timeout=wait):
            return None
        try:
            slots = list(self._slots.values())
        finally:
            self._lock.release()
        requests = (
            RequestState(slot.id, slot.method, slot.started, slot.waiting_for.value) for slot in slots
        )
        return SlotsState(self._limit, tuple(requests))

    def wait_empty(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds until no request is in flight; tell whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._slots, timeout)

    def drain(self, grace: float) -> None:
        """Wait at most ``grace`` seconds for every slot to end (the slot threads stay)."""
        with self._lock:
            self._draining = True
        if not self.wait_empty(grace):
            with self._lock:
                left = len(self._slots)
            log.debug("%d requests did not stop in the grace period", left)

    def close(self) -> None:
        """Shut the executor down without waiting; a later :meth:`submit` releases its slot."""
        with self._lock:
            self._closed = True
            executor = self._executor
        executor.shutdown(wait=False, cancel_futures=True)
