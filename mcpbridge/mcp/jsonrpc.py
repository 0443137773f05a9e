"""JSON-RPC 2.0 messages: parse one line, serialize one line.

This module is pure. It turns the bytes of one line into one of four immutable
message types, or raises :class:`FrameError` with the name of what is wrong and
the id of the message when that id could be read.

Rules:

* A message is one JSON object. Batches do not exist in MCP.
* A request id is a string or an integer (``true`` is not an integer here).
  ``null`` is allowed only as the id of an error response.
* ``params`` is an object or absent.
* Nesting deeper than ``max_depth`` is refused before the message is used, so a
  hostile peer cannot make a recursive consumer blow the stack.
* Invalid UTF-8, a lone surrogate escape, ``NaN``/``Infinity`` and numbers that
  do not fit a float are parse errors: they could not be written back as JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from .errorbase import PeerFault

RequestId: TypeAlias = str | int

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
#: 2025-11-25: a resource was not found (2026-07-28 uses INVALID_PARAMS).
RESOURCE_NOT_FOUND_2025: Final = -32002
#: 2025-11-25: the server needs the user to open a URL first.
URL_ELICITATION_REQUIRED: Final = -32042
#: 2026-07-28: an ``Mcp-Param-*`` header does not match the body.
HEADER_MISMATCH: Final = -32020
#: 2026-07-28: the request needs a client capability it did not declare.
MISSING_CLIENT_CAPABILITY: Final = -32021
#: 2026-07-28: the server does not speak the requested revision.
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022


class _NoData:
    """The sentinel for an error object without a ``data`` member."""

    _instance: _NoData | None = None

    def __new__(cls) -> _NoData:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DATA"

    def __bool__(self) -> bool:
        return False


NO_DATA: Final = _NoData()


class RawStrings:
    """The long strings of one parsed line, with their JSON text in that line.

    :func:`parse` gives each message of a long line such a record, and each message
    of a line too short to hold a long string :data:`SHORT_LINE`. It holds each long
    string that needed no escape (a file, an image in base64) with a view of its
    bytes between the quotes. :func:`serialize_parts`
    writes such a string, when it meets the very same object again, as a view of
    those bytes: it is neither encoded nor copied again. The views keep the line
    alive, so a holder drops this record as soon as the message is written.
    """

    __slots__ = ("_items", "long_line")

    def __init__(self, *, long_line: bool = True) -> None:
        self._items: dict[int, tuple[str, memoryview]] = {}
        #: False for :data:`SHORT_LINE`: the line was too short to hold a long string.
        self.long_line = long_line

    def add(self, value: str, text: memoryview) -> None:
        """Record ``text``, the JSON text of ``value`` between its quotes."""
        self._items[id(value)] = (value, text)

    def text_of(self, value: str) -> memoryview | None:
        """The recorded JSON text of this very object (not of an equal string), or ``None``."""
        item = self._items.get(id(value))
        return item[1] if item is not None and item[0] is value else None

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<RawStrings of {len(self._items)} strings>"


#: The record of every line shorter than a long string: such a message holds no long
#: string, so :func:`serialize_parts` does not look for one. Never added to.
SHORT_LINE: Final = RawStrings(long_line=False)


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None = None
    #: The long strings of the line it was parsed from, if any (see :class:`RawStrings`).
    raw: RawStrings | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any] | None = None
    raw: RawStrings | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    result: Any
    raw: RawStrings | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class ErrorObject:
    code: int
    message: str
    data: Any = NO_DATA

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not NO_DATA:
            obj["data"] = self.data
        return obj


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    id: RequestId | None
    error: ErrorObject


Message: TypeAlias = Request | Notification | Response | ErrorResponse


class FrameError(PeerFault):
    """A line that is not a usable JSON-RPC message.

    ``cause`` is one of ``parse_error``, ``too_deep``, ``invalid_request_shape``
    and ``invalid_id``. ``id`` is the id of the message when the JSON parsed far
    enough to read a valid one, else ``None``. ``is_response`` tells whether
    the line looked like a response (it has ``result`` or ``error`` and no
    ``method``), which a receiver usually drops instead of answering. Only such
    a line may stand for the lost answer to a request of the receiver: a message
    with a ``method`` member, even ``null``, is a request or a notification.
    """

    def __init__(
        self,
        cause: str,
        *,
        id: RequestId | None = None,
        detail: str | None = None,
        is_response: bool = False,
    ) -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause
        self.id = id
        self.detail = detail
        self.is_response = is_response

    @property
    def words(self) -> str:
        """What is wrong with the line, for a log line or the detail of an error: the cause in
        words, with the detail when it is words too (never the name of a class)."""
        words = _FRAME_WORDS.get(self.cause, "not a valid JSON-RPC message")
        detail = self.detail
        return f"{words} ({detail})" if detail and " " in detail else words


#: The causes of :class:`FrameError` in words.
_FRAME_WORDS: Final = {
    "parse_error": "not valid JSON",
    "too_deep": "nested deeper than the limit of the bridge",
    "invalid_request_shape": "not a valid JSON-RPC 2.0 message",
    "invalid_id": "not a valid JSON-RPC 2.0 message",
}


# Python's json accepts a lone surrogate escape and gives a string that cannot be
# encoded as UTF-8. A backslash starts an escape only when the run of backslashes
# it ends has an odd length (``\\udc00`` is a backslash and the text "udc00"),
# so each pattern starts at the start of a run and steps over its pairs.
# An escape of a valid high+low pair:
_SURROGATE_PAIR = re.compile(rb"(?<!\\)((?:\\\\)*)\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
# Any surrogate escape; what is left of it after the pairs are gone is lone:
_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(raw: bytes | bytearray) -> bool:
    if _SURROGATE.search(raw) is None:
        return False
    return _SURROGATE.search(_SURROGATE_PAIR.sub(rb"\1_", raw)) is not None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("the number does not fit a float")
    return value


#: One decoder for every parse (``json.loads`` with hooks would build a new one each time).
_decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_parse_float)
_scan: Any = _decoder.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__
_TEXT_SPACE: Final = " \t\n\r"
#: Lines longer than this skip the bracket count and go to the depth walk at once.
_COUNT_LIMIT: Final = 1024 * 1024


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Tell whether ``value`` nests deeper than ``limit`` levels (the root is 1)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node if isinstance(child, (dict, list)))
    return False


def parse_json(line: bytes | str, *, max_depth: int) -> Any:
    """Parse one JSON text with the rules of this module.

    Raises:
        FrameError: ``parse_error`` or ``too_deep``.
    """
    return _parse_json(line, max_depth)[0]


def _parse_json(
    line: bytes | bytearray | str, max_depth: int, control_free: bool = False
) -> tuple[Any, RawStrings | None]:
    """The value of ``line``, and for a long line the record of its long strings (maybe none)."""
    if len(line) < _LONG_STRING:
        return _parse_text(line, max_depth), SHORT_LINE
    if isinstance(line, (bytes, bytearray)) and len(line) >= _SPLICE_MIN:
        spliced = _parse_spliced(line, max_depth, control_free)
        if spliced is not None:
            return spliced
        return _parse_text(line, max_depth), RawStrings()
    return _parse_text(line, max_depth), None


def _parse_text(line: bytes | bytearray | str, max_depth: int) -> Any:
    if isinstance(line, (bytes, bytearray)):
        raw = line
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError("parse_error", detail="invalid UTF-8") from exc
    else:
        text = line
        try:
            raw = line.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise FrameError("parse_error", detail="a lone surrogate") from exc
    # A lone backslash is found at memory speed; the two-character search is slower.
    if "\\" in text and "\\u" in text and _has_lone_surrogate(raw):
        raise FrameError("parse_error", detail="a lone surrogate escape")
    # Counting brackets is fast C code; only a line with many of them needs
    # the walk that measures the real depth. A long line is walked at once: the
    # walk visits only the containers, and the bulk of a long line is strings.
    brackets = max_depth + 1 if len(text) > _COUNT_LIMIT else text.count("{") + text.count("[")
    try:
        if text and text[0] not in _TEXT_SPACE:
            # What JSONDecoder.decode does, without its two frames and whitespace matches.
            value, end = _scan(text, 0)
            if end != len(text) and text[end:].strip(_TEXT_SPACE):
                raise json.JSONDecodeError("Extra data", text, end)
        else:
            value = _decoder.decode(text)
    except StopIteration as exc:
        raise FrameError("parse_error", detail="JSONDecodeError") from exc
    except RecursionError as exc:
        raise FrameError("too_deep", detail=f"limit: {max_depth} levels") from exc
    except (ValueError, TypeError) as exc:
        raise FrameError("parse_error", detail=type(exc).__name__) from exc
    if brackets > max_depth and _depth_exceeds(value, max_depth):
        raise FrameError(
            "too_deep",
            id=_peek_id(value),
            detail=f"limit: {max_depth} levels",
            is_response=_is_response(value),
        )
    return value


# A long line is mostly one or a few long strings (a file, an image in base64).
# Decoding the whole line and scanning those strings character by character costs
# more than everything else the bridge does with the line, so a long line is parsed
# in two parts: each long string that needs no escape is cut out of the line and
# decoded on its own, at memory speed, and the rest (the *skeleton*, with a short
# mark in the place of each such string) is parsed as usual. The strings are
# checked as the JSON decoder would check them: valid UTF-8, no control character,
# and neither a quote nor a backslash, so the text between their quotes is their
# value exactly. The result is the one the whole line would give, and a line that
# is not valid JSON is refused by the same rule. Their text in the line is recorded
# (:class:`RawStrings`) so that :func:`serialize_parts` can write them out again as
# they came.

#: Lines at least this long look for long strings to cut out.
_SPLICE_MIN: Final = 256 * 1024
#: A line with more quotes than this is parsed as a whole: its bulk is not a few long strings.
_SPLICE_MAX_QUOTES: Final = 4096
#: The start of the mark of a cut-out string in the skeleton (its JSON text, and its value).
_CUT_MARK_TEXT: Final = b"\\u0000mcpbridge-cut-"
_CUT_MARK: Final = "\x00mcpbridge-cut-"
#: Every byte that may stand as it is in a JSON string (all but the control characters).
_NOT_CONTROL: Final = bytes(range(0x20, 0x100))
_BACKSLASH: Final = 0x5C
_JSON_SPACE: Final = b" \t\r\n"


def _long_plain_strings(raw: bytes | bytearray) -> list[tuple[int, int]] | None:
    """The (start, end) of the text of each long string value of ``raw`` that holds no backslash.

    ``None`` when the line is not worth it (too many strings), or when it has no
    such string. The scan follows the quotes only: a quote outside a string opens
    one, and the first quote after it that no backslash escapes closes it. A line
    that is not valid JSON may be cut wrongly, but then its skeleton is not valid
    JSON either.
    """
    find = raw.find
    size = len(raw)
    found: list[tuple[int, int]] = []
    position = 0
    quotes = 0
    while True:
        start = find(b'"', position)
        if start < 0:
            break
        end = find(b'"', start + 1)
        quotes += 2
        while end > 0 and raw[end - 1] == _BACKSLASH:
            run = end - 1
            while raw[run] == _BACKSLASH:
                run -= 1
            if (end - 1 - run) % 2 == 0:
                break  # an even run of backslashes: the quote is not escaped
            end = find(b'"', end + 1)
            quotes += 1
        if end < 0 or quotes > _SPLICE_MAX_QUOTES:
            return None  # no closing quote (the decoder reports it), or too many strings
        position = end + 1
        if end - start - 1 < _LONG_STRING or find(b"\\", start + 1, end) >= 0:
            continue
        after = position
        while after < size and raw[after] in _JSON_SPACE:
            after += 1
        if after < size and raw[after] == 0x3A:  # ":" - a member name, never cut out
            continue
        found.append((start + 1, end))
    return found or None


def _parse_spliced(
    raw: bytes | bytearray, max_depth: int, control_free: bool
) -> tuple[Any, RawStrings] | None:
    """Parse a long line with its long plain strings cut out; ``None`` to parse it as a whole."""
    spans = _long_plain_strings(raw)
    if spans is None:
        return None
    controls = b"" if control_free else raw.translate(None, _NOT_CONTROL)
    if controls:
        # Tabs, carriage returns and newlines may stand between the tokens; a string refuses them.
        if controls.translate(None, _JSON_SPACE):
            return None
        for start, end in spans:
            if any(raw.find(space, start, end) >= 0 for space in (b"\t", b"\r", b"\n")):
                return None
    view = memoryview(raw)
    values: list[str] = []
    pieces: list[bytes | bytearray] = []
    last = 0
    for index, (start, end) in enumerate(spans):
        try:
            values.append(str(view[start:end], "utf-8"))
        except UnicodeDecodeError as exc:
            raise FrameError("parse_error", detail="invalid UTF-8") from exc
        pieces += (raw[last:start], _CUT_MARK_TEXT, str(index).encode("ascii"))
        last = end
    pieces.append(raw[last:])
    tree = _parse_text(b"".join(pieces), max_depth)
    # A string of the line that looks like a mark, or a member given twice, makes a mark
    # appear twice or not at all: then the line is parsed as a whole.
    if not _put_back(tree, values):
        return None
    strings = RawStrings()
    for value, (start, end) in zip(values, spans, strict=True):
        strings.add(value, view[start:end])
    return tree, strings


def _put_back(tree: Any, values: list[str]) -> bool:
    """Put each cut-out string back in the place of its mark; False unless each mark is found once."""
    used: set[int] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        items = node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
        for key, value in items:
            kind = type(value)
            if kind is str:
                if value.startswith(_CUT_MARK):
                    number = value[len(_CUT_MARK) :]
                    if not (number.isascii() and number.isdigit()) or len(number) > 6:
                        return False
                    index = int(number)
                    if index >= len(values) or index in used:
                        return False
                    used.add(index)
                    node[key] = values[index]
            elif kind is dict or kind is list:
                stack.append(value)
    return len(used) == len(values)


def _peek_id(value: Any) -> RequestId | None:
    if isinstance(value, dict):
        candidate = value.get("id")
        if _is_id(candidate):
            return candidate
    return None


def _is_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def from_obj(obj: Any) -> Message:
    """Turn a parsed JSON value into a message.

    Raises:
        FrameError: ``invalid_request_shape`` or ``invalid_id``.
    """
    return _from_obj(obj, None)


def _from_obj(obj: Any, raw: RawStrings | None) -> Message:
    if not isinstance(obj, dict):
        raise FrameError("invalid_request_shape", detail="the message is not an object")
    msg_id = obj.get("id")
    has_id = "id" in obj
    kind = type(msg_id)
    good_id = msg_id if kind is int or kind is str or _is_id(msg_id) else None
    if obj.get("jsonrpc") != "2.0":
        raise FrameError(
            "invalid_request_shape", id=good_id, detail="jsonrpc is not 2.0", is_response=_is_response(obj)
        )
    if "method" in obj:  # a request or a notification, never a response (even "method": null)
        method = obj["method"]
        if not isinstance(method, str):
            raise FrameError("invalid_request_shape", id=good_id, detail="method is not a string")
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            raise FrameError("invalid_request_shape", id=good_id, detail="params is not an object")
        if "result" in obj or "error" in obj:
            raise FrameError("invalid_request_shape", id=good_id, detail="a request with a result")
        if not has_id:
            return Notification(method, params, raw)
        if good_id is None:
            raise FrameError("invalid_id", detail="the id is not a string or an integer")
        return Request(good_id, method, params, raw)
    if "result" in obj and "error" not in obj:
        if good_id is None:
            raise FrameError("invalid_id", detail="the id of a response", is_response=True)
        return Response(good_id, obj["result"], raw)
    if "error" in obj and "result" not in obj:
        # An error response may leave out an id it could not read.
        error = obj["error"]
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), int)
            or isinstance(error.get("code"), bool)
            or not isinstance(error.get("message"), str)
        ):
            raise FrameError("invalid_request_shape", id=good_id, detail="the error object", is_response=True)
        if msg_id is not None and good_id is None:
            raise FrameError("invalid_id", detail="the id of an error response", is_response=True)
        error_object = ErrorObject(error["code"], error["message"], error.get("data", NO_DATA))
        return ErrorResponse(good_id, error_object)
    # Both a result and an error: still a response, which a receiver drops, never answers.
    detail = "no method, result or error"
    raise FrameError("invalid_request_shape", id=good_id, detail=detail, is_response=_is_response(obj))


def _is_response(obj: Any) -> bool:
    """Whether a message that is not valid is a response, which a receiver drops and never answers.

    It has a ``result`` or an ``error`` and no ``method`` member: a method, even ``null``,
    makes a request or a notification, which never stands for an answer.
    """
    return isinstance(obj, dict) and "method" not in obj and ("result" in obj or "error" in obj)


def parse(line: bytes | bytearray | str, *, max_depth: int, control_free: bool = False) -> Message:
    """Parse one line into a message.

    ``line`` may be a ``bytearray`` that nothing changes afterwards (a body read into
    one buffer): the long strings of the message are views of it.

    A long string of a long line that needed no escape is recorded in the
    message's ``raw`` (see :class:`RawStrings`). ``control_free``: the caller has
    seen every byte of the line and none is below 0x20 (the line reader looks at
    the pieces of a long line as they arrive), so the parse need not look again.

    Raises:
        FrameError: the line is not a usable message.
    """
    if len(line) < _LONG_STRING:  # the usual message: no long string can be in it
        return _from_obj(_parse_text(line, max_depth), SHORT_LINE)
    value, raw = _parse_json(line, max_depth, control_free)
    return _from_obj(value, raw)


def to_obj(msg: Message) -> dict[str, Any]:
    """The JSON object of a message."""
    if isinstance(msg, Request):
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": msg.id, "method": msg.method}
        if msg.params is not None:
            obj["params"] = msg.params
        return obj
    if isinstance(msg, Notification):
        obj = {"jsonrpc": "2.0", "method": msg.method}
        if msg.params is not None:
            obj["params"] = msg.params
        return obj
    if isinstance(msg, Response):
        return {"jsonrpc": "2.0", "id": msg.id, "result": msg.result}
    # An error whose id could not be read leaves the id out: both MCP schemas
    # allow only a string or an integer there (JSON-RPC 2.0 itself says null).
    if msg.id is None:
        return {"jsonrpc": "2.0", "error": msg.error.to_obj()}
    return {"jsonrpc": "2.0", "id": msg.id, "error": msg.error.to_obj()}


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# JSONEncoder.encode makes a new C encoder for each call; this one is made once. It
# keeps no table of the containers it is in (``markers``), so it can serve every
# thread at once; a message that contains itself ends in RecursionError instead.
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encoder: Any = (
    _c_make_encoder(
        None, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if _c_make_encoder is not None
    else None
)


def _encode_text(obj: Any) -> str:
    """The compact JSON text of ``obj`` (``ValueError`` or ``TypeError`` if it has none)."""
    if _c_encoder is None:
        return _encoder.encode(obj)
    try:
        return "".join(_c_encoder(obj, 0))
    except RecursionError as exc:
        raise ValueError("the value is nested too deeply, or contains itself") from exc


# Long strings (a file, an image in base64) are most of a large message, and the
# encoder escapes them one character at a time. A long string that needs no escape
# is written as it is instead: the encoder gets the message with a mark in its
# place, and the string goes into the output beside the encoder's text. A string
# that came from a parsed line (:class:`RawStrings`) is written as a view of that
# line. The output is the same, byte for byte, as the encoder's.
#: A string at least this long is put into the output as it is, when it needs no escape.
_LONG_STRING: Final = 64 * 1024
#: The walk that looks for long strings stops after this many values.
_WALK_BUDGET: Final = 256
_MARK: Final = "\x00mcpbridge:long-string\x00"
_MARK_ENCODED: Final = '"\\u0000mcpbridge:long-string\\u0000"'

#: One piece of an output line: the bytes of the encoder, or a view of a parsed line.
Piece: TypeAlias = bytes | memoryview


def _plain_bytes(data: bytes) -> bool:
    """Tell whether UTF-8 ``data`` needs no escape in JSON: no quote, backslash or control character."""
    return data.find(b'"') < 0 and data.find(b"\\") < 0 and not data.translate(None, _NOT_CONTROL)


def _lift(node: Any, longs: list[Piece], budget: list[int], raw: RawStrings | None) -> Any:
    """``node``, or a copy in which each long plain string is the mark (its bytes go to ``longs``)."""
    copy: Any = None
    items = node.items() if type(node) is dict else enumerate(node)
    for key, value in items:
        budget[0] -= 1
        if budget[0] < 0:
            break
        kind = type(value)
        if kind is str:
            if len(value) < _LONG_STRING:
                continue
            text = raw.text_of(value) if raw is not None else None
            if text is not None:
                longs.append(text)
            else:
                try:
                    data = value.encode("utf-8")
                except UnicodeEncodeError:
                    continue  # the encoder's output fails the same way, with the usual error
                if not _plain_bytes(data):
                    continue
                longs.append(data)
            lifted: Any = _MARK
        elif kind is dict or kind is list:
            lifted = _lift(value, longs, budget, raw)
            if lifted is value:
                continue
        else:
            continue
        if copy is None:
            copy = dict(node) if type(node) is dict else list(node)
        copy[key] = lifted
    return node if copy is None else copy


def _has_long(obj: Any) -> bool:
    """Tell whether a string of ``obj`` may be long: the cheap test before :func:`_lift`."""
    budget = _WALK_BUDGET
    stack = [obj]
    while stack:
        node = stack.pop()
        for value in node.values() if type(node) is dict else node:
            budget -= 1
            if budget < 0:
                return False
            kind = type(value)
            if kind is str:
                if len(value) >= _LONG_STRING:
                    return True
            elif kind is dict or kind is list:
                stack.append(value)
    return False


def _encode(obj: Any, end: str, raw: RawStrings | None) -> list[Piece]:
    if raw is SHORT_LINE:
        pass  # no string of the message can be long: nothing to look for
    elif (type(obj) is dict or type(obj) is list) and (raw is not None or _has_long(obj)):
        longs: list[Piece] = []
        skeleton = _lift(obj, longs, [_WALK_BUDGET], raw)
        if longs:
            pieces = _encode_text(skeleton).split(_MARK_ENCODED)
            if len(pieces) == len(longs) + 1:
                pieces[-1] += end
                parts: list[Piece] = [pieces[0].encode("utf-8")]
                for long, piece in zip(longs, pieces[1:], strict=True):
                    parts += (b'"', long, ('"' + piece).encode("utf-8"))
                return parts
            # a string of the message holds the mark itself: encode it as a whole
    return [(_encode_text(obj) + end).encode("utf-8")]


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj``, without a newline.

    JSON escapes a newline inside a string, so the output never holds a raw
    newline and fits on one line.
    """
    return _join(_encode(obj, "", None))


