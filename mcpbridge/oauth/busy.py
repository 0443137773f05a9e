"""One sign-in or refresh at a time: the others wait for it, each bounded by its request."""

from __future__ import annotations

import threading

from ..mcp.cancel import CancelToken
from ..mcp.deadline import Deadline
from ..mcp.errors import Cancelled
from .errors import SignInFailed

__all__ = ["OneAtATime"]


class OneAtATime:
    """The turn of the sign-ins and refreshes of one authorizer (thread-safe)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False

    def acquire(self, cancel: CancelToken | None, deadline: float | None) -> bool:
        """Wait until no other sign-in or refresh runs, at most until ``deadline``; then take the turn.

        Without a deadline (outside a request: a listen stream) it does not wait: False
        when another runs.

        Raises:
            Cancelled: ``cancel`` fired while it waited.
            SignInFailed: the deadline passed (``another sign-in did not end in time``).
        """
        limit = Deadline(None, until=deadline)
        remove = cancel.add_callback(self._wake) if cancel is not None else None
        try:
            with self._cond:
                while self._busy:
                    if cancel is not None and cancel.cancelled:
                        raise Cancelled(cancel.reason or None)
                    if deadline is None:
                        # A listen stream does not wait for a sign-in: it waits for the next request.
                        return False
                    if not limit.wait(self._cond):
                        raise SignInFailed("another sign-in did not end in time")
                self._busy = True
                return True
        finally:
            if remove is not None:
                remove()

    def try_acquire(self) -> bool:
        """Take the turn when no other sign-in or refresh runs; False at once when one runs."""
        with self._cond:
            if self._busy:
                return False
            self._busy = True
            return True

    def release(self) -> None:
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()
