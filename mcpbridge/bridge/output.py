"""The client's output: one lock, one write of a frame, the response of a slot written once.

Theory of operation
-------------------

Every frame for the client goes out through one :class:`Output` as one line,
under its lock, and is flushed. After the output closes (the end of the
connection, or a write that failed) nothing more is written.

A :class:`Slot` is one request of the client in flight. Its response is written
once: the check that it may still write (not written yet, not canceled) and the
write are one step under the lock, so a canceled request gets no response.

The parts that speak to the client without owning the connection (the listen
stream, the input rounds, the 2025-era passthrough) see the output only
through :class:`Host`, the architecture's ``notify.Host`` and ``input.Peer``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO, Protocol

from ..mcp import jsonrpc
from ..mcp.cancel import CancelToken
from ..mcp.jsonrpc import RequestId

__all__ = ["LARGE_FRAME_BYTES", "QUIET_SECONDS", "Host", "LargeFrames", "Output", "Slot"]

log = logging.getLogger("mcpbridge.bridge")

#: A line at least this long is a large frame (see :class:`LargeFrames`).
LARGE_FRAME_BYTES = 256 * 1024
#: The quiet time after the last large frame before the free memory goes back to the system.
QUIET_SECONDS = 1.0


class Slot:
    """One request of the client in flight."""

    __slots__ = ("id", "method", "cancel", "started", "done", "waiting_for", "next_report")

    def __init__(self, request_id: RequestId, method: str) -> None:
        self.id = request_id
        self.method = method
        self.cancel = CancelToken()
        self.started = time.monotonic()
        #: The response is written (under the output lock).
        self.done = False
        #: What the slot waits for, for the watcher's log lines.
        self.waiting_for = "upstream"
        self.next_report = 10.0


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
    """

    def __init__(self, stream: BinaryIO, on_large_frame: Callable[[], None] | None = None) -> None:
        self._out = stream
        self._lock = threading.Lock()
        self._closed = False
        self._on_large_frame = on_large_frame

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Write nothing from now on."""
        with self._lock:
            self._closed = True

    def _emit_locked(self, pieces: Sequence[jsonrpc.Piece]) -> bool:
        """Write ``pieces`` in order and flush; the caller holds the lock and checked ``_closed``."""
        out = self._out
        try:
            for piece in pieces:
                out.write(piece)
            out.flush()
        except (OSError, ValueError):
            self._closed = True
            return False
        return True

    def write_frame(self, data: bytes | list[jsonrpc.Piece], slot: Slot | None = None) -> bool:
        """Write one frame (its bytes, or its pieces in order) and flush, under the output lock.

        With a ``slot`` the frame is its response: written once, never for a canceled slot.
        """
        with self._lock:
            if self._closed:
                return False
            if slot is not None:
                if slot.done or slot.cancel.cancelled:
                    return False
                slot.done = True
            return self._emit_locked(data if isinstance(data, list) else (data,))

    def write_locked(self, frames: Callable[[], list[bytes]]) -> bool:
        """Call ``frames()`` under the output lock and write what it returns, in one step.

        The listener uses it to compare a stream's generation and write its
        events atomically; ``frames`` must not block or take another lock.
        """
        with self._lock:
            if self._closed:
                return False
            data = b"".join(frames())
            if not data:
                return False
            return self._emit_locked((data,))

    def write(self, message: jsonrpc.Message) -> None:
        self.write_frame(jsonrpc.serialize(message))

    def write_error(self, request_id: RequestId | None, error: dict[str, Any]) -> None:
        """Write an error response; without an id the frame has no ``id`` member.

        JSON-RPC 2.0 writes ``"id": null`` when the id is unknown; the 2025-11-25
        schema (and the TypeScript SDK that VS Code uses) wants it left out.
        """
        frame: dict[str, Any] = {"jsonrpc": "2.0", "error": error}
        if request_id is not None:
            frame = {"jsonrpc": "2.0", "id": request_id, "error": error}
        self.write_frame(jsonrpc.serialize(frame))

    def write_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Write a notification to the client."""
        return self.write_frame(notification_frame(method, params))

    def write_if(self, check: Callable[[], bool], method: str, params: dict[str, Any] | None) -> bool:
        """Write a notification when ``check()`` holds; the check and the write are one step."""
        data = notification_frame(method, params)
        return self.write_locked(lambda: [data] if check() else [])

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

    def respond_error(self, slot: Slot, error: dict[str, Any]) -> bool:
        return self.write_frame(jsonrpc.serialize({"jsonrpc": "2.0", "id": slot.id, "error": error}), slot)
