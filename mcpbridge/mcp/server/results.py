"""What a handler of :class:`~mcpbridge.mcp.server.Server` returns or raises, and the shapes of results.

A handler answers with a plain value or one of the helpers here
(:class:`ToolResult`, :func:`text_content`); it raises :class:`ToolError` for a
failure the model should see, :class:`RequestError` for a JSON-RPC error, and
:class:`InputRequired` to ask the client for input made with
:func:`elicit_form`, :func:`elicit_url`, :func:`create_message` or
:func:`list_roots`. The functions at the end turn a handler's value into the
result the protocol wants, and number the pages of a list.

Pure: no I/O, no threads, no clock.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errorbase import BridgeError
from ..jsonrpc import INVALID_PARAMS, NO_DATA, ErrorObject, dumps

__all__ = [
    "InputRequired",
    "RequestError",
    "ResourceNotFound",
    "ToolError",
    "ToolResult",
    "create_message",
    "decode_cursor",
    "elicit_form",
    "elicit_url",
    "encode_cursor",
    "list_roots",
    "missing_capabilities",
    "prompt_result",
    "read_result",
    "text_content",
    "tool_result",
]


# --------------------------------------------------------------------- errors


class RequestError(BridgeError):
    """Raise in a handler to answer with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = NO_DATA) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def error(self) -> ErrorObject:
        return ErrorObject(self.code, self.message, self.data)


class ResourceNotFound(RequestError):
    """The resource does not exist: -32602 with ``data: {uri}`` (2026-07-28)."""

    def __init__(self, uri: str) -> None:
        super().__init__(INVALID_PARAMS, "Resource not found", {"uri": uri})


class ToolError(BridgeError):
    """Raise in a tool to answer with a result that has ``isError: true``.

    The message is the text of the result: the model reads it, so say what went
    wrong and what to do.
    """


class InputRequired(BridgeError):
    """Raise in a tool, prompt or resource handler to ask the client for input.

    ``requests`` maps keys of your choice to input requests made with
    :func:`elicit_form`, :func:`elicit_url`, :func:`create_message` or
    :func:`list_roots`. ``state`` is any JSON value; the server signs it, the
    client sends it back with its answers, and the retry sees it as
    :attr:`~.connection.Context.state`. The answers arrive as
    :attr:`~.connection.Context.input_responses` under the same keys.

    The server checks that the client declared each kind of request in this
    request's capabilities; otherwise the client gets -32021.
    """

    def __init__(self, requests: Mapping[str, dict[str, Any]] | None = None, *, state: Any = None) -> None:
        if not requests and state is None:
            raise ValueError("InputRequired needs input requests or a state")
        super().__init__("input required")
        self.requests = dict(requests or {})
        self.state = state


# ----------------------------------------------------------- result helpers


