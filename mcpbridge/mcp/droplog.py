"""One log line for what a peer makes the bridge drop or refuse, however often it does.

A server with a debug print on stdout writes a bad line for each request, and a
client over the limit of requests in flight gets an error for each one: a line
for each would flood the log that VS Code shows. Every log line that a peer can
make repeat goes through a :class:`DropLog`. It logs the first line of each
*kind* at once, and after that at most one line of that kind every
:data:`DROP_LOG_INTERVAL` seconds: the repeats in between are only counted, and
the next line of the kind, or :meth:`DropLog.flush` at the end of the
connection (:func:`flush_all` for every drop log of the process), says how
many there were.

The messages name the problem and its size, never the content of what was dropped.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["DROP_LOG_INTERVAL", "DropLog", "flush_all"]

#: The shortest time between two log lines of one kind of drop.
DROP_LOG_INTERVAL: Final = 10.0


#: Every drop log of the process, for :func:`flush_all`.
_every: weakref.WeakSet[DropLog] = weakref.WeakSet()
_every_lock = threading.Lock()


@dataclass
class _Kind:
    level: int
    #: When the last line of the kind was logged.
    logged_at: float
    #: The drops since that line.
    unlogged: int = 0


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 1 else "less than 1 s"


class DropLog:
    """Log drops on ``logger``, each kind at most once every ``interval`` seconds.

    ``kind`` names the drops of a kind in the line of :meth:`flush`, for
    example ``"dropped lines that are not JSON"``. ``clock`` gives
    the time in seconds (a test passes its own).
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        interval: float = DROP_LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[str, _Kind] = {}
        with _every_lock:
            _every.add(self)

    def __call__(
        self, level: int, kind: str, message: str, *args: object, exc_info: BaseException | None = None
    ) -> None:
        """Log one drop of ``kind`` with ``message % args``, or count it when its kind logged recently.

        ``exc_info``: the error behind the drop, whose causes a debug line names.
        """
        if not self._logger.isEnabledFor(level):
            return
        now = self._clock()
        with self._lock:
            entry = self._kinds.get(kind)
            if entry is not None and now - entry.logged_at < self._interval:
                entry.unlogged += 1
                return
            unlogged = entry.unlogged if entry is not None else 0
            since = now - entry.logged_at if entry is not None else 0.0
            self._kinds[kind] = _Kind(level, now)
        if unlogged:
            self._logger.log(
                level,
                message + " (and %d more of these in the %s before)",
                *args,
                unlogged,
                _seconds(since),
                exc_info=exc_info,
            )
        else:
            self._logger.log(level, message, *args, exc_info=exc_info)

    def flush(self) -> None:
        """Log the count of each kind's drops that no line has told yet (at the end of a connection)."""
        counts: list[tuple[str, int, int]] = []
        with self._lock:
            for kind, entry in self._kinds.items():
                if entry.unlogged:
                    counts.append((kind, entry.level, entry.unlogged))
                    entry.unlogged = 0
        for kind, level, unlogged in counts:
            self._logger.log(level, "%s since the last such line: %d more", kind, unlogged)


def flush_all() -> None:
    """Tell the counts that no line has told yet, of every drop log of the process.

    The end of a connection calls it: its parts keep drop logs of their own (the
    front end, the upstream client and transport, the sign-in), some for as long
    as the process.
    """
    with _every_lock:
        logs = list(_every)
    for drops in logs:
        drops.flush()
