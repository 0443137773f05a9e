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

The memory follows the bytes, however they are framed: a line that goes on
over several chunks is gathered in one growing buffer, and so are the values of
an event of several ``data`` lines, so neither costs an object per chunk or per
line (an event of a million ``data:xy`` lines is one buffer of 3 MB, not a
million objects). One event holds at most about twice the limit: its buffer and,
at its end, the bytes of the event. The pieces of a long line are looked at for
control characters on the way (:attr:`Event.control_free`), so that the parse
of a long JSON message need not look again.
"""

from __future__ import annotations

import re
from typing import Final

from ..errorbase import PeerFault
from ..numbers import OutOfRange, peer_int

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
        #: The start of a line that goes on in the next chunk (one buffer, however many
        #: chunks it came in), and whether it holds no control character.
        self._line = bytearray()
        self._line_clean = True
        #: The data of the event: None before its first ``data`` line, the value of a single
        #: line as it is, or one buffer that the values of further lines extend.
        self._data: bytes | bytearray | None = None
        self._data_clean = True
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
            if len(self._line) + end - start > self._max_line:
                self._fail()
            piece = chunk if start == 0 and end == len(chunk) else chunk[start:end]
            if self._line_clean and piece.translate(None, _NOT_CONTROL):
                self._line_clean = False
            self._line += piece

    def _process_long(self) -> Event | None:
        """The line of :attr:`_line`: a ``data`` value is copied once, without its field name."""
        line, clean = self._line, self._line_clean
        self._line, self._line_clean = bytearray(), True
        field = len(_BOM) if self._at_start and line.startswith(_BOM) else 0
        if not line.startswith(_DATA_FIELD, field):
            return self._process(bytes(line))
        self._at_start = False
        start = field + len(_DATA_FIELD)
        if line[start : start + 1] == b" ":
            start += 1
        with memoryview(line) as view, view[start:] as value:
            self._add_data(value, clean)
        return None

    def _fail(self) -> None:
        self._failed = True
        self._line = bytearray()
        self._data = None
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

    def _add_data(self, value: bytes | memoryview, clean: bool) -> None:
        """Add the value of a ``data`` line: the first is kept as it is, further ones extend one buffer."""
        data = self._data
        if data is None:
            if len(value) > self.max_event_bytes:
                self._fail()
            self._data = bytes(value)
            self._data_clean = clean
            return
        if len(data) + 1 + len(value) > self.max_event_bytes:
            self._fail()
        if not isinstance(data, bytearray):
            data = self._data = bytearray(data)
        data += b"\n"
        data += value
        self._data_clean = False

    def _dispatch(self) -> Event | None:
        data = self._data
        if data is None:
            self._type = b""
            return None
        self._data = None
        raw = data if isinstance(data, bytes) else bytes(data)
        event_type = self._type.decode("utf-8", "replace") if self._type else "message"
        self._type = b""
        return Event(type=event_type, last_event_id=self._last_id, raw=raw, control_free=self._data_clean)