def text_content(text: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": text}


@dataclass
class ToolResult:
    """A tool result with its parts spelled out.

    ``content`` is a text or a list of content blocks. ``structured`` becomes
    ``structuredContent`` (any JSON value); when ``content`` is ``None`` the
    result also gets a text block with its JSON, as the spec recommends.
    """

    content: str | list[dict[str, Any]] | None = None
    structured: Any = NO_DATA
    is_error: bool = False
    meta: dict[str, Any] | None = None

    def to_result(self) -> dict[str, Any]:
        if isinstance(self.content, str):
            blocks = [text_content(self.content)]
        elif self.content is None:
            blocks = [] if self.structured is NO_DATA else [text_content(_json_text(self.structured))]
        else:
            blocks = list(self.content)
        result: dict[str, Any] = {"content": blocks}
        if self.structured is not NO_DATA:
            result["structuredContent"] = self.structured
        if self.is_error:
            result["isError"] = True
        if self.meta:
            result["_meta"] = dict(self.meta)
        return result


def elicit_form(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An input request for a form: ``schema`` is a flat object schema of primitives."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


def elicit_url(message: str, url: str) -> dict[str, Any]:
    """An input request that asks the user to open ``url`` (out-of-band step)."""
    return {"method": "elicitation/create", "params": {"mode": "url", "message": message, "url": url}}


def create_message(
    messages: list[str | dict[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: dict[str, Any] | None = None,
    include_context: str | None = None,
    temperature: float | None = None,
    stop_sequences: list[str] | None = None,
    model_preferences: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An input request for the client's model (sampling). A ``str`` message is a user text."""
    params: dict[str, Any] = {
        "messages": [
            {"role": "user", "content": text_content(m)} if isinstance(m, str) else m for m in messages
        ],
        "maxTokens": max_tokens,
    }
    optional = {
        "systemPrompt": system_prompt,
        "tools": tools,
        "toolChoice": tool_choice,
        "includeContext": include_context,
        "temperature": temperature,
        "stopSequences": stop_sequences,
        "modelPreferences": model_preferences,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    return {"method": "sampling/createMessage", "params": params}


def list_roots() -> dict[str, Any]:
    """An input request for the client's roots."""
    return {"method": "roots/list"}


def _json_text(value: Any) -> str:
    return dumps(value).decode("utf-8")


# ------------------------------------------------------------------ context


# ------------------------------------------------------------ input requests


def missing_capabilities(
    requests: Mapping[str, dict[str, Any]], declared: Mapping[str, Any]
) -> dict[str, Any]:
    """The client capabilities that ``requests`` need and ``declared`` lacks (``{}``: none).

    Raises:
        ValueError: an input request of an unknown kind.
    """
    needed: dict[str, dict[str, Any]] = {}

    def need(capability: str, sub: str | None = None) -> None:
        entry = needed.setdefault(capability, {})
        if sub is not None:
            entry[sub] = {}

    for key, request in requests.items():
        method = request.get("method")
        params = request.get("params") or {}
        if method == "elicitation/create":
            mode = params.get("mode", "form")
            elicitation = declared.get("elicitation")
            declared_modes: set[str] = set()
            if isinstance(elicitation, dict):
                declared_modes = {m for m in ("form", "url") if isinstance(elicitation.get(m), dict)}
                if "form" not in elicitation and "url" not in elicitation:
                    declared_modes.add("form")  # an empty capability means form mode only
            if mode not in declared_modes:
                need("elicitation", mode if mode in ("form", "url") else None)
        elif method == "sampling/createMessage":
            sampling = declared.get("sampling")
            wants_tools = "tools" in params or "toolChoice" in params
            wants_context = params.get("includeContext") in ("thisServer", "allServers")
            if not isinstance(sampling, dict):
                need("sampling")
                sampling = {}
            if wants_tools and not isinstance(sampling.get("tools"), dict):
                need("sampling", "tools")
            if wants_context and not isinstance(sampling.get("context"), dict):
                need("sampling", "context")
        elif method == "roots/list":
            if not isinstance(declared.get("roots"), dict):
                need("roots")
        else:
            raise ValueError(f"the input request {key!r} has the unknown method {method!r}")
    return needed


# ----------------------------------------------------------- result shapes


def tool_result(value: Any) -> dict[str, Any]:
    if isinstance(value, ToolResult):
        return value.to_result()
    if isinstance(value, str):
        return {"content": [text_content(value)]}
    if value is None:
        return {"content": []}
    if isinstance(value, dict) and "content" in value:
        return dict(value)
    return {"content": [text_content(_json_text(value))], "structuredContent": value}


def _prompt_message(item: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": text_content(item)}
    return item


def prompt_result(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and "messages" in value:
        result = dict(value)
        result["messages"] = [_prompt_message(m) for m in value["messages"]]
        return result
    if isinstance(value, (str, dict)):
        return {"messages": [_prompt_message(value)]}
    return {"messages": [_prompt_message(m) for m in value]}


def read_result(uri: str, mime_type: str | None, value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and "contents" in value:
        return dict(value)
    if isinstance(value, list):
        return {"contents": value}
    contents: dict[str, Any] = {"uri": uri}
    if mime_type is not None:
        contents["mimeType"] = mime_type
    if isinstance(value, (bytes, bytearray)):
        contents["blob"] = base64.b64encode(value).decode("ascii")
    else:
        contents["text"] = str(value)
    return {"contents": [contents]}


def encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode("ascii")).decode("ascii").rstrip("=")


def decode_cursor(kind: str, cursor: Any, length: int) -> int:
    invalid = RequestError(INVALID_PARAMS, "Invalid params: the cursor is not valid")
    if not isinstance(cursor, str) or not cursor.isascii():
        raise invalid
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError) as exc:
        raise invalid from exc
    prefix, _, number = text.partition(":")
    if prefix != kind or not number.isdigit() or encode_cursor(kind, int(number)) != cursor:
        raise invalid
    offset = int(number)
    # A list may shrink between two pages; a cursor past the end gives an empty page.
    return min(offset, length)
