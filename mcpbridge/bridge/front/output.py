"""The client's output: one lock, one write of a frame, the response of a slot written once.

Theory of operation
-------------------

Every frame for the client goes out through one :class:`Output` as one line.
A frame joins the *queue* under the output lock, so the order of the queue is
the order of the checks made with it; one thread at a time holds the *pen* and
writes the queue in order. After the output closes (the end of the connection,
or a write that failed) nothing more is written.

A thread that writes a frame waits until it is written, as a blocking write
would, and writes the queue itself when the pen is free: a response costs no
hand-off. Only the client's reader thread (:meth:`Output.set_reader`) does not
wait for its frames (the answers to ``ping``, the errors of bad lines) to be
written: they join the queue, and when the pen is free the ``mcpbridge-output``
thread takes it. So a client that stops reading its input does not stop the
reader at once: it still reads the cancellations and the answers to the
bridge's requests, up to the bound of the queue. A thread that wrote its own
frame hands the rest of the queue to that thread too, so that nobody writes for
others for ever.

The queue has a bound in bytes (``max_queued``, :data:`MAX_QUEUED_BYTES` by
default). A frame counts its bytes and :data:`FRAME_OVERHEAD` (the memory of
its place in the queue) until it is written, and it joins the queue only while
the frames count less than the bound: at most the bound and one frame wait for
the client, whatever the client sends. At the bound every writer waits for
room, the reader too: it stops reading the client until the client reads. That
wait depends on the client alone, never on another thread of the bridge: the
frames that fill the queue are in it already, and the pen holder only writes
them, so the reader goes on as soon as the client has read enough. A client that
reads nothing is ended by the stall rule below, which closes the output and so
ends every wait.

The writes go to the file descriptor of the stream, in pieces of at most
:data:`WRITE_CHUNK_BYTES`; each piece written is progress. :meth:`Output.waiting`
tells how long output has waited without progress: the front end ends a
connection whose client reads nothing for
:data:`~.options.OUTPUT_STALL_TIMEOUT`.

A :class:`Slot` is one request of the client in flight. Its response is written
once: the check that it may still write (not written yet, not canceled) and the
joining of the queue are one step under the lock, so a canceled request gets no
response.

The parts that speak to the client without owning the connection (the listen
stream, the input rounds, the 2025-era passthrough) see the output only
through :class:`Host`, the architecture's ``notify.Host`` and ``input.Peer``.

Lock rules
----------

The threads of a connection meet here, so the rules of every lock of the
package are written here, once. The rule: **a lock guards a decision, never
I/O, and no thread takes a second lock while it holds one**; a wait on a
condition is bounded. These are all the exceptions, each on purpose:

* **The output lock** (:attr:`Output._cond`). A frame joins the queue under it,
  in the same step as the check that it may still go (a slot answered once, a
  listen stream's generation): that is its decision. The write itself is done
  without it: :meth:`Output._submit_locked` releases the lock while the holder
  of the pen writes, and takes it back to count what was written. A writer waits
  for room under it (:meth:`Output._wait_for_room_locked`): that wait depends on
  the client alone, and the stall rule bounds it. The ``frames`` function of
  :meth:`Output.write_locked` runs under the lock and must not block or take
  another lock (:func:`response_frame_locked` is such a function).
* **The delivery lock of a shared child** (``_deliver`` of
  :class:`~.sessions.childshare._Shared`): the messages of the child reach the
  connection that owns it under this lock, so that a change of owner never
  splits them; a delivery may write to the client, and so wait for room in the
  output. It is taken only on the child's reader thread and by a change of owner.
* **The stderr lock of a probed child** (``_lock`` of
  :class:`~.sessions.childshare._ProbeStderr`): the lines that it held and the
  new ones reach the bridge's stderr under it, so that the stderr thread and the
  stdout thread that ends the hold never mix their order. The write is to the
  bridge's own stderr and takes no other lock.
* **The lock of a listen stream of the server** (``lock`` of the subscriptions of
  :mod:`mcpbridge.mcp.server.connection`): it orders the frames of one stream (the
  acknowledgment, the events, the result) and is held while they are sent. It is
  reentrant, because the memory link delivers a frame on the sending thread and
  the client may answer from there; the connection's own lock is only ever taken
  inside it, never around it.
* **The state of the front end** (:class:`~.frontend.Frontend`): the reader reads
  the state without the lock, as a hint for which way a message goes; every
  change is made under the state lock, and the changes that must be won once (the
  start of an initialize, its end, the start of the closing) compare and set
  under it, so a stale read only sends a message to a path that checks again.
* **A file lock of the token store** (:class:`mcpbridge.platform.common.FileLock`):
  it guards the I/O itself (a keychain entry or a file that other processes
  share), for at most its time limit.

The listen stream's owner thread (:mod:`.sessions.notify`) holds its state without a
lock: only that thread changes it, and the active generation is read and
written under the output lock.
"""

