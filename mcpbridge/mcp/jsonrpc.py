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
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

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


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    result: Any


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


class FrameError(Exception):
    """A line that is not a usable JSON-RPC message.

    ``cause`` is one of ``parse_error``, ``too_deep``, ``invalid_request_shape``
    and ``invalid_id``. ``id`` is the id of the message when the JSON parsed far
    enough to read a valid one, else ``None``. ``is_response`` tells whether
    the line looked like a response (it has ``result`` or ``error`` and no
    ``method``), which a receiver usually drops instead of answering.
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


# Python's json accepts a lone surrogate escape and gives a string that cannot be
# encoded as UTF-8. A backslash starts an escape only when the run of backslashes
# it ends has an odd length (``\\udc00`` is a backslash and the text "udc00"),
# so each pattern starts at the start of a run and steps over its pairs.
# An escape of a valid high+low pair:
_SURROGATE_PAIR = re.compile(
    rb"(?<!\\)((?:\\\\)*)\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
# Any surrogate escape; what is left of it after the pairs are gone is lone:
_SURROGATE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _has_lone_surrogate(raw: bytes) -> bool:
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
    if isinstance(line, bytes):
        raw = line
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError("parse_error", detail="invalid UTF-8") from None
    else:
        text = line
        try:
            raw = line.encode("utf-8")
        except UnicodeEncodeError:
            raise FrameError("parse_error", detail="a lone surrogate") from None
    # A lone backslash is found at memory speed; the two-character search is slower.
    if "\\" in text and "\\u" in text and _has_lone_surrogate(raw):
        raise FrameError("parse_error", detail="a lone surrogate escape")
    # Counting brackets is fast C code; only a line with many of them needs
    # the walk that measures the real depth. A long line is walked at once: the
    # walk visits only the containers, and the bulk of a long line is strings.
    brackets = max_depth + 1 if len(text) > _COUNT_LIMIT else text.count("{") + text.count("[")
    try:
        value = _decoder.decode(text)
    except RecursionError:
        raise FrameError("too_deep", detail=f"limit: {max_depth} levels") from None
    except (ValueError, TypeError) as exc:
        raise FrameError("parse_error", detail=type(exc).__name__) from None
    if brackets > max_depth and _depth_exceeds(value, max_depth):
        raise FrameError("too_deep", id=_peek_id(value), detail=f"limit: {max_depth} levels")
    return value


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
    if not isinstance(obj, dict):
        raise FrameError("invalid_request_shape", detail="the message is not an object")
    msg_id = obj.get("id")
    has_id = "id" in obj
    good_id = msg_id if _is_id(msg_id) else None
    is_response = "method" not in obj and ("result" in obj or "error" in obj)
    if obj.get("jsonrpc") != "2.0":
        raise FrameError(
            "invalid_request_shape", id=good_id, detail="jsonrpc is not 2.0", is_response=is_response
        )
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise FrameError("invalid_request_shape", id=good_id, detail="method is not a string")
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            raise FrameError("invalid_request_shape", id=good_id, detail="params is not an object")
        if "result" in obj or "error" in obj:
            raise FrameError("invalid_request_shape", id=good_id, detail="a request with a result")
        if not has_id:
            return Notification(method, params)
        if good_id is None:
            raise FrameError("invalid_id", detail="the id is not a string or an integer")
        return Request(good_id, method, params)
    if "result" in obj and "error" not in obj:
        if good_id is None:
            raise FrameError("invalid_id", detail="the id of a response", is_response=True)
        return Response(good_id, obj["result"])
    if "error" in obj and "result" not in obj:
        # An error response may leave out an id it could not read.
        error = obj["error"]
        if (
            not isinstance(error, dict)
            or not isinstance(error.get("code"), int)
            or isinstance(error.get("code"), bool)
            or not isinstance(error.get("message"), str)
        ):
            raise FrameError(
                "invalid_request_shape", id=good_id, detail="the error object", is_response=True
            )
        if msg_id is not None and good_id is None:
            raise FrameError("invalid_id", detail="the id of an error response", is_response=True)
        error_object = ErrorObject(error["code"], error["message"], error.get("data", NO_DATA))
        return ErrorResponse(good_id, error_object)
    # Both a result and an error: still a response, which a receiver drops, never answers.
    raise FrameError(
        "invalid_request_shape", id=good_id, detail="no method, result or error", is_response=is_response
    )


def parse(line: bytes | str, *, max_depth: int) -> Message:
    """Parse one line into a message.

    Raises:
        FrameError: the line is not a usable message.
    """
    return from_obj(parse_json(line, max_depth=max_depth))


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

# Long strings (a file, an image in base64) are most of a large message, and the
# encoder escapes them one character at a time. A long string that needs no
# escape is written as it is instead: the encoder gets the message with a mark in
# its place, and the string is put back into the output. The output is the same,
# byte for byte, as the encoder's.
#: A string at least this long is put back into the output as it is, when it needs no escape.
_LONG_STRING: Final = 64 * 1024
#: The walk that looks for long strings stops after this many values.
_WALK_BUDGET: Final = 256
_MARK: Final = "\x00mcpbridge:long-string\x00"
_MARK_ENCODED: Final = '"\\u0000mcpbridge:long-string\\u0000"'
#: The characters that a JSON string cannot hold as they are.
_ESCAPED: Final = tuple(chr(c) for c in range(0x20)) + ('"', "\\")


def _plain(text: str) -> bool:
    """Tell whether ``text`` needs no escape in JSON (each test is a fast scan)."""
    return not any(c in text for c in _ESCAPED)


def _lift(node: Any, longs: list[str], budget: list[int]) -> Any:
    """``node``, or a copy of it in which each long plain string is the mark (appended to ``longs``)."""
    copy: Any = None
    items = node.items() if type(node) is dict else enumerate(node)
    for key, value in items:
        budget[0] -= 1
        if budget[0] < 0:
            break
        kind = type(value)
        if kind is str:
            if len(value) < _LONG_STRING or not _plain(value):
                continue
            lifted: Any = _MARK
            longs.append(value)
        elif kind is dict or kind is list:
            lifted = _lift(value, longs, budget)
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


def _encode(obj: Any, end: bytes) -> bytes:
    longs: list[str] = []
    skeleton = obj
    if (type(obj) is dict or type(obj) is list) and _has_long(obj):
        skeleton = _lift(obj, longs, [_WALK_BUDGET])
    text = _encoder.encode(skeleton)
    if longs:
        pieces = text.split(_MARK_ENCODED)
        if len(pieces) == len(longs) + 1:
            parts = [pieces[0].encode("utf-8")]
            for long, piece in zip(longs, pieces[1:], strict=True):
                parts += (b'"', long.encode("utf-8"), b'"', piece.encode("utf-8"))
            parts.append(end)
            return b"".join(parts)
        text = _encoder.encode(obj)  # a string of the message holds the mark itself
    return (text + end.decode("ascii")).encode("utf-8") if end else text.encode("utf-8")


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj``, without a newline.

    JSON escapes a newline inside a string, so the output never holds a raw
    newline and fits on one line.
    """
    return _encode(obj, b"")


def serialize(msg: Message | dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON, ending with ``b"\\n"``."""
    obj = msg if isinstance(msg, dict) else to_obj(msg)
    return _encode(obj, b"\n")


def error_response(id: RequestId | None, code: int, message: str, data: Any = NO_DATA) -> ErrorResponse:
    """Build an error response."""
    return ErrorResponse(id, ErrorObject(code, message, data))
