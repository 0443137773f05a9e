"""A deadline: the one way a bounded wait of the package counts down.

Every wait of the package is bounded. A wait that may wake several times (a
condition notified for other reasons, a socket read in pieces, threads joined
one after the other) keeps one :class:`Deadline` and asks it for the time that
remains, instead of computing ``deadline - time.monotonic()`` by hand each
time: the clock is read in one place, a remaining time is never negative, and
each wait returns whether it ended in time, so that no caller ignores a timeout.
What a caller does when the deadline passes (the error it raises, and its name)
stays the caller's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["Deadline"]

_INFINITE: Final = float("inf")


class Deadline:
    """A point in time ``seconds`` from now on the monotonic clock.

    ``seconds`` of ``None`` is no deadline: :attr:`remaining` is infinite and every
    wait waits until it is woken. ``until``, a time of ``clock``, ends the deadline
    sooner when it comes first: the deadline of a caller that gives it as a time
    (``Deadline(None, until=t)`` is that time alone). ``clock`` is
    :func:`time.monotonic` but for tests.
    """

    __slots__ = ("_at", "_clock", "_span")

    def __init__(
        self,
        seconds: float | None,
        *,
        until: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        now = clock()
        at = _INFINITE if seconds is None else now + seconds
        self._at = at if until is None else min(at, until)
        self._span = max(0.0, self._at - now)

    @property
    def span(self) -> float:
        """The seconds the deadline had when it was made, never below 0 (infinite without a
        deadline): the time limit that an error message names."""
        return self._span

    @property
    def remaining(self) -> float:
        """The seconds left, never below 0 (infinite without a deadline)."""
        return max(0.0, self._at - self._clock())

    @property
    def expired(self) -> bool:
        return self._clock() >= self._at

    def at_most(self, seconds: float) -> float:
        """``seconds``, or the time that remains when that is shorter (a slice of a longer wait)."""
        return min(seconds, self.remaining)

    def _timeout(self) -> float | None:
        remaining = self.remaining
        return None if remaining == _INFINITE else remaining

    def wait(self, condition: threading.Condition) -> bool:
        """Wait once on ``condition`` (whose lock the caller holds) until it is notified or the
        deadline passes; False when the deadline had passed."""
        if self.expired:
            return False
        condition.wait(self._timeout())
        return True

    def wait_for(self, condition: threading.Condition, predicate: Callable[[], bool]) -> bool:
        """Wait on ``condition`` (held) until ``predicate()`` holds; False when the deadline
        passed first."""
        return condition.wait_for(predicate, self._timeout())

    def wait_event(self, event: threading.Event) -> bool:
        """Wait until ``event`` is set; False when the deadline passed first."""
        return event.wait(self._timeout())

    def join(self, thread: threading.Thread) -> bool:
        """Wait until ``thread`` ends; False when it still runs at the deadline."""
        thread.join(self._timeout())
        return not thread.is_alive()
