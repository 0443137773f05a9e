"""The table of the bridge's own requests to the client (ids ``b-1``, ``b-2``, ...).

Rules:

* The ids are strings with the prefix ``b-`` and a per-connection counter, so
  they never equal a numeric id of the client.
* A slot puts every entry of a round into the table before the first request
  goes out, so the reader never sees an answer without its entry.
* The reader resolves an answer at once under the condition's lock and wakes
  the slot. A numeric, null, unknown, unprefixed or repeated id is dropped.
  Only a response is an answer: a request or a notification of the client
  with a ``b-`` id, valid or not, resolves nothing.
* A slot waits with a time limit. On cancellation, time limit, end of input or
  loss of the upstream server it removes its entries; the caller then sends
  ``notifications/cancelled`` for the ones that got no answer.
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ...mcp.cancel import CancelToken
from ...mcp.deadline import Deadline
from ...mcp.errorbase import BridgeError
from ...mcp.jsonrpc import RequestId
from ..rules.answers import BAD_LINE, ClientError
from .output import Host

if TYPE_CHECKING:
    from .dumptext import PendingState

__all__ = ["BAD_LINE", "ClientError", "PendingAnswers", "WaitEnded", "WaitReason"]

PREFIX: Final = "b-"


Answer = Any  # a result value, a ClientError, or BAD_LINE


class WaitReason(str, enum.Enum):
    """Why a wait for the client's answers ended early."""

    CANCELED = "canceled"
    TIMEOUT = "timeout"
    #: The table closed: the end of the connection.
    CLOSED = "closed"
    #: The caller no longer needs the answers (see :meth:`PendingAnswers.wait`'s ``still``).
    OBSOLETE = "obsolete"


class WaitEnded(BridgeError):
    """The wait for answers ended early; ``reason`` says why."""

    def __init__(self, reason: WaitReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


class PendingAnswers:
    """The ``b-`` pending table of one connection."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._counter = itertools.count(1)
        self._entries: dict[str, Answer | None] = {}
        #: When each entry was made (the clock of :func:`time.monotonic`), for a thread dump.
        self._asked_at: dict[str, float] = {}
        self._closed = False

    def new_ids(self, count: int) -> list[str]:
        """Reserve ``count`` ids and put their entries into the table."""
        with self._cond:
            ids = [f"{PREFIX}{next(self._counter)}" for _ in range(count)]
            now = time.monotonic()
            for request_id in ids:
                self._entries[request_id] = None
                self._asked_at[request_id] = now
            return ids

    def resolve(self, request_id: RequestId | None, answer: Answer) -> bool:
        """Give the answer to its entry; tell whether it was taken."""
        if not isinstance(request_id, str) or not request_id.startswith(PREFIX):
            return False
        with self._cond:
            if request_id not in self._entries or self._entries[request_id] is not None:
                return False
            self._entries[request_id] = answer
            self._cond.notify_all()
            return True

    def wait(self, ids: list[str], *, timeout: float, cancel: CancelToken) -> dict[str, Answer]:
        """Wait until every id has its answer.

        Raises:
            WaitEnded: canceled, the time limit passed, or the table closed.
        """
        deadline = Deadline(timeout)
        remove = cancel.add_callback(self._wake)
        try:
            with self._cond:
                while True:
                    if all(self._entries.get(i) is not None for i in ids):
                        return {i: self._entries[i] for i in ids}
                    if cancel.cancelled:
                        raise WaitEnded(WaitReason.CANCELED)
                    if self._closed:
                        raise WaitEnded(WaitReason.CLOSED)
                    if not deadline.wait(self._cond):
                        raise WaitEnded(WaitReason.TIMEOUT)
        finally:
            remove()

    def remove(self, ids: list[str]) -> list[str]:
        """Remove the entries; return the ids that had no answer."""
        with self._cond:
            unanswered = [i for i in ids if i in self._entries and self._entries[i] is None]
            for request_id in ids:
                self._entries.pop(request_id, None)
                self._asked_at.pop(request_id, None)
            return unanswered

    def ask(
        self,
        output: Host,
        requests: Sequence[tuple[str, dict[str, Any] | None]],
        *,
        timeout: float,
        cancel: CancelToken,
        closed_reason: Callable[[], str] | None = None,
        still: tuple[float, Callable[[], bool]] | None = None,
    ) -> list[Answer]:
        """Send ``requests`` (method, params) to the client and wait for all their answers.

        On a cancellation or the time limit, and at the end of the connection when
        ``closed_reason`` gives the reason, the client gets ``notifications/cancelled``
        for each request that has no answer. ``still``: (seconds, check): every so many
        seconds without all answers, ``check()`` tells whether they are still wanted.

        Raises:
            WaitEnded: ``canceled``, ``timeout``, ``closed`` or ``obsolete`` (no longer wanted).
        """
        ids = self.new_ids(len(requests))
        try:
            for request_id, (method, params) in zip(ids, requests, strict=True):
                output.write_request(request_id, method, params)
            try:
                got = self._wait_while(ids, timeout=timeout, cancel=cancel, still=still)
            except WaitEnded as ended:
                if ended.reason is WaitReason.TIMEOUT:
                    text = "no answer in time"
                elif ended.reason is WaitReason.OBSOLETE:
                    text = "the answer is no longer needed"
                elif ended.reason is WaitReason.CANCELED:
                    text = cancel.reason or "the client canceled the request"
                elif closed_reason is not None:
                    text = closed_reason()
                else:
                    raise
                for request_id in self.remove(ids):
                    output.write_notification(
                        "notifications/cancelled", {"requestId": request_id, "reason": text}
                    )
                raise
        finally:
            self.remove(ids)
        return [got[request_id] for request_id in ids]

    def describe(self, wait: float) -> PendingState | None:
        """The entries of the table, for a thread dump; ``None`` when the lock stays held ``wait`` s."""
        from .dumptext import PendingState  # loaded at the first dump (see dumptext)

        if not self._cond.acquire(timeout=wait):
            return None
        try:
            entries = tuple(
                (request_id, self._asked_at[request_id], answer is not None)
                for request_id, answer in self._entries.items()
            )
        finally:
            self._cond.release()
        return PendingState(entries)

    def _wait_while(
        self,
        ids: list[str],
        *,
        timeout: float,
        cancel: CancelToken,
        still: tuple[float, Callable[[], bool]] | None,
    ) -> dict[str, Answer]:
        """:meth:`wait`, in slices between which ``still`` checks (outside the lock) that the
        answers are still wanted."""
        if still is None:
            return self.wait(ids, timeout=timeout, cancel=cancel)
        every, check = still
        deadline = Deadline(timeout)
        while True:
            last = deadline.remaining <= every
            try:
                return self.wait(ids, timeout=deadline.at_most(every), cancel=cancel)
            except WaitEnded as ended:
                if ended.reason is not WaitReason.TIMEOUT or last:
                    raise
            if not check():
                raise WaitEnded(WaitReason.OBSOLETE)

    def close(self) -> None:
        """Wake every waiter; no wait succeeds any more unless already answered."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._entries)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
