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
from typing import Any, Final, Union

RequestId = Union[str, int]

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


Message = Union[Request, Notification, Response, ErrorResponse]


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


# A surrogate escape that is not part of a valid high+low pair.  Python's json
# accepts lone surrogates and produces strings that cannot be encoded as UTF-8.
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError("the number does not fit a float")
    return value


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
        raw = b""
    if "\\u" in text:
        probe = raw or text.encode("utf-8", "surrogatepass")
        if _LONE_SURROGATE.search(probe):
            raise FrameError("parse_error", detail="a lone surrogate escape")
    # Counting brackets is fast C code; only a line with many of them needs
    # the walk that measures the real depth.
    brackets = text.count("{") + text.count("[")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_parse_float)
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
        return ErrorResponse(good_id, ErrorObject(error["code"], error["message"], error.get("data", NO_DATA)))
    raise FrameError("invalid_request_shape", id=good_id, detail="no method, result or error")


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


def dumps(obj: Any) -> bytes:
    """Compact JSON bytes of ``obj``, without a newline.

    JSON escapes a newline inside a string, so the output never holds a raw
    newline and fits on one line.
    """
    return _encoder.encode(obj).encode("utf-8")


def serialize(msg: Message | dict[str, Any]) -> bytes:
    """One line of UTF-8 JSON, ending with ``b"\\n"``."""
    obj = msg if isinstance(msg, dict) else to_obj(msg)
    return dumps(obj) + b"\n"


def error_response(id: RequestId | None, code: int, message: str, data: Any = NO_DATA) -> ErrorResponse:
    """Build an error response."""
    return ErrorResponse(id, ErrorObject(code, message, data))
