"""An incremental parser of Server-Sent Events (the ``text/event-stream`` format).

This module is pure: :class:`SseParser` takes bytes as they arrive and returns
the events they complete. It follows the parsing rules of the WHATWG HTML
standard ("Server-sent events", section 9.2.6):

* A line ends with CRLF, LF or CR. A CR at the end of one chunk and an LF at the
  start of the next are one line end.
* One UTF-8 byte order mark at the start of the stream is dropped. Bytes that
  are not UTF-8 become U+FFFD.
* An empty line dispatches the event. A line that starts with ``:`` is a
  comment (servers send them as keep-alives) and is ignored.
* ``field:value`` splits at the first colon, and one space after the colon is
  dropped. A line without a colon is a field with an empty value.
* ``data`` appends its value and a newline to the data buffer; the last newline
  goes at dispatch, so ``data: a`` then ``data: b`` give ``"a\\nb"``.
  ``event`` sets the type of the event (``"message"`` when absent), ``id`` sets
  the last event id unless the value holds U+0000 (the id stays for the
  following events), and ``retry`` sets :attr:`SseParser.retry` when the value
  is ASCII digits, at most :data:`MAX_RETRY_MS` (a longer one is ignored, as
  a value that is not a number is). Other fields are ignored.
* An event without any ``data`` line is not dispatched.
* At the end of the stream, an event without its final empty line is dropped.

One limit keeps the memory bounded: the data of one event may hold at most
``max_event_bytes`` bytes (the bytes of its ``data`` values and the newlines
between them), and a line may be at most that long plus a few bytes for its
field name. Going over raises :class:`EventTooLarge`. Comment lines cost
nothing once they end, so a long stream of keep-alives uses no memory.

A line that goes on over several chunks is kept as its pieces and joined once
at its end; a long ``data`` value is joined without its field name, so the
event's data is the only copy. Its pieces are looked at for control
characters on the way (:attr:`Event.control_free`), so that the parse of a
long JSON message need not look again.
"""

from __future__ import annotations

import re
from typing import Final

from .errorbase import PeerFault
from .numbers import OutOfRange, peer_int

__all__ = ["MAX_RETRY_MS", "Event", "EventTooLarge", "SseError", "SseParser"]

#: Room for the field name and the colon of a line beside its value: a ``data:``
#: line with a value of exactly the limit still fits.
LINE_SLACK: Final = 16
#: The longest reconnection time of a ``retry`` field that is taken, in milliseconds (a day).
MAX_RETRY_MS: Final = 86_400_000

_LINE_END = re.compile(rb"[\r\n]")
_BOM: Final = b"\xef\xbb\xbf"
_DATA_FIELD: Final = b"data:"
#: Every byte but the control characters (below 0x20), for ``bytes.translate``.
_NOT_CONTROL: Final = bytes(range(0x20, 0x100))
_CR: Final = 0x0D
_LF: Final = 0x0A


