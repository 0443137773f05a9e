"""Line framing for newline-delimited JSON-RPC over a byte stream.

:class:`LineReader` reads one line at a time with a size limit. A line over the
limit is skipped to its end without holding it in memory; the reader keeps its
first and last :data:`KEEP_BYTES` bytes so that the caller can still find the id
of the message (VS Code writes ``id`` near the start of a line, the TypeScript
SDK writes it last).

The reader takes no more of the stream than the line it returns (``readline``
with a limit), so another reader can go on where it stopped. A line of many
megabytes arrives in pieces, which are joined once at its end.
A line may end with ``\r\n`` (the newline of Windows). A UTF-8 byte order mark
at the very start of the stream (what some Windows tools write first) is
skipped, as RFC 8259 allows a JSON parser to do; anywhere else it stays, and the
line is not valid JSON.
Each piece is looked at for control characters on the way (see
:attr:`LineReader.control_free`): that work is done while the writer of the line
is still writing, not after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

#: Bytes kept from each end of a line that is too long.
KEEP_BYTES = 256
#: The first read of a line asks for at most this much; most lines end within it.
READ_BYTES = 64 * 1024
#: Each further read of a long line asks for at most this much.
LONG_READ_BYTES = 1024 * 1024
#: The UTF-8 byte order mark.
BOM = b"\xef\xbb\xbf"
#: Every byte but the control characters (below 0x20), for ``bytes.translate``.
_NOT_CONTROL = bytes(range(0x20, 0x100))


@dataclass(frozen=True, slots=True)
class TooLong:
    """A line over the limit: its size, its first and last bytes, and the limit."""

    size: int
    head: bytes
    tail: bytes
    limit: int = 0


class LineReader:
    """Read lines from a binary stream, at most ``max_line_bytes`` each.

    ``next()`` returns the line without its ``\\n`` (and without a ``\\r``
    before it), a :class:`TooLong` for a line over the limit, or ``None`` at the
    end of the stream. Blank lines are skipped, and so is a byte order mark at
    the start of the stream.

    :attr:`control_free` tells whether the line that was returned last is known
    to hold no control character (no byte below 0x20): the parser of a long line
    then skips that scan (``jsonrpc.parse(..., control_free=True)``).
    """

    def __init__(self, stream: BinaryIO, max_line_bytes: int) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self._piece = stream.readline
        self._max = max_line_bytes
        self._at_start = True
        #: True when the last line is known to hold no byte below 0x20 (only a long
        #: line is looked at, piece by piece, as it arrives); False when unknown.
        self.control_free = False

    def next(self) -> bytes | TooLong | None:
        """The next line (see the class docstring)."""
        self.control_free = False
        while True:
            line = self._read_line()
            if self._at_start:
                self._at_start = False
                if isinstance(line, bytes) and line.startswith(BOM):
                    line = line[len(BOM) :]
            if line is None or isinstance(line, TooLong):
                return line
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > self._max:
                return TooLong(len(line), line[:KEEP_BYTES], line[-KEEP_BYTES:], self._max)
            if line and not line.isspace():
                return line

    def _read_line(self) -> bytes | TooLong | None:
        """The next line with its ``\\r`` (if any), a :class:`TooLong`, or ``None`` at the end."""
        # One byte more than the limit, plus room for "\r\n", tells a line that
        # is exactly at the limit from one that is over it.
        limit = self._max + 2
        first = self._piece(min(READ_BYTES, limit))
        if not first:
            return None
        if first.endswith(b"\n"):
            return first[:-1]
        pieces = [first]
        size = len(first)
        clean = not first.translate(None, _NOT_CONTROL)
        while True:
            if size >= limit:
                return self._skip(pieces, size)
            piece = self._piece(min(LONG_READ_BYTES, limit - size))
            if not piece:
                break  # the stream ended inside the line
            if clean and piece.translate(None, _NOT_CONTROL) not in (b"", b"\n"):
                clean = False
            if piece.endswith(b"\n"):
                pieces.append(piece[:-1])
                break
            pieces.append(piece)
            size += len(piece)
        # Joined once: the memory of the line is one block of its size, which the
        # allocator can give to the next long line.
        line = b"".join(pieces)
        pieces.clear()
        self.control_free = clean
        return line

    def _skip(self, pieces: list[bytes], size: int) -> TooLong:
        """Read to the end of a line that is too long, keeping only its head and tail."""
        head = _head(pieces)
        # One byte more than we keep, so that a "\r" before the newline can be
        # dropped and the tail still holds KEEP_BYTES bytes of the line.
        keep = KEEP_BYTES + 1
        tail = _tail(pieces, keep)
        pieces.clear()
        while True:
            piece = self._piece(LONG_READ_BYTES)
            if not piece:
                break
            ended = piece.endswith(b"\n")
            if ended:
                piece = piece[:-1]
            size += len(piece)
            tail = (tail + piece[-keep:])[-keep:]
            if ended:
                break
        if tail.endswith(b"\r"):
            tail = tail[:-1]
            size -= 1
        return TooLong(size, head, tail[-KEEP_BYTES:], self._max)


def _head(pieces: list[bytes]) -> bytes:
    head = b""
    for piece in pieces:
        head += piece[: KEEP_BYTES - len(head)]
        if len(head) >= KEEP_BYTES:
            break
    return head


def _tail(pieces: list[bytes], keep: int) -> bytes:
    tail = b""
    for piece in reversed(pieces):
        tail = piece[-keep:] + tail
        if len(tail) >= keep:
            break
    return tail[-keep:]