from __future__ import annotations

import enum
import itertools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Final, Protocol

from ...mcp import jsonrpc
from ...mcp.cancel import CancelToken
from ...mcp.deadline import Deadline
from ...mcp.droplog import DROP_LOG_INTERVAL, DropLog
from ...mcp.jsonrpc import RequestId
from ...mcp.text import printable
from ..rules import errortable

if TYPE_CHECKING:
    from .dumptext import OutputState

__all__ = [
    "LARGE_FRAME_BYTES",
    "MAX_QUEUED_BYTES",
    "QUIET_SECONDS",
    "Batch",
    "Host",
    "LargeFrames",
    "Output",
    "Slot",
    "Waiting",
]

log = logging.getLogger("mcpbridge.bridge")

#: A line at least this long is a large frame (see :class:`LargeFrames`).
LARGE_FRAME_BYTES = 256 * 1024
#: The quiet time after the last large frame before the free memory goes back to the system.
QUIET_SECONDS = 1.0
#: The most bytes of one write to the client: each piece written counts as progress. A pipe
#: holds 64 KiB by default (Linux, macOS), so a blocking write of a piece returns once the
#: client read about that much: a client that reads a large frame slowly makes progress.
WRITE_CHUNK_BYTES: Final = 64 * 1024
#: The wait of :meth:`Output.close` for the ``mcpbridge-output`` thread.
JOIN_TIMEOUT: Final = 1.0
#: The bytes that may wait for the client before its reader stops reading (see the module
#: docstring): as much as the longest line, so that what waits, the bound and one frame,
#: stays about twice the line limit.
MAX_QUEUED_BYTES: Final = 64 * 1024 * 1024
#: The memory of a frame's place in the queue beyond its bytes (the entry, the objects of a
#: short frame): counted with the bytes, so that a flood of small frames meets the bound too.
FRAME_OVERHEAD: Final = 256


class Waiting(str, enum.Enum):
    """What a request of the client in flight waits for."""

    #: The upstream server's answer.
    UPSTREAM = "upstream"
    #: The client's answers to the input requests of a round (or to a 2025-era server's request).
    CLIENT = "client"


class Slot:
    """One request of the client in flight."""

    __slots__ = ("id", "method", "cancel", "started", "done", "waiting_for", "next_report", "batch")

    def __init__(self, request_id: RequestId, method: str) -> None:
        self.id = request_id
        self.method = method
        self.cancel = CancelToken()
        self.started = time.monotonic()
        #: The response is written (under the output lock).
        self.done = False
        #: What the slot waits for, for the watcher's log lines.
        self.waiting_for = Waiting.UPSTREAM
        self.next_report = 10.0
        #: The batch of the client that the request came in (see :class:`Batch`).
        self.batch: Batch | None = None


class Batch:
    """The responses to one batch of the client (JSON-RPC 2.0, section 6): one array, one line.

    The responses of the batch's requests gather here, and the array goes out once
    the last one is in: the reader holds the batch open while it reads the elements
    (``open`` counts it and each slot that has yet to answer). The gathered responses
    have the bound of the queue: a response that would take them over it is replaced
    by the error ``batch_too_large`` of its request, so at most the bound and one
    response wait for the array.
    """

    __slots__ = ("open", "parts", "size")

    def __init__(self) -> None:
        self.open = 1
        self.parts: list[bytes] = []
        #: The bytes of ``parts``.
        self.size = 0


