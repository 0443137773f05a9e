"""A rate limit of events in one-second windows (the progress notifications of a request)."""

from __future__ import annotations

import time

__all__ = ["RateWindow"]


class RateWindow:
    """Admit at most ``rate`` events a second.

    A window opens with the first event after the last window is over and lasts one
    second; the events over the rate in it are refused. Not thread-safe: the caller
    holds its lock, or the events come on one thread.
    """

    __slots__ = ("_rate", "_start", "_count")

    def __init__(self, rate: int) -> None:
        self._rate = rate
        self._start = 0.0
        self._count = 0

    def admit(self) -> bool:
        """Count one event; False when it is over the rate of its window."""
        now = time.monotonic()
        if now - self._start >= 1.0:
            self._start = now
            self._count = 0
        if self._count >= self._rate:
            return False
        self._count += 1
        return True
