"""A raw JSON-RPC peer: integer ids, a pending table, deadlines, and nothing of MCP.

:class:`LegacyPeer` carries the messages of a 2025-era server as they are: no
``_meta``, no ``resultType``. The bridge's passthrough
(:class:`~mcpbridge.bridge.sessions.passthrough.LegacyPassthrough`) runs on it, and
``mcp-bridge-vscode check`` uses it too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

from ..cancel import CancelToken
from ..errors import Cancelled, Closed, McpError, RequestTimeout
from ..jsonrpc import (
    INVALID_REQUEST,
    ErrorObject,
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
)
from ..text import format_duration, printable
from ..transports import Transport, run_callback
from ..transports.framing import TooLong
from .peer import Entry, Interrupt, Outcome, Peer, bad_line

__all__ = ["LegacyPeer"]

#: The logger of the bridge: the peer's log lines are those of the passthrough it serves.
log = logging.getLogger("mcpbridge.bridge")

#: What the server gets for a request of its own that is not a valid message.
_INVALID_SERVER_REQUEST: Final = ErrorObject(INVALID_REQUEST, "Invalid Request")


class LegacyPeer(Peer):
    """A raw JSON-RPC peer over a transport: integer ids, a pending table, deadlines.

    It adds nothing to the messages. The server's requests go to ``on_request``
    and its notifications to ``on_notification``, on the delivering thread (a
    callback must not block). Answers go out with :meth:`answer`.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        on_request: Callable[[Request], None],
        on_notification: Callable[[Notification], None],
    ) -> None:
        super().__init__(transport, timer_name="mcpbridge-legacy-timer", logger=log)
        self._on_request = on_request
        self._on_notification = on_notification
        #: Set by the first close: also after the transport ended by itself, it closes it.
        self._close_called = False

    def start(self) -> None:
        """Start the transport (a child process starts here).

        Raises:
            McpError: the transport did not start (``SpawnFailed`` for a command).
        """
        self._timer.start()
        try:
            self._transport.start(self._on_message, self._on_frame_error, self._on_closed)
        except BaseException:
            with self._cond:
                self._closed = Closed("the connection did not start")
            self._timer.stop()
            raise

    def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float,
        cancel: CancelToken | None = None,
    ) -> Response | ErrorResponse:
        """Send one request and wait at most ``timeout`` seconds for its answer.

        A timeout and a cancellation send ``notifications/cancelled`` upstream.

        Raises:
            RequestTimeout: no answer in ``timeout`` seconds.
            Cancelled: ``cancel`` fired.
            Closed: the connection is closed or the upstream process exited.
            InvalidResponse: the answer is a line that is not a valid message.
            McpError: the transport failed.
        """
        with self._cond:
            if self._closed is not None:
                raise Closed(self._closed.detail)
            entry = Entry(self._next_request_id_locked(), method, self._thread_condition())
            self._pending[entry.id] = entry
        message = Request(entry.id, method, params)
        deadline = time.monotonic() + timeout
        sent, send_error, outcome, why, reason = self._send_and_wait(entry, message, deadline, cancel)
        if outcome is None and why is Interrupt.TIMEOUT:
            if sent or isinstance(send_error, Cancelled):
                self._send_cancelled(entry.id, f"no response in {format_duration(timeout)}")
            raise RequestTimeout(f"{method}: no response in {format_duration(timeout)}")
        if outcome is None and why is Interrupt.CANCEL:
            if sent or isinstance(send_error, Cancelled):
                self._send_cancelled(entry.id, reason or "the client canceled the request")
            raise Cancelled(reason or None)
        if outcome is None:
            assert send_error is not None
            raise send_error
        if isinstance(outcome, McpError):
            raise outcome
        return outcome

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; a failure is only logged."""
        self._send_quietly(Notification(method, params), method)

    def answer(self, message: Response | ErrorResponse) -> None:
        """Send the answer to a request of the server; a failure is only logged."""
        self._send_quietly(message, "an answer")

    def close(self, grace: float = 2.0) -> None:
        """Fail what is pending with ``Closed``, close the transport, stop the deadline thread."""
        with self._cond:
            first, self._close_called = not self._close_called, True
            self._fail_pending_locked(Closed("the connection to the upstream server is closed"))
        if first:
            self._transport.close(grace)
            self._timer.stop()

    # ------------------------------------------------------------ internals

    def _send_quietly(self, message: Message, what: str) -> None:
        try:
            self._transport.send(message)
        except McpError as exc:
            self._drops(
                logging.DEBUG,
                "dropped messages that did not reach the upstream server",
                "%s was not sent to the upstream server: %s",
                printable(what),
                exc.cause,
                exc_info=exc,
            )

    def _resolve(self, request_id: RequestId, outcome: Outcome) -> bool:
        with self._cond:
            return self._settle_locked(request_id, lambda _entry: outcome) is not None

    def _on_message(self, message: Message) -> None:
        if isinstance(message, (Response, ErrorResponse)):
            if message.id is None:
                assert isinstance(message, ErrorResponse)
                self._drop_error_without_id(message.error.code)
            elif not self._resolve(message.id, message):
                self._drop_unmatched("a response", message.id)
        elif isinstance(message, Request):
            request = message
            run_callback(message.method, lambda: self._on_request(request), log)
        else:
            notification = message
            run_callback(message.method, lambda: self._on_notification(notification), log)

    def _on_frame_error(self, error: FrameError | TooLong) -> None:
        line = bad_line(error)
        if line.answered is not None:
            if not self._resolve(line.answered, line.error("")):
                self._drop_unmatched(line.what, line.answered)
        elif line.id is not None:
            # A request of the server: it resolves none of ours, and gets its error.
            self._drops(
                logging.WARNING,
                "refused requests of the upstream server that are not valid",
                "refused a request of the upstream server, %s",
                line.what,
            )
            self.answer(ErrorResponse(line.id, _INVALID_SERVER_REQUEST))
        else:
            self._drops(
                logging.WARNING,
                "dropped lines that are not valid messages",
                "dropped %s from the upstream server",
                line.what,
            )

    def _on_closed(self, error: McpError | None) -> None:
        self._drops.flush()
        with self._cond:
            self._fail_pending_locked(error if error is not None else Closed("the connection is closed"))
