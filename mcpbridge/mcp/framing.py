"""Line framing for newline-delimited JSON-RPC over a byte stream.

:class:`LineReader` reads one line at a time with a size limit. A line over the
limit is skipped to its end without holding it in memory; the reader keeps its
first and last :data:`KEEP_BYTES` bytes so that the caller can still find the id
of the message (VS Code writes ``id`` near the start of a line, the TypeScript
SDK writes it last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

#: Bytes kept from each end of a line that is too long.
KEEP_BYTES = 256
#: The size of one read while a too-long line is skipped.
_SKIP_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class TooLong:
    """A line over the limit: its size, and its first and last bytes."""

    size: int
    head: bytes
    tail: bytes


class LineReader:
    """Read lines from a binary stream, at most ``max_line_bytes`` each.

    ``next()`` returns the line without its ``\\n`` (and without a ``\\r``
    before it), a :class:`TooLong` for a line over the limit, or ``None`` at the
    end of the stream. Blank lines are skipped.
    """

    def __init__(self, stream: BinaryIO, max_line_bytes: int) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self._stream = stream
        self._max = max_line_bytes

    def next(self) -> bytes | TooLong | None:
        while True:
            # One byte more than the limit, plus room for "\r\n", tells a line
            # that is exactly at the limit from one that is over it.
            line = self._stream.readline(self._max + 2)
            if not line:
                return None
            if line.endswith(b"\n"):
                body = line[:-1]
                if body.endswith(b"\r"):
                    body = body[:-1]
                if len(body) > self._max:
                    return TooLong(len(body), body[:KEEP_BYTES], body[-KEEP_BYTES:])
                if body.strip():
                    return body
                continue
            if len(line) <= self._max:
                # The stream ended inside a line: the last line has no newline.
                body = line[:-1] if line.endswith(b"\r") else line
                if body.strip():
                    return body
                continue
            return self._skip(line)

    def _skip(self, start: bytes) -> TooLong:
        # One byte more than we keep, so that a "\r" before the newline can be
        # dropped and the tail still holds KEEP_BYTES bytes of the line.
        keep = KEEP_BYTES + 1
        head = start[:KEEP_BYTES]
        tail = start[-keep:]
        size = len(start)
        while True:
            chunk = self._stream.readline(_SKIP_CHUNK)
            if not chunk:
                break
            ended = chunk.endswith(b"\n")
            if ended:
                chunk = chunk[:-1]
            size += len(chunk)
            tail = (tail + chunk)[-keep:]
            if ended:
                break
        if tail.endswith(b"\r"):
            tail = tail[:-1]
            size -= 1
        return TooLong(size, head, tail[-KEEP_BYTES:])
