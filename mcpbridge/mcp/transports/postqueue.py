"""The messages that an HTTP transport posts in order on a thread of its own.

A notification or an answer to a request of the server needs no answer of its
own, so the thread that sends it must not wait for the network: it joins the
queue, and one named thread posts the queue in order. A request of the client
waits until what was queued before it went out (at most :data:`ORDER_WAIT`), so
that, for example, ``notifications/initialized`` reaches the server before the
first request that follows it. Both transports of the 2025 era use it (the
Streamable HTTP of :mod:`.legacy_http`, the HTTP+SSE of :mod:`.sse_transport`);
each gives the function that posts one message.

The queue has a bound in bytes, :data:`MAX_WAITING_BYTES`: each message counts its
serialized size and :data:`MESSAGE_OVERHEAD`. When the server takes the posts
slower than the client sends (a post hangs until its time limit), a message that
would take the queue past the bound is dropped, and a warning says so, without its
content, so that the memory of the bridge does not follow the client's sending. A
message always joins an empty queue, whatever its size.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Final

from ..droplog import DropLog
from ..jsonrpc import Message, Notification, serialize
from ..text import printable

__all__ = ["MAX_WAITING_BYTES", "MESSAGE_OVERHEAD", "ORDER_WAIT", "PostQueue"]

log = logging.getLogger("mcpbridge.http")

#: The longest wait of a request for the messages queued before it.
ORDER_WAIT: Final = 30.0
#: The most bytes that wait to be posted (see the module docstring).
MAX_WAITING_BYTES: Final = 16 * 1024 * 1024
#: What a message counts beside its bytes: the memory of its place in the queue.
MESSAGE_OVERHEAD: Final = 256


class PostQueue:
    """Messages posted in order by the thread ``name``, with ``post``, until ``stopped`` is set.

    ``post`` posts one message and raises nothing: it reports its own failures. When
    ``stopped`` is set, what is still queued is dropped and every wait ends.
    """

    def __init__(
        self,
        post: Callable[[Message], None],
        stopped: threading.Event,
        name: str,
        *,
        max_bytes: int = MAX_WAITING_BYTES,
    ) -> None:
        self._post = post
        self._stopped = stopped
        self._max_bytes = max_bytes
        self._drops = DropLog(log)
        self._ready = threading.Condition(threading.Lock())
        #: The messages that wait, each with its number and the bytes it counts.
        self._queue: collections.deque[tuple[int, Message, int]] = collections.deque()
        #: The bytes that the messages of the queue count.
        self._bytes = 0
        self._queued = 0
        self._posted = 0
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def put(self, message: Message) -> None:
        """Queue ``message``; it is posted after every message queued before it.

        Past :data:`MAX_WAITING_BYTES` it is dropped, with a warning.
        """
        size = len(serialize(message)) + MESSAGE_OVERHEAD
        with self._ready:
            full = bool(self._queue) and self._bytes + size > self._max_bytes
            if not full:
                self._queued += 1
                self._queue.append((self._queued, message, size))
                self._bytes += size
                self._ready.notify_all()
        if full:
            what = (
                f"the notification {message.method[:128]}"
                if isinstance(message, Notification)
                else f"the answer to request {printable(message.id)} of the server"
            )
            self._drops(
                logging.WARNING,
                "messages dropped before the upstream server took them",
                "the upstream server takes the messages slower than they come: %d KiB wait to be posted, "
                "thus the bridge dropped %s",
                self._max_bytes // 1024,
                what,
            )

    def wait_before(self, closed: Callable[[], bool]) -> None:
        """Wait until what is queued now is posted, or ``closed()``, at most :data:`ORDER_WAIT`."""
        with self._ready:
            before = self._queued
            # Past ORDER_WAIT the request goes out all the same: a post that hangs ends by
            # its own time limit and must not hold every request after it.
            self._ready.wait_for(lambda: self._posted >= before or closed(), ORDER_WAIT)

    def drain(self, grace: float) -> bool:
        """Wait at most ``grace`` seconds until everything queued is posted; True when it is."""
        with self._ready:
            return self._ready.wait_for(lambda: self._posted >= self._queued, grace)

    def wake(self) -> None:
        """Wake every wait (the transport stops or closes)."""
        with self._ready:
            self._ready.notify_all()

    def _run(self) -> None:
        while True:
            with self._ready:
                # Unbounded: an idle thread waits for work, and stop() sets the event and wakes it.
                self._ready.wait_for(lambda: bool(self._queue) or self._stopped.is_set())
                if self._stopped.is_set():
                    self._queue.clear()
                    self._bytes = 0
                    self._posted = self._queued
                    self._ready.notify_all()
                    return
                seq, message, size = self._queue.popleft()
            self._post(message)
            with self._ready:
                self._posted = seq
                self._bytes -= size
                self._ready.notify_all()
