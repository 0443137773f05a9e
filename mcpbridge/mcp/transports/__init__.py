"""The transport seam: how a client or a server moves messages.

A client transport has three implementations: a child process on stdio
(:mod:`mcpbridge.mcp.transports.stdio`), Streamable HTTP (:mod:`mcpbridge.mcp.transports.http`) and
the in-memory link (:mod:`mcpbridge.mcp.transports.memory`). A server transport has two:
stdio and the in-memory link.
"""

from __future__ import annotations

import enum
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable

from ..cancel import CancelToken
from ..errors import McpError
from ..jsonrpc import FrameError, Message
from .framing import TooLong

OnMessage = Callable[[Message], None]
OnFrameError = Callable[[FrameError | TooLong], None]
#: A client transport's end: the error that ended the connection, ``None`` for a normal close.
OnClosed = Callable[[McpError | None], None]
#: A server transport's end.
OnServerClosed = Callable[[], None]


def run_callback(what: str, callback: Callable[[], None], logger: logging.Logger) -> None:
    """Run a callback of the caller; an error in it must not stop the thread that delivers.

    The thread that reads a connection or routes its messages goes on with the next one;
    the failure is an error line that names ``what`` (the traceback at debug level).
    """
    try:
        callback()
    except Exception as exc:  # noqa: BLE001 - the next message must still be delivered
        logger.error("the callback for %s failed: %s", what, type(exc).__name__)
        logger.debug("the callback for %s failed", what, exc_info=True)


class PeerForm(str, enum.Enum):
    """How a transport reaches its peer (:attr:`Transport.form`)."""

    #: A child process on stdio.
    COMMAND = "command"
    #: A server at a URL (HTTP).
    URL = "url"
    #: A server in the same process (the memory link).
    IN_PROCESS = "in-process"
    OTHER = "other"


class Transport(ABC):
    """The client side of a connection.

    ``start`` begins the delivery of incoming messages, in arrival order, to
    ``on_message``. Lines that are not messages go to ``on_frame_error``; a
    transport may log and drop itself those that name no request. When
    the connection ends, ``on_closed`` gets the error that ended it (``None``
    for a normal close).
    """

    @abstractmethod
    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None: ...

    @abstractmethod
    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        """Send one message.

        Over stdio this writes one line. Over HTTP it performs the exchange and
        delivers every message of the response through ``on_message`` before
        it returns; ``cancel`` closes the response stream.

        Raises:
            McpError: ``Closed`` or ``TransportFailed`` (HTTP adds others).
        """

    @abstractmethod
    def close(self, grace: float = 2.0) -> None:
        """Close the connection; wait at most about ``2 * grace`` seconds."""

    @property
    def gone(self) -> bool:
        """Tell whether the peer is gone for good (a stopped child process)."""
        return False

    @property
    def form(self) -> PeerForm:
        """How the peer is reached (a thread dump names it; the end of a session's words
        depend on it). Never the address itself: the URL of the server can hold a secret."""
        return PeerForm.OTHER

    @property
    def exit_status(self) -> str | None:
        """How the peer process ended, for example ``"code 3"``, if known."""
        return None

    def rest(self) -> None:  # noqa: B027 - a hook: most transports keep nothing for a busy connection
        """The connection rests (no request in flight for a while): let go of what only
        a busy connection needs, such as idle keep-alive connections. Nothing by default."""


class ServerTransport(ABC):
    """The server side of a connection."""

    @abstractmethod
    def start(
        self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnServerClosed
    ) -> None: ...

    @abstractmethod
    def send(self, message: Message) -> None:
        """Send one message; safe to call from any thread.

        Raises:
            Closed: the connection is closed.
        """

    @abstractmethod
    def close(self) -> None: ...