class Event:
    """One dispatched event.

    :attr:`raw` holds the data as it came (UTF-8 bytes); :attr:`data` is its text,
    decoded at the first use, so a large event need not exist as text at all.
    Events compare by their data, type and last event id.
    """

    __slots__ = ("_data", "raw", "type", "last_event_id", "control_free")

    def __init__(
        self,
        data: str | None = None,
        type: str = "message",
        last_event_id: str = "",
        *,
        raw: bytes | None = None,
        control_free: bool = False,
    ) -> None:
        if raw is None:
            if data is None:
                raise TypeError("an event needs its data or its raw bytes")
            raw = data.encode("utf-8", "surrogatepass")
        self._data = data
        #: The data lines joined with ``b"\\n"``, as bytes.
        self.raw: bytes = raw
        #: The value of the ``event`` field, or ``"message"``.
        self.type = type
        #: The last event id at the time of dispatch (``""`` before any ``id`` field).
        self.last_event_id = last_event_id
        #: True when :attr:`raw` is known to hold no byte below 0x20 (a long ``data`` line,
        #: looked at piece by piece as it arrived); False when unknown.
        self.control_free = control_free

    @property
    def data(self) -> str:
        """The data lines joined with ``"\\n"`` (bytes that are not UTF-8 become U+FFFD)."""
        if self._data is None:
            self._data = self.raw.decode("utf-8", "replace")
        return self._data

    def _key(self) -> tuple[str, str, str]:
        return (self.data, self.type, self.last_event_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Event(data={self.data!r}, type={self.type!r}, last_event_id={self.last_event_id!r})"


class SseError(PeerFault):
    """The event stream cannot be parsed further."""


class EventTooLarge(SseError):
    """An event, or a line, is longer than the limit of the parser."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event is longer than {limit} bytes")
        self.limit = limit


class SseParser:
    """Parse a ``text/event-stream`` body chunk by chunk.

    Feed it the bytes of the body in any pieces; each call returns the events
    those bytes complete, in order. After :class:`EventTooLarge` the parser
    refuses more input, because the rest of the stream has lost its framing.
    """

    def __init__(self, max_event_bytes: int) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be at least 1")
        self.max_event_bytes = max_event_bytes
        #: The reconnection time in milliseconds of the last valid ``retry`` field, if any.
        self.retry: int | None = None
        self._max_line = max_event_bytes + LINE_SLACK
        #: The pieces of a line that goes on in the next chunk, their size, and whether
        #: they hold no control character (a long ``data`` line is joined once, at its end).
        self._line: list[bytes] = []
        self._line_size = 0
        self._line_clean = True
        self._data_clean = True
        self._data: list[bytes] = []
        self._data_size = 0
        self._type = b""
        self._last_id = ""
        self._at_start = True
        self._skip_lf = False
        self._failed = False

    def feed(self, chunk: bytes) -> list[Event]:
        """Take the next bytes of the stream; return the events they complete.

        Raises:
            EventTooLarge: the event or the line being read goes over the limit.
        """
        if self._failed:
            raise EventTooLarge(self.max_event_bytes)
        events: list[Event] = []
        start = 0
        end_of_chunk = len(chunk)
        if self._skip_lf and end_of_chunk:
            self._skip_lf = False
            if chunk[0] == _LF:
                start = 1
        while start < end_of_chunk:
            match = _LINE_END.search(chunk, start)
            if match is None:
                self._append(chunk, start, end_of_chunk)
                break
            end = match.start()
            event: Event | None
            if self._line:
                self._append(chunk, start, end)
                event = self._process_long()
            else:
                if end - start > self._max_line:
                    self._fail()
                event = self._process(chunk[start:end])
            start = end + 1
            if chunk[end] == _CR:
                if start < end_of_chunk:
                    if chunk[start] == _LF:
                        start += 1
                else:
                    self._skip_lf = True
            if event is not None:
                events.append(event)
        return events

    def _append(self, chunk: bytes, start: int, end: int) -> None:
        if end > start:
            piece = chunk if start == 0 and end == len(chunk) else chunk[start:end]
            self._line_size += len(piece)
            if self._line_size > self._max_line:
                self._fail()
            if self._line_clean and piece.translate(None, _NOT_CONTROL):
                self._line_clean = False
            self._line.append(piece)

    def _process_long(self) -> Event | None:
        """The line of :attr:`_line`: a ``data`` value is joined once, without its field name."""
        pieces, clean = self._line, self._line_clean
        self._line, self._line_size, self._line_clean = [], 0, True
        first = pieces[0]
        if self._at_start and first.startswith(_BOM):
            first = first[len(_BOM) :]
        start = len(_DATA_FIELD) + (1 if first[len(_DATA_FIELD) : len(_DATA_FIELD) + 1] == b" " else 0)
        if len(pieces) < 2 or not first.startswith(_DATA_FIELD) or start == len(first):
            return self._process(b"".join(pieces))  # copied once more, for this rare shape
        self._at_start = False
        value = b"".join([first[start:], *pieces[1:]])
        pieces.clear()
        self._add_data(value, clean)
        return None

    def _fail(self) -> None:
        self._failed = True
        self._line.clear()
        self._line_size = 0
        self._data.clear()
        raise EventTooLarge(self.max_event_bytes)

    def _process(self, line: bytes) -> Event | None:
        """One line (a slice of a chunk, or the pieces of a long line joined); a value is copied once."""
        if self._at_start:
            self._at_start = False
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
        if not line:
            return self._dispatch()
        if line[0] == 0x3A:  # ":" starts a comment
            return None
        colon = line.find(b":")
        if colon < 0:
            name, start = bytes(line), len(line)
        else:
            name, start = bytes(line[:colon]), colon + 1
            if line[start : start + 1] == b" ":
                start += 1
        if name == b"data":
            self._add_data(line[start:], False)
            return None
        value = bytes(line[start:])
        if name == b"event":
            self._type = value
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            # Only ASCII digits are a reconnection time (WHATWG); numbers.py bounds it.
            if value.isdigit():
                try:
                    self.retry = peer_int(value.decode("ascii"), name="retry", low=0, high=MAX_RETRY_MS)
                except OutOfRange:
                    pass
        return None

    def _add_data(self, value: bytes, clean: bool) -> None:
        size = self._data_size + len(value) + (1 if self._data else 0)
        if size > self.max_event_bytes:
            self._fail()
        self._data_clean = clean and not self._data
        self._data.append(value)
        self._data_size = size

    def _dispatch(self) -> Event | None:
        if not self._data:
            self._type = b""
            return None
        raw = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        event_type = self._type.decode("utf-8", "replace") if self._type else "message"
        clean = self._data_clean and len(self._data) == 1
        self._data = []
        self._data_size = 0
        self._type = b""
        return Event(type=event_type, last_event_id=self._last_id, raw=raw, control_free=clean)
