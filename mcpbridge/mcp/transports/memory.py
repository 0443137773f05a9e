"""The in-memory link: a client and a server in the same process.

:func:`memory_pair` returns the two ends of one link. Messages pass as
objects, without serialization, and each one is delivered on the thread that
sends it:

* the client's :meth:`~MemoryClientTransport.send` calls the server's
  ``on_message``; the server dispatches a request to its own threads and
  returns;
* the server's :meth:`~MemoryServerTransport.send` calls the client's
  ``on_message``. So a list change that a tool publishes during a call
  reaches the client before the result of that call.

Rules:

* Both ends must be started before either sends (else :class:`~.errors.NotConnected`).
* Neither side may change a message after it sent it or once it got it: both
  sides see the same objects.
* :meth:`close` on either end closes the link; each end's ``on_closed`` runs
  once, on the thread that closed it. A send on a closed link raises
  :class:`~.errors.Closed`.
* The link never loses its server: :attr:`~MemoryClientTransport.gone` stays false.
"""

from __future__ import annotations

import threading

from ..cancel import CancelToken
from ..errors import Closed, NotConnected
from ..jsonrpc import Message
from . import OnClosed, OnFrameError, OnMessage, OnServerClosed, PeerForm, ServerTransport, Transport

__all__ = ["MemoryClientTransport", "MemoryServerTransport", "memory_pair"]


class _Link:
    """The state the two ends share; the lock guards decisions only, never a delivery."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.closed = False
        self.client_on_message: OnMessage | None = None
        self.client_on_closed: OnClosed | None = None
        self.server_on_message: OnMessage | None = None
        self.server_on_closed: OnServerClosed | None = None

    def deliver(self, message: Message, *, to_server: bool) -> None:
        """Give ``message`` to the other end's ``on_message`` on this thread."""
        with self.lock:
            if self.closed:
                raise Closed("the memory link is closed")
            deliver = self.server_on_message if to_server else self.client_on_message
        if deliver is None:
            end = "server" if to_server else "client"
            raise NotConnected(f"the {end} end of the memory link is not started")
        deliver(message)

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            client_on_closed = self.client_on_closed
            server_on_closed = self.server_on_closed
        if server_on_closed is not None:
            server_on_closed()
        if client_on_closed is not None:
            client_on_closed(Closed("the memory link is closed"))


class MemoryClientTransport(Transport):
    """The client end of a memory link; made by :func:`memory_pair`."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None:
        with self._link.lock:
            self._link.client_on_message = on_message
            self._link.client_on_closed = on_closed

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        """Deliver ``message`` to the server on this thread; ``cancel`` is not used.

        Raises:
            Closed: the link is closed.
            NotConnected: the server end is not started.
        """
        self._link.deliver(message, to_server=True)

    def close(self, grace: float = 2.0) -> None:
        """Close the link (both ends)."""
        self._link.close()

    @property
    def form(self) -> PeerForm:
        return PeerForm.IN_PROCESS


class MemoryServerTransport(ServerTransport):
    """The server end of a memory link; made by :func:`memory_pair`."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed) -> None:
        with self._link.lock:
            self._link.server_on_message = on_message
            self._link.server_on_closed = on_closed

    def send(self, message: Message) -> None:
        """Deliver ``message`` to the client on this thread.

        Raises:
            Closed: the link is closed.
            NotConnected: the client end is not started.
        """
        self._link.deliver(message, to_server=False)

    def close(self) -> None:
        """Close the link (both ends)."""
        self._link.close()


def memory_pair() -> tuple[MemoryClientTransport, MemoryServerTransport]:
    """The two ends of a new memory link: ``(client transport, server transport)``."""
    link = _Link()
    return MemoryClientTransport(link), MemoryServerTransport(link)
