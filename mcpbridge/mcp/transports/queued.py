"""The base of the two HTTP transports of the 2025 era: a queue of posts and two threads.

:class:`~.legacy_http.LegacyHttpTransport` (Streamable HTTP of 2025-11-25) and
:class:`~.sse_transport.SseTransport` (HTTP+SSE of 2024-11-05) are a
:class:`QueuedTransportBase`, on :class:`~.httpbase.HttpTransportBase`: a queue of
notifications and answers posted in order on a thread of its own (:mod:`.postqueue`), a
thread that reads a stream of the server, and the close that posts the queue first. The
transport of 2026-07-28 posts each message on the thread that sends it and loads none of
this.
"""

from __future__ import annotations

import logging
import threading
from abc import abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Final

from ..cancel import CancelToken
from ..deadline import Deadline
from ..errors import McpError, NotConnected
from ..jsonrpc import Message, Notification, Request
from . import OnClosed, OnFrameError, OnMessage
from .httpbase import HttpTransportBase
from .postqueue import PostQueue

__all__ = ["JOIN_TIMEOUT", "QueuedTransportBase", "logged_name"]

log = logging.getLogger("mcpbridge.http")


def logged_name(message: Message) -> str:
    """What a log line calls ``message``: its method, or "an answer" (cut by the caller)."""
    return message.method if isinstance(message, (Request, Notification)) else "an answer"


#: The wait for each thread of a queued transport at its close, beside the grace of the close.
JOIN_TIMEOUT: Final = 2.0


class QueuedTransportBase(HttpTransportBase):
    """An HTTP transport of the 2025 era, with a queue of posts and a thread that reads a stream.

    A notification or an answer to a request of the server joins a queue that the thread
    :attr:`POSTER` posts in order (:class:`~.postqueue.PostQueue`, each with
    :meth:`_post_queued`); a request goes out on the thread that sends it
    (:meth:`_send_request`), once the messages queued before it went out. The thread
    ``_listener`` reads a stream of the server. Both threads stop when ``_stopped`` is set.

    :meth:`close` posts what is queued (for at most its grace), stops the threads and
    waits for them, then lets go of the wires (:meth:`~HttpTransportBase._close_wires`)
    and tells ``on_closed``.
    """

    #: The name of the thread that posts the queue.
    POSTER: ClassVar[str]

    def _own_state(self) -> None:
        """The queue and the threads; a transport that sets more state calls this first."""
        self._stopped = threading.Event()
        self._listener: threading.Thread | None = None
        # The notifications and answers, posted in order on their own thread.
        self._posts = PostQueue(self._post_queued, self._stopped, self.POSTER)
        self._started = False

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None:
        if self._started:
            raise RuntimeError("the transport is already started")
        self._started = True
        self._on_message = on_message
        self._on_closed = on_closed
        self._begin(on_frame_error)
        self._posts.start()

    def _begin(self, on_frame_error: OnFrameError) -> None:
        """Start what the transport runs from its start, before the poster; by default nothing."""

    @abstractmethod
    def _post_queued(self, message: Message) -> None:
        """Post a queued notification or answer on the poster thread; a failure is a drop line."""

    @abstractmethod
    def _send_request(self, request: Request, cancel: CancelToken | None, deliver: OnMessage) -> None:
        """Post ``request`` on the calling thread; the messages of its answer go to ``deliver``."""

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        """Post a request, or queue a notification or an answer.

        A request waits until the messages queued before it went out (at most
        :data:`~.postqueue.ORDER_WAIT`). The errors are those of :class:`HttpTransportBase`.
        """
        if self._closed:
            raise self._closed_error()
        on_message = self._on_message
        if on_message is None:
            raise NotConnected("the transport is not started")
        if not isinstance(message, Request):
            self._posts.put(message)
            return
        self._posts.wait_before(lambda: self._closed)
        self._send_request(message, cancel, on_message)

    def close(self, grace: float = 2.0) -> None:
        """Post what is queued (for at most ``grace``), abort what is in flight, stop the
        threads, let go of the wires."""
        if not self._begin_close():
            return
        # The queued messages go first (a cancellation, for example), for at most the grace.
        self._posts.drain(grace)
        self._shut()
        self._join((self._posts.thread, self._listener), JOIN_TIMEOUT + grace)
        self._finish(grace)

    def _stop(self) -> None:
        self._stopped.set()
        self._end_waits()
        self._posts.wake()

    def _end_waits(self) -> None:
        """End the waits of the transport's own at its stop, before the poster wakes; by
        default none."""

    def _join(self, threads: Sequence[threading.Thread | None], timeout: float) -> None:
        """Wait for the threads of the transport at its close, all within ``timeout`` (never the
        calling thread); one log line for a thread that does not end."""
        current = threading.current_thread()
        deadline = Deadline(timeout)
        for thread in threads:
            if thread is not None and thread is not current and not deadline.join(thread):
                log.warning("the thread %s did not end at the close of the transport", thread.name)

    def _unsent(self, what: str, exc: McpError) -> None:
        """The drop line of a queued message, ``what``, that did not reach the server; none
        after the close."""
        if not self._closed:
            self._drops(
                logging.WARNING,
                "dropped messages that did not reach the upstream server",
                "%s was not sent to the upstream server: %s",
                what[:128],
                exc.detail or exc.cause,
                exc_info=exc,
            )