class Host(Protocol):
    """What the parts behind the front end may write to the client."""

    def write_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Write a notification; False when the output is closed."""
        ...

    def write_request(self, request_id: str, method: str, params: dict[str, Any] | None) -> bool:
        """Write one of the bridge's own requests (``None``: no params member)."""
        ...

    def write_locked(self, frames: Callable[[], list[bytes]]) -> bool:
        """Call ``frames()`` under the output lock and write what it returns, in one step."""
        ...

    def respond(self, slot: Slot, result: Any, *, raw: jsonrpc.RawStrings | None = None) -> bool:
        """Write the result of a slot once; a canceled slot writes nothing."""
        ...

    def respond_error(self, slot: Slot, error: dict[str, Any]) -> bool:
        """Write the error of a slot once; a canceled slot writes nothing."""
        ...


def notification_frame(method: str, params: dict[str, Any] | None) -> bytes:
    """The serialized notification ``method`` (``None``: no params member)."""
    frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        frame["params"] = params
    return jsonrpc.serialize(frame)


def error_frame(request_id: RequestId, error: dict[str, Any]) -> bytes:
    """The serialized error response to the request ``request_id``."""
    return jsonrpc.serialize({"jsonrpc": "2.0", "id": request_id, "error": error})


def response_frame_locked(slot: Slot, result: Any) -> bytes:
    """The response of ``slot``, for a ``frames`` function of :meth:`Output.write_locked`.

    Under the output lock, as the write: the response is written once, and never for a
    canceled slot; the slot is marked written in the same step. Empty when it may not be
    written.
    """
    if slot.done or slot.cancel.cancelled:
        return b""
    slot.done = True
    return jsonrpc.serialize({"jsonrpc": "2.0", "id": slot.id, "result": result})


class LargeFrames:
    """Count the large frames of a connection; give their memory back once they stop.

    The memory of a large frame is kept while they come one after another, so
    the next one does not pay for fresh pages; a quiet connection gives it back.
    The count runs without a lock: the watcher only compares it.
    """

    def __init__(self) -> None:
        self._count = 0
        self._seen = 0
        self._seen_at = 0.0
        self._released = 0

    def count(self) -> None:
        """One large frame passed."""
        self._count += 1

    def release_when_quiet(self, release: Callable[[], None] | None) -> None:
        """Call ``release`` once the large frames stopped for :data:`QUIET_SECONDS` (the watcher)."""
        count = self._count
        now = time.monotonic()
        if count != self._seen:
            self._seen, self._seen_at = count, now
        elif count != self._released and now - self._seen_at >= QUIET_SECONDS and release is not None:
            self._released = count
            try:
                release()
            except Exception as exc:  # noqa: BLE001 - a hook must not stop the watcher
                log.debug("releasing memory failed: %s", type(exc).__name__)
            else:
                log.debug("released the free memory of the large frames")


