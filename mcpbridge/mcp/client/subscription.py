"""One ``subscriptions/listen`` stream of the 2026-07-28 client: its acknowledgment, its events, its end.

The client opens it (:meth:`~.client.Client.listen`) and delivers its messages;
the stream's state changes under the client's lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ..cancel import CancelToken
from ..errors import Cancelled, InvalidResponse, McpError, RequestTimeout, fresh
from ..jsonrpc import Notification, RequestId
from ..text import format_duration
from .peer import Peer

__all__ = ["WAIT_SLICE", "Subscription"]

WAIT_SLICE: Final = 60.0


class Subscription:
    """One ``subscriptions/listen`` stream; made by :meth:`~.client.Client.listen`.

    Its state changes under the client's lock, on the thread that delivers the
    stream's messages.
    """

    def __init__(
        self,
        client: Peer,
        streams: dict[RequestId, Subscription],
        subscription_id: RequestId,
        on_event: Callable[[Notification], None],
        on_ack: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        #: The JSON-RPC id of the listen request, which tags every message of the stream.
        self.id = subscription_id
        self._client = client
        #: The client's open streams by id, guarded by its lock; the stream leaves it at its end.
        self._streams = streams
        self._on_event = on_event
        self._on_ack = on_ack
        self._token = CancelToken()
        # Guarded by the client's lock:
        self._honored: dict[str, Any] | None = None
        self._ended = False
        self._error: McpError | None = None
        self._sent = False
        self._cancelled_by_us = False
        self._cancel_sent = False
        self._cancel_reason = ""

    def __repr__(self) -> str:
        state = "ended" if self._ended else "acknowledged" if self._honored is not None else "opening"
        return f"<Subscription {self.id!r} {state}>"

    @property
    def ended(self) -> bool:
        """True once the stream ended, for whatever reason."""
        return self._ended

    @property
    def honored(self) -> dict[str, Any] | None:
        """The filter of the first acknowledgment, or ``None`` before it."""
        return self._honored

    def wait_acknowledged(self, timeout: float) -> dict[str, Any]:
        """Wait for the acknowledgment; return the filter the server honored.

        Raises:
            RequestTimeout: no acknowledgment in ``timeout`` seconds.
            InvalidResponse: the stream ended gracefully before its acknowledgment.
            McpError: the error that ended the stream (``RpcError``, ``Closed``, ``Cancelled``...).
        """
        cond = self._client._cond
        with cond:
            answered = cond.wait_for(lambda: self._honored is not None or self._ended, timeout)
            honored, error = self._honored, self._error
        if not answered:
            raise RequestTimeout(f"subscriptions/listen: no acknowledgment in {format_duration(timeout)}")
        if honored is not None:
            return dict(honored)
        # Not honored, thus ended.
        if error is not None:
            raise fresh(error)
        raise InvalidResponse("subscriptions/listen: the stream ended before its acknowledgment")

    def wait_ended(self, timeout: float | None) -> None:
        """Wait for the end of the stream; ``None`` waits as long as it takes.

        Returns when the server ended the stream gracefully.

        Raises:
            RequestTimeout: the stream is still open after ``timeout`` seconds.
            McpError: the error that ended the stream (``Cancelled`` after :meth:`cancel`).
        """
        cond = self._client._cond
        with cond:
            if timeout is None:
                while not cond.wait_for(lambda: self._ended, WAIT_SLICE):
                    pass
            elif not cond.wait_for(lambda: self._ended, timeout):
                raise RequestTimeout(f"subscriptions/listen: still open after {format_duration(timeout)}")
            error = self._error
        if error is not None:
            raise fresh(error)

    def cancel(self, reason: str = "") -> None:
        """End the stream: tell the server (stdio: ``notifications/cancelled``; HTTP: close the stream).

        Idempotent; does nothing once the stream ended. Safe from any thread,
        also from the stream's own callbacks.
        """
        client = self._client
        with client._cond:
            if not self._finish_locked(Cancelled(reason or None)):
                return
            self._cancelled_by_us = True
            self._cancel_reason = reason
            notify_now = self._sent and not self._cancel_sent
            if notify_now:
                self._cancel_sent = True
        self._token.cancel(reason)
        if notify_now:
            client._send_cancelled(self.id, reason or "the client canceled the subscription")

    # ------------------------------------------------- under the client's lock

    def _finish_locked(self, error: McpError | None) -> bool:
        if self._ended:
            return False
        self._ended = True
        self._error = error
        if self._streams.get(self.id) is self:
            del self._streams[self.id]
        self._client._cond.notify_all()
        return True
