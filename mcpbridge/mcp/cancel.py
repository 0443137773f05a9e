"""A cancel token: one thread asks, other threads notice."""

from __future__ import annotations

import threading
from collections.abc import Callable


class CancelToken:
    """Fires once. Callbacks run on the thread that cancels, outside the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next = 0
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            callback()

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when the token fires (at once if it has fired).

        Returns a function that removes the callback.
        """
        with self._lock:
            if not self._event.is_set():
                key = self._next
                self._next += 1
                self._callbacks[key] = callback

                def remove() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return remove
        callback()
        return lambda: None

    def wait(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds; tell whether the token fired."""
        return self._event.wait(timeout)