class Output:
    """The output stream of one client connection; see the module docstring.

    ``on_large_frame`` is called for each response that carries a long line
    (the front end counts large frames to give memory back when they stop).
    ``max_queued`` is the bound in bytes of the queue.
    """

    def __init__(
        self,
        stream: BinaryIO,
        on_large_frame: Callable[[], None] | None = None,
        *,
        max_queued: int = MAX_QUEUED_BYTES,
    ) -> None:
        if max_queued < 1:
            raise ValueError("max_queued must be at least 1")
        self._out = stream
        self._max_queued = max_queued
        self._fd = _descriptor(stream)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        #: The ``mcpbridge-output`` thread waits on it alone (same lock): a frame written by the
        #: thread that made it wakes the threads that wait for room or for their frame, never it.
        self._pen = threading.Condition(self._lock)
        self._on_large_frame = on_large_frame
        self._reader: threading.Thread | None = None
        self._writer: threading.Thread | None = None
        self._sequence = itertools.count(1)
        # Guarded by _cond:
        self._closed = False
        #: The frames that wait for the pen, each with its number and the bytes it counts.
        self._queue: deque[tuple[int, Sequence[jsonrpc.Piece], int]] = deque()
        #: The bytes that the frames of the queue and the frame being written count.
        self._queued_bytes = 0
        #: The number of the last frame that is written (or dropped at the close).
        self._done = 0
        #: A thread holds the pen: it writes the queue.
        self._writing = False
        #: The pen is the ``mcpbridge-output`` thread's to take.
        self._handed_over = False
        #: When output began to wait, or the last piece was written (while the pen is held).
        self._progress_at = 0.0
        #: A write failed: the output closed.
        self._failed = False
        #: The reader's next wait for room may say so in the log (rate-limited).
        self._next_pause_log = 0.0
        #: The responses over the bound of a batch (a client can repeat them).
        self._drops = DropLog(log)

    @property
    def closed(self) -> bool:
        return self._closed

    def set_reader(self, thread: threading.Thread) -> None:
        """The client's reader thread: it waits for room for its frames, never for their write."""
        self._reader = thread

    def waiting(self) -> float:
        """The seconds output has waited for the client without a piece written; 0 when idle."""
        with self._lock:
            if not self._writing or self._closed:
                return 0.0
            return max(0.0, time.monotonic() - self._progress_at)

    def describe(self, wait: float) -> OutputState | None:
        """What waits for the client, for a thread dump; ``None`` when the lock stays held ``wait`` s."""
        from .dumptext import OutputState  # loaded at the first dump (see dumptext)

        if not self._lock.acquire(timeout=wait):
            return None
        try:
            size = sum(len(piece) for _, pieces, _ in self._queue for piece in pieces)
            stalled_since = self._progress_at if self._writing and not self._closed else None
            return OutputState(len(self._queue), size, stalled_since, self._closed)
        finally:
            self._lock.release()

    def close(self, grace: float = 0.0) -> None:
        """Write nothing from now on, after at most ``grace`` seconds for the frames queued before."""
        deadline = Deadline(grace)
        with self._cond:
            while self._queue and not self._closed:
                if not deadline.wait(self._cond):
                    break
            if self._queue:
                log.debug("dropped %d frames for the client at the close of the output", len(self._queue))
            self._closed = True
            self._drop_queue_locked()
            self._cond.notify_all()
            self._pen.notify()
            writer, busy = self._writer, self._writing and self._handed_over
        if writer is not None and not busy:
            writer.join(JOIN_TIMEOUT)
            if writer.is_alive():
                log.debug("the output thread did not end in %g s", JOIN_TIMEOUT)

    def _drop_queue_locked(self) -> None:
        """Drop the frames that wait (the output closed); the caller holds the lock."""
        self._queued_bytes -= sum(size for _, _, size in self._queue)
        self._queue.clear()

    def _wait_for_room_locked(self) -> bool:
        """Wait until less than the bound waits (see the module docstring); False once closed.

        The caller holds the lock. No time limit of its own: the queue drains as the
        client reads, and the stall rule closes the output of a client that reads nothing.
        """
        while self._queued_bytes >= self._max_queued and not self._closed:
            if threading.current_thread() is self._reader:
                self._log_pause_locked()
            self._cond.wait()
        return not self._closed

    def _log_pause_locked(self) -> None:
        """Say that the reader stops reading the client, at most once every :data:`DROP_LOG_INTERVAL`."""
        now = time.monotonic()
        if now >= self._next_pause_log:
            self._next_pause_log = now + DROP_LOG_INTERVAL
            log.debug(
                "the client reads slower than the bridge answers: %d KiB wait for it, so the bridge "
                "stops reading the client until it reads",
                self._max_queued // 1024,
            )

    def _submit_locked(self, pieces: Sequence[jsonrpc.Piece], *, wait: bool = True) -> bool:
        """Queue ``pieces`` and write or wait (see the module docstring); the caller holds the
        lock and waited for room.

        True when the frame is written, or (the reader, or ``wait`` false) queued.
        """
        queue_only = not wait or threading.current_thread() is self._reader
        number = next(self._sequence)
        size = sum(len(piece) for piece in pieces) + FRAME_OVERHEAD
        self._queue.append((number, pieces, size))
        self._queued_bytes += size
        if not self._writing:
            self._writing = True
            self._progress_at = time.monotonic()
            if queue_only:
                self._hand_over_locked()
                return True
            self._cond.release()
            try:
                self._write_queue(until=number)
            finally:
                self._cond.acquire()
            return self._done >= number and not self._failed
        if queue_only:
            return True
        while self._done < number and not self._closed:
            self._cond.wait()  # the holder of the pen writes it; the stall rule bounds the wait
        return self._done >= number and not self._failed

    def _hand_over_locked(self) -> None:
        """Give the pen to the ``mcpbridge-output`` thread (started at the first hand-over)."""
        self._handed_over = True
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name="mcpbridge-output", daemon=True)
            self._writer.start()
        self._pen.notify()

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._handed_over and not self._closed:
                    self._pen.wait()  # idle until a hand-over; close() wakes it
                if self._closed:
                    return
            self._write_queue(until=None)

    def _write_queue(self, until: int | None) -> None:
        """Write the queue in order while holding the pen: up to the frame ``until``, then hand
        the rest over; or (``None``, the output thread) until it is empty. Releases the pen."""
        while True:
            with self._cond:
                if self._closed or not self._queue:
                    self._writing = False
                    self._handed_over = False
                    self._cond.notify_all()
                    return
                if until is not None and self._done >= until:
                    self._hand_over_locked()
                    return
                number, pieces, size = self._queue.popleft()
            ok = self._write_pieces(pieces)
            with self._cond:
                self._queued_bytes -= size
                if not ok:
                    self._failed = True
                    self._closed = True
                    self._pen.notify()
                    self._drop_queue_locked()
                    self._writing = False
                    self._handed_over = False
                self._done = max(self._done, number)
                self._cond.notify_all()
                if not ok:
                    return

    def _write_pieces(self, pieces: Sequence[jsonrpc.Piece]) -> bool:
        """Write one frame and flush, piece by piece; False when the stream failed."""
        out, fd = self._out, self._fd
        try:
            for piece in pieces:
                view = memoryview(piece)
                while view:
                    if fd is None:
                        out.write(view[:WRITE_CHUNK_BYTES])
                        written = min(len(view), WRITE_CHUNK_BYTES)
                    else:
                        written = os.write(fd, view[:WRITE_CHUNK_BYTES])
                    view = view[written:]
                    self._progress_at = time.monotonic()
            if fd is None:
                out.flush()
        except (OSError, ValueError):
            return False
        return True

    def write_frame(
        self, data: bytes | list[jsonrpc.Piece], slot: Slot | None = None, *, wait: bool = True
    ) -> bool:
        """Write one frame (its bytes, or its pieces in order) and flush.

        With a ``slot`` the frame is its response: written once, never for a canceled slot.
        With ``wait`` false the frame only joins the queue, whatever waits there: for the
        watcher, which must go on watching a client that reads nothing (the frames it
        queues so are bounded, one error a slot).
        """
        with self._cond:
            if wait and not self._wait_for_room_locked():
                return False
            if self._closed:
                return False
            if slot is not None:
                if slot.done or slot.cancel.cancelled:
                    return False
                slot.done = True
            if slot is None or slot.batch is None:
                return self._submit_locked(data if isinstance(data, list) else (data,), wait=wait)
            # The response waits for the others of its batch, within the bound (see Batch).
            frame = b"".join(data) if isinstance(data, list) else data
            over_bound = bool(slot.batch.parts) and slot.batch.size + len(frame) > self._max_queued
            if over_bound:
                frame = error_frame(slot.id, errortable.error_object("batch_too_large"))
            written = self._batch_locked(slot.batch, frame, -1)
        if over_bound:
            self._drops(
                logging.WARNING,
                "responses over the bound of a batch",
                "the responses to a batch of the client reached the bound of %d KiB: request %s of "
                "the batch gets the error batch_too_large instead of its result",
                self._max_queued // 1024,
                printable(slot.id),
            )
        return written

    def join_batch(self, slot: Slot, batch: Batch) -> None:
        """The response of ``slot`` goes into ``batch``."""
        with self._cond:
            batch.open += 1
            slot.batch = batch

    def batch_frame(self, batch: Batch, frame: bytes | None, *, end: bool = False) -> None:
        """Put ``frame`` (a response) into ``batch``; ``end``: the reader read its last element.

        The batch's array joins the queue once nothing holds it open any more.
        """
        with self._cond:
            self._batch_locked(batch, frame, -1 if end else 0)

    def slot_ended(self, slot: Slot) -> None:
        """The slot of a batch ended: without a response (canceled) it holds its batch no more."""
        with self._cond:
            if slot.batch is not None and not slot.done:
                slot.done = True
                self._batch_locked(slot.batch, None, -1)

    def _batch_locked(self, batch: Batch, frame: bytes | None, change: int) -> bool:
        if frame is not None:
            part = frame.rstrip(b"\n")
            batch.parts.append(part)
            batch.size += len(part) + 1
        batch.open += change
        if batch.open > 0 or not batch.parts or self._closed:
            return not self._closed
        line = b"[" + b",".join(batch.parts) + b"]\n"
        batch.parts = []
        batch.size = 0
        return self._submit_locked((line,), wait=False)

    def write_locked(self, frames: Callable[[], list[bytes]]) -> bool:
        """Call ``frames()`` under the output lock and queue what it returns, in one step.

        The listener uses it to compare a stream's generation and write its
        events atomically; ``frames`` must not block or take another lock.
        """
        with self._cond:
            if not self._wait_for_room_locked():
                return False
            data = b"".join(frames())
            if not data:
                return False
            return self._submit_locked((data,))

    def write(self, message: jsonrpc.Message) -> None:
        self.write_frame(jsonrpc.serialize(message))

    def write_error(self, request_id: RequestId | None, error: dict[str, Any]) -> None:
        """Write an error response; without an id the frame has no ``id`` member.

        JSON-RPC 2.0 writes ``"id": null`` when the id is unknown; the 2025-11-25
        schema (and the TypeScript SDK that VS Code uses) wants it left out.
        """
        if request_id is None:
            self.write_frame(jsonrpc.serialize({"jsonrpc": "2.0", "error": error}))
        else:
            self.write_frame(error_frame(request_id, error))

    def write_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Write a notification to the client."""
        return self.write_frame(notification_frame(method, params))

    def write_request(self, request_id: str, method: str, params: dict[str, Any] | None) -> bool:
        """Write one of the bridge's own requests to the client (``None``: no params member)."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        return self.write_frame(jsonrpc.serialize(frame))

    def respond(self, slot: Slot, result: Any, *, raw: jsonrpc.RawStrings | None = None) -> bool:
        """Write the result of a slot once; a canceled slot writes nothing.

        ``raw`` holds the long strings of the line that ``result`` came from (see
        :class:`~mcpbridge.mcp.jsonrpc.RawStrings`): they go out as they came in.
        """
        frame = {"jsonrpc": "2.0", "id": slot.id, "result": result}
        if raw is not None and raw.long_line and self._on_large_frame is not None:
            self._on_large_frame()
        return self.write_frame(jsonrpc.serialize_parts(frame, raw=raw), slot)

    def respond_error(self, slot: Slot, error: dict[str, Any], *, wait: bool = True) -> bool:
        """Write the error of a slot once; a canceled slot writes nothing (``wait``: see
        :meth:`write_frame`)."""
        return self.write_frame(error_frame(slot.id, error), slot, wait=wait)


def _descriptor(stream: BinaryIO) -> int | None:
    """The file descriptor under ``stream`` (its buffer flushed once), or ``None`` (a stream in memory).

    The output writes to the descriptor itself: a write that waits for the client
    then holds no lock of the stream, so a flush at the exit of the process never
    waits for it.
    """
    try:
        fd = stream.fileno()
        stream.flush()
    except (OSError, ValueError, AttributeError):
        return None
    return fd
