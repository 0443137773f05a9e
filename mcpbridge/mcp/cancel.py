"""A cancel token: one thread asks, other threads notice."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .errors import TransportFailed


def _nothing() -> None:
    pass


class CancelToken:
    """Fires once. Callbacks run on the thread that cancels, outside the lock.

    A token is cheap: every request in flight has one or two. Its lock and its
    event come into being only when they are needed.
    """

    __slots__ = ("_lock", "_event", "_fired", "_callbacks", "_next", "reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event: threading.Event | None = None
        self._fired = False
        self._callbacks: dict[int, Callable[[], None]] | None = None
        self._next = 0
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._fired

    def cancel(self, reason: str = "") -> None:
        with self._lock:
            if self._fired:
                return
            self.reason = reason
            self._fired = True
            if self._event is not None:
                self._event.set()
            callbacks = list(self._callbacks.values()) if self._callbacks else []
            self._callbacks = None
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when the token fires (at once if it has fired).

        Returns a function that removes the callback.
        """
        with self._lock:
            if not self._fired:
                key = self._next
                self._next += 1
                if self._callbacks is None:
                    self._callbacks = {}
                self._callbacks[key] = callback

                def remove() -> None:
                    with self._lock:
                        if self._callbacks is not None:
                            self._callbacks.pop(key, None)

                return remove
        callback()
        return _nothing

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds; tell whether the token fired."""
        with self._lock:
            if self._fired:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)


class WouldBlock(TransportFailed):
    """A send given :data:`NO_WAIT` found no room at once: nothing was sent."""


#: The token for a send from a thread that must never wait (a reader thread): a
#: transport that would have to wait for room raises :class:`WouldBlock` instead.
#: A transport that never waits for room treats it as a token that never fires.
NO_WAIT = CancelToken()