def serialize(msg: Message | dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON, ending with ``b"\\n"``."""
    if type(msg) is Request and msg.raw is SHORT_LINE:  # a forwarded request: no long string
        return (_encode_text(to_obj(msg)) + "\n").encode("utf-8")
    return _join(serialize_parts(msg))


def serialize_parts(msg: Message | dict[str, Any], *, raw: RawStrings | None = None) -> list[Piece]:
    """The line of :func:`serialize` in pieces, to be written one after the other.

    A long string recorded in ``raw`` (by default the message's own ``raw``) is a
    view of the line it was parsed from: a large result passes the bridge without
    being encoded or copied again.
    """
    if type(msg) is dict:
        return _encode(msg, "\n", raw)
    if isinstance(msg, dict):
        return _encode(msg, "\n", raw)
    if raw is None and not isinstance(msg, ErrorResponse):
        raw = msg.raw
    return _encode(to_obj(msg), "\n", raw)


def _join(parts: list[Piece]) -> bytes:
    first = parts[0]
    if len(parts) == 1 and type(first) is bytes:
        return first
    return b"".join(parts)


def error_response(id: RequestId | None, code: int, message: str, data: Any = NO_DATA) -> ErrorResponse:
    """Build an error response."""
    return ErrorResponse(id, ErrorObject(code, message, data))
