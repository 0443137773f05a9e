"""A synchronous MCP 2026-07-28 server: decorators for tools, prompts and resources, served on threads.

A small example::

    server = Server("demo", "1.0.0")

    @server.tool()
    def add(ctx: Context, a: int, b: int) -> str:
        '''Add two integers.'''
        return str(a + b)

    server.serve_stdio()

Theory of operation
-------------------

:class:`Server` holds what the server offers (tools, prompts, resources,
templates, a completion handler) and its identity. :meth:`Server.start` binds it
to one :class:`~mcpbridge.mcp.transport.ServerTransport` and returns a
:class:`ServerConnection`; :meth:`Server.serve` does that and blocks until the
transport closes. A server can serve several connections at once.

The transport delivers each message on its reader thread. The reader answers
what is cheap at once (unknown methods, invalid ``_meta``, too many requests in
flight, frame errors, the acknowledgment of ``subscriptions/listen``) and
hands every other request to a thread pool (``mcpbridge-server_N``). The
reader never waits for a free thread: the pool has as many threads as the limit
of requests in flight, and a request over the limit gets -32603 at once.

A handler gets a :class:`Context` first. What it sends while it runs (progress,
log messages, and the events it publishes, such as a list change) is written on
its own thread before its result, so the client sees them first.

Rules:

* Each request is self-contained: its ``_meta`` carries the revision and the
  client capabilities. Nothing is kept from one request to the next; a
  multi round-trip request carries its state in a signed ``requestState``
  (:mod:`mcpbridge.mcp.state`).
* A request that the client canceled gets no response, and its handler's later
  progress and log messages are dropped.
* A listen stream gets its acknowledgment before any event, and only the
  events it asked for (and the server supports). It ends when the client
  cancels it (no response), or when the server ends it: then it gets its
  result and a ``notifications/cancelled`` with its id.
* The connection lock guards decisions only; messages are sent after it is
  released. A listen stream's own lock orders its frames (acknowledgment,
  events, result); it is reentrant, because the memory link delivers a frame on
  the sending thread and the client may answer from there.
"""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import hashlib
import inspect
import json
import logging
import re
import sys
import threading
import types
import typing
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypedDict, TypeVar, overload

from . import protocol, state
from .cancel import CancelToken
from .droplog import DropLog
from .errorbase import BridgeError
from .errors import Cancelled, InvalidRequest, McpError
from .framing import TooLong
from .ids import recover_id
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    NO_DATA,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorObject,
    ErrorResponse,
    FrameError,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    dumps,
)
from .transport import ServerTransport

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack is new in Python 3.11

__all__ = [
    "Context",
    "InputRequired",
    "RequestError",
    "ResourceNotFound",
    "Server",
    "ServerConnection",
    "ToolError",
    "ToolResult",
    "create_message",
    "elicit_form",
    "elicit_url",
    "list_roots",
    "missing_capabilities",
    "text_content",
]

log = logging.getLogger("mcpbridge.server")

MiB: Final = 1024 * 1024
#: Requests in flight on one connection (the zig-sdk default).
DEFAULT_MAX_IN_FLIGHT: Final = 256
#: The longest line the stdio transport reads; a tool call may carry a large file.
DEFAULT_MAX_LINE_BYTES: Final = 64 * MiB
#: The deepest nesting of an incoming message; deeper is refused before use.
DEFAULT_MAX_DEPTH: Final = 64
#: Seconds that requests in flight may take to finish after the input ended.
DEFAULT_SHUTDOWN_GRACE: Final = 2.0
#: Items on one page of a list result (the page size of the reference servers).
DEFAULT_PAGE_SIZE: Final = 100
#: How long a client may reuse a list or discover result. 0 = ask again each time,
#: which is always right for a server whose lists change; list changes arrive on
#: listen streams anyway.
DEFAULT_TTL_MS: Final = 0
#: The revisions this server speaks.
SUPPORTED_VERSIONS: Final = (protocol.MODERN,)
#: A completion result holds at most this many values (schema: ``maxItems``).
MAX_COMPLETION_VALUES: Final = 100

_F = TypeVar("_F", bound=Callable[..., Any])


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
    :attr:`Context.state`. The answers arrive as :attr:`Context.input_responses`
    under the same keys.

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


@dataclass(frozen=True)
class _RequestMeta:
    """The parsed ``_meta`` of one request."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: RequestId | None


class Context:
    """What a handler knows about its request, and how it talks back.

    Attributes:
        server: the :class:`Server`.
        request_id: the JSON-RPC id of the request.
        method: the method, for example ``"tools/call"``.
        target: the tool or prompt name, or the resource URI; ``""`` otherwise.
        cancel: fires when the client cancels the request or the server stops.
            A slow handler polls ``cancel.cancelled`` or waits with :meth:`sleep`.
        input_responses: the answers to the input requests of the previous
            round, by key (``{}`` in the first round).
        state: the value given to :class:`InputRequired` in the previous round,
            after its signature was checked; ``None`` in the first round.
    """

    def __init__(
        self,
        connection: ServerConnection,
        request: Request,
        meta: _RequestMeta,
        cancel: CancelToken,
        *,
        target: str = "",
        input_responses: dict[str, Any] | None = None,
        state: Any = None,
    ) -> None:
        self._connection = connection
        self._meta = meta
        self._last_progress: float | None = None
        self.server = connection.server
        self.request_id = request.id
        self.method = request.method
        self.target = target
        self.cancel = cancel
        self.input_responses: dict[str, Any] = input_responses or {}
        self.state = state

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities the client declared for this request."""
        return self._meta.client_capabilities

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The self-reported identity of the client, if it sent one."""
        return self._meta.client_info

    @property
    def protocol_version(self) -> str:
        return self._meta.protocol_version

    @property
    def log_level(self) -> str | None:
        """The log level the client asked for with this request, or ``None`` (no logs)."""
        return self._meta.log_level

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress``, if the request has a progress token.

        ``progress`` must grow from one call to the next; a value that does not
        grow is dropped, as is anything after a cancellation.
        """
        token = self._meta.progress_token
        if token is None or self.cancel.cancelled:
            return
        if self._last_progress is not None and progress <= self._last_progress:
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self._connection.send(Notification("notifications/progress", params))

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` if the request's log level admits ``level``.

        Raises:
            ValueError: ``level`` is not one of :data:`~mcpbridge.mcp.protocol.LOG_LEVELS`.
        """
        if level not in protocol.LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        wanted = self._meta.log_level
        if wanted is None or self.cancel.cancelled:
            return
        if protocol.LOG_LEVELS.index(level) < protocol.LOG_LEVELS.index(wanted):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._connection.send(Notification("notifications/message", params))

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``, or less when the request is canceled.

        Raises:
            Cancelled: the request was canceled.
        """
        if self.cancel.wait(max(0.0, seconds)):
            raise Cancelled(self.cancel.reason or None)

    def check_cancelled(self) -> None:
        """Raises: Cancelled: the request was canceled."""
        if self.cancel.cancelled:
            raise Cancelled(self.cancel.reason or None)


# ----------------------------------------------------------------- registry


_PY_TO_JSON: Final[dict[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def _schema_of(annotation: Any) -> tuple[dict[str, Any], type | None]:
    """A JSON schema for a parameter annotation, and the Python type to check (or None)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _schema_of(members[0])
        return {}, None
    if origin is list:
        args = typing.get_args(annotation)
        item_schema = _schema_of(args[0])[0] if args else {}
        return {"type": "array", "items": item_schema}, list
    if origin is dict:
        return {"type": "object"}, dict
    if annotation in _PY_TO_JSON:
        schema: dict[str, Any] = {"type": _PY_TO_JSON[annotation]}
        if annotation is list:
            schema["items"] = {}
        return schema, annotation
    return {}, None


def _type_matches(value: Any, expected: type) -> bool:
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, expected)


@dataclass
class _Signature:
    """How to call a handler with keyword arguments taken from a request."""

    context_name: str
    names: list[str]
    required: list[str]
    accepts_any: bool
    types: dict[str, type]
    nullable: set[str]
    schemas: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> _Signature:
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        if not params or params[0].kind not in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            raise TypeError(f"{getattr(fn, '__name__', fn)!r} must take the Context as its first parameter")
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # an annotation that does not resolve: no inference
            hints = {}
        names: list[str] = []
        required: list[str] = []
        kinds: dict[str, type] = {}
        nullable: set[str] = set()
        schemas: dict[str, dict[str, Any]] = {}
        accepts_any = False
        for param in params[1:]:
            if param.kind is inspect.Parameter.VAR_KEYWORD:
                accepts_any = True
                continue
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
                raise TypeError(f"{param.name!r}: handler parameters must be keyword arguments")
            names.append(param.name)
            if param.default is inspect.Parameter.empty:
                required.append(param.name)
            hint = hints.get(param.name, inspect.Parameter.empty)
            schema, kind = _schema_of(hint)
            schemas[param.name] = schema
            if kind is not None:
                kinds[param.name] = kind
            if type(None) in typing.get_args(hint) or param.default is None:
                nullable.add(param.name)
        return cls(params[0].name, names, required, accepts_any, kinds, nullable, schemas)

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": dict(self.schemas)}
        if self.required:
            schema["required"] = list(self.required)
        if not self.accepts_any:
            schema["additionalProperties"] = False
        return schema

    def problem(self, arguments: Mapping[str, Any], *, check_types: bool) -> str | None:
        """Why ``arguments`` do not fit the handler, or ``None``."""
        for name in self.required:
            if name not in arguments:
                return f"the argument {name!r} is missing"
        for name, value in arguments.items():
            if name == self.context_name or (name not in self.names and not self.accepts_any):
                return f"the argument {name!r} is unknown"
            expected = self.types.get(name) if check_types else None
            if expected is None or (value is None and name in self.nullable):
                continue
            if not _type_matches(value, expected):
                return f"the argument {name!r} must be of type {_PY_TO_JSON[expected]}"
        return None


@dataclass
class _Named:
    """A prompt (and the base of a tool): its handler takes named arguments, and it can be hidden."""

    definition: dict[str, Any]
    fn: Callable[..., Any]
    signature: _Signature
    enabled: bool = True


@dataclass
class _Tool(_Named):
    #: Whether the input schema was inferred from the handler (then the argument types are checked).
    inferred: bool = False


_Prompt = _Named
_N = TypeVar("_N", bound=_Named)


@dataclass
class _Resource:
    definition: dict[str, Any]
    fn: Callable[..., Any]


@dataclass
class _Template:
    definition: dict[str, Any]
    fn: Callable[..., Any]
    pattern: re.Pattern[str]


class _Described(TypedDict, total=False):
    """The options of every registration but a resource's ``name``."""

    title: str | None
    description: str | None
    icons: list[dict[str, Any]] | None


class _PromptOptions(_Described, total=False):
    """The options of :meth:`Server.prompt` and :meth:`Server.add_prompt`."""

    name: str | None
    arguments: list[dict[str, Any]] | None


class _ToolOptions(_Described, total=False):
    """The options of :meth:`Server.tool` and :meth:`Server.add_tool`."""

    name: str | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    meta: dict[str, Any] | None


class _ResourceName(TypedDict):
    name: str


class _TemplateOptions(_ResourceName, _Described, total=False):
    """The options of :meth:`Server.resource_template`."""

    mime_type: str | None


class _ResourceOptions(_TemplateOptions, total=False):
    """The options of :meth:`Server.resource`."""

    size: int | None


#: The JSON name of each option of a registration, in the order of a definition's members.
_MEMBERS: Final = {
    "uri": "uri",
    "uri_template": "uriTemplate",
    "name": "name",
    "title": "title",
    "description": "description",
    "input_schema": "inputSchema",
    "output_schema": "outputSchema",
    "mime_type": "mimeType",
    "size": "size",
    "arguments": "arguments",
    "annotations": "annotations",
    "icons": "icons",
    "meta": "_meta",
}


def _check_options(spec: Any, options: Mapping[str, Any]) -> None:
    """Raises: TypeError: ``options`` has a key that the TypedDict ``spec`` lacks, or lacks a required one."""
    unknown = sorted(set(options) - spec.__required_keys__ - spec.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected option {unknown[0]!r}")
    missing = sorted(spec.__required_keys__ - set(options))
    if missing:
        raise TypeError(f"missing the option {missing[0]!r}")


def _definition(spec: Any, options: Mapping[str, Any], **fixed: Any) -> dict[str, Any]:
    """The definition of a tool, prompt, resource or template: its members that are not None.

    ``options`` are the caller's, of the TypedDict ``spec``; ``fixed`` are the
    members that are no option (a URI) or that replace one (a default).

    Raises:
        TypeError: ``options`` do not fit ``spec``.
    """
    _check_options(spec, options)
    members = {**options, **fixed}
    return {member: members[key] for key, member in _MEMBERS.items() if members.get(key) is not None}


def _named_definition(
    spec: Any, fn: Callable[..., Any], options: Mapping[str, Any], **derived: Any
) -> dict[str, Any]:
    """The definition of a tool or prompt; its name and description default to those of ``fn``."""
    description = options.get("description")
    return _definition(
        spec,
        options,
        **derived,
        name=options.get("name") or fn.__name__,
        description=description if description is not None else inspect.getdoc(fn),
    )


def _decorator(
    add: Callable[..., None], spec: Any, name: str | Callable[..., Any] | None, options: Any
) -> Any:
    """What ``@server.tool`` and ``@server.prompt`` return: bare, or called with a name and options."""
    if callable(name):
        add(name)
        return name
    _check_options(spec, options)
    if name is not None:
        if "name" in options:
            raise TypeError("the name is given twice")
        options = {**options, "name": name}

    def register(fn: _F) -> _F:
        add(fn, **options)
        return fn

    return register


_TEMPLATE_EXPRESSION = re.compile(r"\{([+]?)([A-Za-z0-9_]+)\}")


def _template_pattern(template: str) -> re.Pattern[str]:
    """A regex for a URI template of RFC 6570 level 1 (``{var}``) and reserved expansion (``{+var}``)."""
    out: list[str] = []
    literals: list[str] = []
    position = 0
    for match in _TEMPLATE_EXPRESSION.finditer(template):
        literals.append(template[position : match.start()])
        out.append(re.escape(literals[-1]))
        value = ".+" if match.group(1) == "+" else "[^/?#]+"
        out.append(f"(?P<{match.group(2)}>{value})")
        position = match.end()
    literals.append(template[position:])
    out.append(re.escape(literals[-1]))
    if any("{" in text or "}" in text for text in literals):
        raise ValueError(f"unsupported URI template {template!r}: only {{var}} and {{+var}} are known")
    return re.compile("".join(out))


def _compact(**members: Any) -> dict[str, Any]:
    return {k: v for k, v in members.items() if v is not None}


# --------------------------------------------------------------- listen streams


@dataclass
class _Subscription:
    id: RequestId
    honored: dict[str, Any]
    lock: threading.RLock = field(default_factory=threading.RLock)
    ended: bool = False

    def wants(self, method: str, uri: str | None) -> bool:
        if method == protocol.RESOURCE_UPDATED:
            subscribed = self.honored.get("resourceSubscriptions") or []
            return uri is not None and any(_covers(s, uri) for s in subscribed)
        flag = _FILTER_FLAGS.get(method)
        return flag is not None and self.honored.get(flag) is True


#: The filter flag of each list-change notification.
_FILTER_FLAGS: Final = {
    protocol.LIST_CHANGED["tools"]: "toolsListChanged",
    protocol.LIST_CHANGED["prompts"]: "promptsListChanged",
    protocol.LIST_CHANGED["resources"]: "resourcesListChanged",
}


def _covers(subscribed: str, uri: str) -> bool:
    """Whether an update of ``uri`` concerns a subscription to ``subscribed`` (itself or a sub-resource)."""
    return uri == subscribed or uri.startswith(subscribed.rstrip("/") + "/")


# ------------------------------------------------------------------- server


_Handler = Callable[["Context", dict[str, Any]], dict[str, Any]]


class Server:
    """An MCP 2026-07-28 server.

    Args:
        name, version, title: the ``serverInfo`` of every result.
        instructions: the text of ``server/discover`` for the model.
        state_key: the key that signs ``requestState`` (32 bytes or more); a
            random key by default, so states are valid in this process only.
        max_in_flight: requests in flight on one connection; more get -32603.
        max_line_bytes, max_depth: limits of an incoming line (stdio).
        shutdown_grace: seconds that requests in flight may take to finish when
            the input ends; then they are canceled.
        page_size: items on one page of a list result.
        ttl_ms, cache_scope: the caching hints of cacheable results.
    """

    def __init__(
        self,
        name: str,
        version: str,
        *,
        title: str | None = None,
        instructions: str | None = None,
        state_key: bytes | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
        page_size: int = DEFAULT_PAGE_SIZE,
        ttl_ms: int = DEFAULT_TTL_MS,
        cache_scope: str = "public",
        icons: list[dict[str, Any]] | None = None,
        website_url: str | None = None,
    ) -> None:
        if max_in_flight < 1 or page_size < 1 or ttl_ms < 0:
            raise ValueError("max_in_flight and page_size must be positive, ttl_ms not negative")
        if cache_scope not in ("public", "private"):
            raise ValueError("cache_scope is 'public' or 'private'")
        self.info: dict[str, Any] = _compact(
            name=name, version=version, title=title, icons=icons, websiteUrl=website_url
        )
        self.instructions = instructions
        self.max_in_flight = max_in_flight
        self.max_line_bytes = max_line_bytes
        self.max_depth = max_depth
        self.shutdown_grace = shutdown_grace
        self.page_size = page_size
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        self._signer = state.StateSigner(state_key)
        self._lock = threading.Lock()
        self._tools: dict[str, _Tool] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._resources: dict[str, _Resource] = {}
        self._templates: list[_Template] = []
        self._completion: Callable[..., Any] | None = None
        self._connections: set[ServerConnection] = set()
        self._methods: dict[str, tuple[str | None, _Handler]] = {
            # method: (the capability it needs, handler)
            "server/discover": (None, self._discover),
            "tools/list": ("tools", self._list_tools),
            "tools/call": ("tools", self._call_tool),
            "prompts/list": ("prompts", self._list_prompts),
            "prompts/get": ("prompts", self._get_prompt),
            "resources/list": ("resources", self._list_resources),
            "resources/templates/list": ("resources", self._list_templates),
            "resources/read": ("resources", self._read_resource),
            "completion/complete": ("completions", self._complete),
        }

    # ------------------------------------------------------------ registration

    @overload
    def tool(self, name: _F, /) -> _F: ...

    @overload
    def tool(self, name: str | None = None, /, **options: Unpack[_ToolOptions]) -> Callable[[_F], _F]: ...

    def tool(self, name: str | Callable[..., Any] | None = None, /, **options: Unpack[_ToolOptions]) -> Any:
        """Register a tool: ``@server.tool()``, ``@server.tool("name")`` or ``@server.tool``.

        The options are those of :meth:`add_tool`. The handler is called as
        ``fn(ctx, **arguments)``. Without ``input_schema``, the schema is
        inferred from the parameters after the context (``str``, ``int``,
        ``float``, ``bool``, ``list``, ``dict``, ``list[X]``, ``X | None``; a
        default makes a parameter optional) and the arguments are checked
        against those types. The description defaults to the docstring. See
        :meth:`add_tool` for the results a tool may return.
        """
        return _decorator(self.add_tool, _ToolOptions, name, options)

    def add_tool(self, fn: Callable[..., Any], **options: Unpack[_ToolOptions]) -> None:
        """Register a tool and tell the listen streams that the list changed.

        Options (all optional): ``name`` (default: the function's name),
        ``title``, ``description`` (default: the docstring), ``input_schema``,
        ``output_schema``, ``annotations``, ``meta`` (the ``_meta`` of the
        definition) and ``icons``.

        A tool returns a ``str`` (one text block), a :class:`ToolResult`, a dict
        with ``content`` (the result as it is), or any other JSON value (it
        becomes ``structuredContent`` with a text block of its JSON). It raises
        :class:`ToolError` for a failure the model should see, and
        :class:`InputRequired` to ask the client for input.

        Raises:
            ValueError: a tool with this name exists.
        """
        signature = _Signature.of(fn)
        input_schema = options.get("input_schema")
        schema = input_schema if input_schema is not None else signature.input_schema()
        definition = _named_definition(_ToolOptions, fn, options, input_schema=schema)
        self._add_named("tools", self._tools, _Tool(definition, fn, signature, inferred=input_schema is None))

    def remove_tool(self, name: str) -> bool:
        """Remove a tool; tell the listen streams. Returns whether it existed."""
        return self._remove_named("tools", self._tools, name)

    def set_tool_enabled(self, name: str, enabled: bool) -> bool:
        """Show or hide a tool (it keeps its place in the list). Returns whether anything changed.

        Raises:
            KeyError: no such tool.
        """
        return self._set_named_enabled("tools", self._tools, name, enabled)

    @overload
    def prompt(self, name: _F, /) -> _F: ...

    @overload
    def prompt(self, name: str | None = None, /, **options: Unpack[_PromptOptions]) -> Callable[[_F], _F]: ...

    def prompt(
        self, name: str | Callable[..., Any] | None = None, /, **options: Unpack[_PromptOptions]
    ) -> Any:
        """Register a prompt; the handler is called as ``fn(ctx, **arguments)`` (strings).

        The options are those of :meth:`add_prompt`. The handler returns a
        ``str`` (one user message), a list of messages (``str`` or
        ``PromptMessage`` dicts), or a dict with ``messages`` (and optionally
        ``description``). ``arguments`` defaults to the handler's parameters.
        """
        return _decorator(self.add_prompt, _PromptOptions, name, options)

    def add_prompt(self, fn: Callable[..., Any], **options: Unpack[_PromptOptions]) -> None:
        """Register a prompt and tell the listen streams. Raises: ValueError: the name exists.

        Options (all optional): ``name`` (default: the function's name),
        ``title``, ``description`` (default: the docstring), ``arguments``
        (default: the handler's parameters) and ``icons``.
        """
        signature = _Signature.of(fn)
        arguments = options.get("arguments")
        if arguments is None:
            arguments = [{"name": n, "required": n in signature.required} for n in signature.names]
        definition = _named_definition(_PromptOptions, fn, options, arguments=arguments or None)
        self._add_named("prompts", self._prompts, _Prompt(definition, fn, signature))

    def remove_prompt(self, name: str) -> bool:
        """Remove a prompt; tell the listen streams. Returns whether it existed."""
        return self._remove_named("prompts", self._prompts, name)

    def set_prompt_enabled(self, name: str, enabled: bool) -> bool:
        """Show or hide a prompt. Returns whether anything changed. Raises: KeyError: no such prompt."""
        return self._set_named_enabled("prompts", self._prompts, name, enabled)

    def _add_named(self, kind: str, table: dict[str, _N], entry: _N) -> None:
        """Add a tool or prompt and tell the listen streams. Raises: ValueError: the name exists."""
        name = entry.definition["name"]
        with self._lock:
            if name in table:
                raise ValueError(f"a {kind[:-1]} named {name!r} exists")
            table[name] = entry
        self.notify_list_changed(kind)

    def _remove_named(self, kind: str, table: dict[str, _N], name: str) -> bool:
        with self._lock:
            removed = table.pop(name, None) is not None
        if removed:
            self.notify_list_changed(kind)
        return removed

    def _set_named_enabled(self, kind: str, table: dict[str, _N], name: str, enabled: bool) -> bool:
        with self._lock:
            entry = table[name]
            changed = entry.enabled != enabled
            entry.enabled = enabled
        if changed:
            self.notify_list_changed(kind)
        return changed

    def resource(self, uri: str, **options: Unpack[_ResourceOptions]) -> Callable[[_F], _F]:
        """Register a resource; the handler is called as ``fn(ctx)``.

        Options: ``name`` (required), ``title``, ``mime_type``,
        ``description``, ``size`` and ``icons``. The handler returns a ``str``
        (text), ``bytes`` (a blob), a list of resource contents, or a dict with
        ``contents``.
        """
        definition = _definition(_ResourceOptions, options, uri=uri)

        def register(fn: _F) -> _F:
            with self._lock:
                if uri in self._resources:
                    raise ValueError(f"a resource {uri!r} exists")
                self._resources[uri] = _Resource(definition, fn)
            self.notify_list_changed("resources")
            return fn

        return register

    def resource_template(self, uri_template: str, **options: Unpack[_TemplateOptions]) -> Callable[[_F], _F]:
        """Register a resource template (``{var}``, ``{+var}``); the handler gets ``fn(ctx, **vars)``.

        Options: ``name`` (required), ``title``, ``mime_type``, ``description`` and ``icons``.
        """
        pattern = _template_pattern(uri_template)
        definition = _definition(_TemplateOptions, options, uri_template=uri_template)

        def register(fn: _F) -> _F:
            with self._lock:
                self._templates.append(_Template(definition, fn, pattern))
            self.notify_list_changed("resources")
            return fn

        return register

    def completion(self) -> Callable[[_F], _F]:
        """Register the completion handler: ``fn(ctx, ref, argument, context)``.

        It returns a list of values, or a dict ``{values, total?, hasMore?}``.
        """

        def register(fn: _F) -> _F:
            with self._lock:
                self._completion = fn
            return fn

        return register

    # --------------------------------------------------------------- events

    def notify_list_changed(self, kind: str) -> None:
        """Tell each listen stream that wants it that the list of ``kind`` changed.

        ``kind`` is ``"tools"``, ``"prompts"`` or ``"resources"``. The events are
        written on the calling thread, before this returns.
        """
        self._publish(protocol.LIST_CHANGED[kind], None)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell each listen stream subscribed to ``uri`` (or a parent of it) that it changed."""
        self._publish(protocol.RESOURCE_UPDATED, uri)

    def end_listen_streams(self, reason: str = "the server ended the subscription") -> None:
        """End every listen stream of every connection: its result, then ``notifications/cancelled``."""
        for connection in self._connection_list():
            connection.end_listen_streams(reason)

    def _publish(self, method: str, uri: str | None) -> None:
        for connection in self._connection_list():
            connection.publish(method, uri)

    def _connection_list(self) -> list[ServerConnection]:
        with self._lock:
            return list(self._connections)

    # -------------------------------------------------------------- serving

    def start(self, transport: ServerTransport) -> ServerConnection:
        """Serve ``transport`` on the transport's reader thread and a thread pool; return at once.

        When the transport closes, a thread (``mcpbridge-server-shutdown``) shuts
        the connection down (see :meth:`ServerConnection.shutdown`). The caller
        may stop it earlier with :meth:`ServerConnection.close`.
        """
        return self._start(transport, shutdown_on_close=True)

    def serve(self, transport: ServerTransport) -> None:
        """Serve ``transport`` until it closes, then shut down (see :meth:`ServerConnection.shutdown`)."""
        connection = self._start(transport, shutdown_on_close=False)
        try:
            connection.wait_closed()
        finally:
            connection.shutdown()

    def _start(self, transport: ServerTransport, *, shutdown_on_close: bool) -> ServerConnection:
        connection = ServerConnection(self, transport, shutdown_on_close=shutdown_on_close)
        with self._lock:
            self._connections.add(connection)
        connection.start()
        return connection

    def serve_stdio(self) -> None:
        """Serve on this process's stdin and stdout until stdin ends."""
        from .stdio import StdioServerTransport

        transport = StdioServerTransport(
            sys.stdin.buffer,
            sys.stdout.buffer,
            max_line_bytes=self.max_line_bytes,
            max_depth=self.max_depth,
        )
        self.serve(transport)

    def _forget(self, connection: ServerConnection) -> None:
        with self._lock:
            self._connections.discard(connection)

    # ---------------------------------------------------- what is offered

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities, from what is registered."""
        with self._lock:
            caps: dict[str, Any] = {}
            if self._completion is not None:
                caps["completions"] = {}
            caps["logging"] = {}
            if self._prompts:
                caps["prompts"] = {"listChanged": True}
            if self._resources or self._templates:
                caps["resources"] = {"subscribe": True, "listChanged": True}
            if self._tools:
                caps["tools"] = {"listChanged": True}
            return caps

    def honored_filter(self, wanted: dict[str, Any]) -> dict[str, Any]:
        """The part of a listen filter that this server supports."""
        caps = self.capabilities()
        honored: dict[str, Any] = {}
        for flag, capability in (
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ):
            if wanted.get(flag) is True and capability in caps:
                honored[flag] = True
        subscriptions = wanted.get("resourceSubscriptions")
        if subscriptions is not None and "resources" in caps:
            honored["resourceSubscriptions"] = list(subscriptions)
        return honored

    def _lookup(self, method: str) -> _Handler | None:
        entry = self._methods.get(method)
        if entry is None:
            return None
        capability, handler = entry
        if capability is not None and capability not in self.capabilities():
            return None
        return handler

    def _result_meta(self) -> dict[str, Any]:
        return {protocol.META_SERVER_INFO: dict(self.info)}

    # ------------------------------------------------------- method handlers

    def _discover(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self.capabilities(),
        }
        if self.instructions is not None:
            result["instructions"] = self.instructions
        return result

    def _page(self, kind: str, items: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        start = 0
        if "cursor" in params:
            start = _decode_cursor(kind, params["cursor"], len(items))
        end = start + self.page_size
        result: dict[str, Any] = {kind: items[start:end]}
        if end < len(items):
            result["nextCursor"] = _encode_cursor(kind, end)
        return result

    def _list_tools(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            items = [dict(t.definition) for t in self._tools.values() if t.enabled]
        return self._page("tools", items, params)

    def _list_prompts(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            items = [dict(p.definition) for p in self._prompts.values() if p.enabled]
        return self._page("prompts", items, params)

    def _list_resources(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            items = [dict(r.definition) for r in self._resources.values()]
        return self._page("resources", items, params)

    def _list_templates(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            items = [dict(t.definition) for t in self._templates]
        return self._page("resourceTemplates", items, params)

    def _call_tool(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        name = ctx.target
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        with self._lock:
            tool = self._tools.get(name)
        if tool is None or not tool.enabled:
            raise RequestError(INVALID_PARAMS, f"Unknown tool: {name}")
        problem = tool.signature.problem(arguments, check_types=tool.inferred)
        if problem is not None:
            return ToolResult(f"Invalid arguments for the tool {name}: {problem}.", is_error=True).to_result()
        try:
            value = tool.fn(ctx, **arguments)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True).to_result()
        return _tool_result(value)

    def _get_prompt(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        name = ctx.target
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
            raise RequestError(INVALID_PARAMS, "Invalid params: arguments must be an object of strings")
        with self._lock:
            prompt = self._prompts.get(name)
        if prompt is None or not prompt.enabled:
            raise RequestError(INVALID_PARAMS, f"Unknown prompt: {name}")
        for argument in prompt.definition.get("arguments", []):
            if argument.get("required") and argument["name"] not in arguments:
                raise RequestError(INVALID_PARAMS, f"Missing required argument: {argument['name']}")
        known = {a["name"] for a in prompt.definition.get("arguments", [])}
        call_arguments = {
            k: v for k, v in arguments.items() if prompt.signature.accepts_any or k in prompt.signature.names
        }
        unknown = set(arguments) - known - set(call_arguments)
        if unknown:
            raise RequestError(INVALID_PARAMS, f"Unknown argument: {sorted(unknown)[0]}")
        return _prompt_result(prompt.fn(ctx, **call_arguments))

    def _read_resource(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        uri = ctx.target
        with self._lock:
            resource = self._resources.get(uri)
            templates = list(self._templates)
        if resource is not None:
            return _read_result(uri, resource.definition.get("mimeType"), resource.fn(ctx))
        for template in templates:
            match = template.pattern.fullmatch(uri)
            if match is not None:
                variables = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                value = template.fn(ctx, **variables)
                return _read_result(uri, template.definition.get("mimeType"), value)
        raise ResourceNotFound(uri)

    def _complete(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        ref = params.get("ref")
        argument = params.get("argument")
        context = params.get("context")
        if not isinstance(ref, dict) or not isinstance(ref.get("type"), str):
            raise RequestError(INVALID_PARAMS, "Invalid params: ref must be an object with a type")
        if not isinstance(argument, dict) or not isinstance(argument.get("name"), str):
            raise RequestError(INVALID_PARAMS, "Invalid params: argument must be an object with a name")
        with self._lock:
            handler = self._completion
        assert handler is not None  # _lookup refuses the method without one
        value = handler(ctx, ref, argument, context if isinstance(context, dict) else None)
        if isinstance(value, dict):
            completion = dict(value)
            values = [str(v) for v in completion.get("values", [])]
        else:
            values = [str(v) for v in value]
            completion = {"total": len(values), "hasMore": False}
        if len(values) > MAX_COMPLETION_VALUES:
            completion["hasMore"] = True
        completion["values"] = values[:MAX_COMPLETION_VALUES]
        return {"completion": completion}

    # --------------------------------------------------------- input rounds

    def _binding(self, method: str, target: str, params: dict[str, Any]) -> str:
        """What a requestState is tied to: the method, its target and its arguments."""
        arguments = params.get("arguments")
        canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
        return f"{method}\n{target}\n{digest}"

    def _input_required(self, ctx: Context, params: dict[str, Any], exc: InputRequired) -> dict[str, Any]:
        if ctx.method not in protocol.INPUT_METHODS:
            raise TypeError(f"{ctx.method} cannot ask for input")
        required = missing_capabilities(exc.requests, ctx.client_capabilities)
        if required:
            raise RequestError(
                MISSING_CLIENT_CAPABILITY,
                "Missing required client capability",
                {"requiredCapabilities": required},
            )
        result: dict[str, Any] = {"resultType": protocol.RESULT_INPUT_REQUIRED}
        if exc.requests:
            result["inputRequests"] = exc.requests
        if exc.state is not None:
            result["requestState"] = self._signer.sign(
                exc.state, binding=self._binding(ctx.method, ctx.target, params)
            )
        return result


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


def _tool_result(value: Any) -> dict[str, Any]:
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


def _prompt_result(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and "messages" in value:
        result = dict(value)
        result["messages"] = [_prompt_message(m) for m in value["messages"]]
        return result
    if isinstance(value, (str, dict)):
        return {"messages": [_prompt_message(value)]}
    return {"messages": [_prompt_message(m) for m in value]}


def _read_result(uri: str, mime_type: str | None, value: Any) -> dict[str, Any]:
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


def _encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode("ascii")).decode("ascii").rstrip("=")


def _decode_cursor(kind: str, cursor: Any, length: int) -> int:
    invalid = RequestError(INVALID_PARAMS, "Invalid params: the cursor is not valid")
    if not isinstance(cursor, str) or not cursor.isascii():
        raise invalid
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, ValueError) as exc:
        raise invalid from exc
    prefix, _, number = text.partition(":")
    if prefix != kind or not number.isdigit() or _encode_cursor(kind, int(number)) != cursor:
        raise invalid
    offset = int(number)
    # A list may shrink between two pages; a cursor past the end gives an empty page.
    return min(offset, length)


# ------------------------------------------------------------ the connection


@dataclass
class _Active:
    """A request in flight."""

    id: RequestId
    method: str
    cancel: CancelToken
    cancelled: bool = False
    finished: bool = False
    subscription: _Subscription | None = None


class ServerConnection:
    """One transport served by a :class:`Server`. Made by :meth:`Server.start`."""

    def __init__(self, server: Server, transport: ServerTransport, *, shutdown_on_close: bool = True) -> None:
        self.server = server
        self._transport = transport
        self._shutdown_on_close = shutdown_on_close
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active: dict[RequestId, _Active] = {}
        self._subscriptions: dict[RequestId, _Subscription] = {}
        self._closing = False
        self._closed = threading.Event()
        self._shutdown_done = threading.Event()
        self._shutdown_lock = threading.Lock()
        #: The log lines that the client can make repeat, one line a kind every 10 s.
        self._drops = DropLog(log)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=server.max_in_flight, thread_name_prefix="mcpbridge-server"
        )

    # ------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._transport.start(self._on_message, self._on_frame_error, self._on_closed)

    @property
    def closed(self) -> bool:
        """Whether the transport closed (the input ended)."""
        return self._closed.is_set()

    def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait until the transport closes; ``None`` waits as long as it takes. Returns whether it closed."""
        if timeout is not None:
            return self._closed.wait(timeout)
        while not self._closed.wait(1.0):
            pass
        return True

    def wait_shutdown(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the end of :meth:`shutdown`; tell whether it ended."""
        return self._shutdown_done.wait(timeout)

    def close(self) -> None:
        """Stop taking requests and shut down (see :meth:`shutdown`), which closes the transport."""
        self._closed.set()
        self.shutdown()

    def shutdown(self) -> None:
        """End the listen streams, give requests in flight the grace time, cancel the rest, close.

        Idempotent; returns after about ``2 * shutdown_grace`` seconds at most.
        """
        with self._shutdown_lock:
            if self._shutdown_done.is_set():
                return
            with self._lock:
                self._closing = True
            self.end_listen_streams("the server is shutting down")
            grace = self.server.shutdown_grace
            late: list[_Active] = []
            with self._idle:
                if not self._idle.wait_for(lambda: not self._active, timeout=grace):
                    late = [a for a in self._active.values() if not a.finished]
                    for active in late:
                        active.cancelled = True
            for active in late:
                active.cancel.cancel("the server is shutting down")
            with self._idle:
                finished = self._idle.wait_for(lambda: not self._active, timeout=grace)
                stuck = len(self._active)
            if finished:
                self._pool.shutdown(wait=True)
            else:
                log.warning("%d requests did not stop within %s s of their cancellation", stuck, grace)
                self._pool.shutdown(wait=False, cancel_futures=True)
            self._transport.close()
            self.server._forget(self)
            self._drops.flush()
            self._shutdown_done.set()

    # --------------------------------------------------------------- sending

    def send(self, message: Message) -> None:
        """Send one message; a closed transport drops it."""
        try:
            self._transport.send(message)
        except McpError as exc:
            log.debug("dropped a message to a closed connection: %s", exc.cause)

    def _send_error(self, request_id: RequestId | None, code: int, message: str, data: Any = NO_DATA) -> None:
        self.send(ErrorResponse(request_id, ErrorObject(code, message, data)))

    # --------------------------------------------------------------- reading

    def _on_closed(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._shutdown_on_close:
            # Not on this thread: the memory link closes on the client's thread,
            # and the shutdown waits for requests in flight.
            threading.Thread(target=self.shutdown, name="mcpbridge-server-shutdown", daemon=True).start()

    def _on_frame_error(self, error: FrameError | TooLong) -> None:
        if isinstance(error, TooLong):
            self._send_error(
                recover_id(error.head, error.tail),
                INVALID_REQUEST,
                f"Invalid Request: the line is too long (limit: {self.server.max_line_bytes} bytes)",
            )
            return
        if error.is_response:
            return  # a client sends no responses in 2026-07-28; nothing to answer
        if error.cause == "parse_error":
            self._send_error(None, PARSE_ERROR, "Parse error")
        elif error.cause == "too_deep":
            self._send_error(error.id, INVALID_REQUEST, f"Invalid Request: too deep ({error.detail})")
        else:
            self._send_error(error.id, INVALID_REQUEST, "Invalid Request")

    def _on_message(self, message: Message) -> None:
        if isinstance(message, Request):
            self._on_request(message)
        elif isinstance(message, Notification):
            if message.method == "notifications/cancelled":
                self._on_cancelled(message.params or {})
            else:
                self._drops(
                    logging.DEBUG,
                    "ignored notifications of the client",
                    "ignored the notification %s",
                    message.method[:100],
                )
        # A client sends no responses in 2026-07-28: drop them.

    def _on_request(self, request: Request) -> None:
        # initialize with a 2026-07-28 _meta is just a method this revision removed: -32601 below.
        server = self.server
        if request.method == "initialize" and not _has_modern_meta(request.params):
            # A 2025-era client: name the revisions we speak, so it can tell the era.
            requested = (request.params or {}).get("protocolVersion")
            self._send_error(
                request.id,
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {
                    "supported": list(SUPPORTED_VERSIONS),
                    "requested": requested if isinstance(requested, str) else "",
                },
            )
            return
        is_listen = request.method == "subscriptions/listen"
        handler = server._lookup(request.method)
        if handler is None and not is_listen:
            self._send_error(request.id, METHOD_NOT_FOUND, f"Method not found: {request.method[:100]}")
            return
        try:
            meta = _parse_meta(request.params)
        except RequestError as exc:
            self.send(ErrorResponse(request.id, exc.error))
            return
        active = _Active(request.id, request.method, CancelToken())
        refusal: tuple[int, str] | None = None
        with self._lock:
            if self._closing:
                return
            if request.id in self._active:
                refusal = (INVALID_REQUEST, "Invalid Request: the id is in use by a request in flight")
            elif len(self._active) >= server.max_in_flight:
                refusal = (INTERNAL_ERROR, "Too many requests in flight")
            else:
                self._active[request.id] = active
        if refusal is not None:
            self._drops(
                logging.WARNING,
                f"rejected requests: {refusal[1]}",
                "rejected request %r (%s): %s",
                request.id,
                request.method[:100],
                refusal[1],
            )
            self._send_error(request.id, *refusal)
            return
        if is_listen:
            self._open_listen(active, request)
            return
        assert handler is not None
        try:
            self._pool.submit(self._run, active, request, meta, handler)
        except RuntimeError:  # the pool shut down under us
            self._finish(active, None)

    def _on_cancelled(self, params: dict[str, Any]) -> None:
        request_id = params.get("requestId")
        if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
            return
        reason = params.get("reason")
        with self._lock:
            active = self._active.get(request_id)
            if active is None or active.finished or active.cancelled:
                return
            active.cancelled = True
            if active.subscription is not None:
                active.subscription.ended = True
                self._subscriptions.pop(request_id, None)
                del self._active[request_id]
                self._idle.notify_all()
        active.cancel.cancel(reason if isinstance(reason, str) else "")

    # ------------------------------------------------------------- requests

    def _run(self, active: _Active, request: Request, meta: _RequestMeta, handler: _Handler) -> None:
        server = self.server
        params = dict(request.params or {})
        response: Message | None = None
        try:
            ctx = self._context(active, request, meta, params)
            try:
                result = handler(ctx, params)
            except InputRequired as exc:
                result = server._input_required(ctx, params, exc)
            result.setdefault("resultType", protocol.RESULT_COMPLETE)
            complete = result["resultType"] == protocol.RESULT_COMPLETE
            if complete and request.method in protocol.CACHEABLE_METHODS:
                result.setdefault("ttlMs", server.ttl_ms)
                result.setdefault("cacheScope", server.cache_scope)
            result_meta = dict(result.get("_meta") or {})
            result_meta.update(server._result_meta())
            result["_meta"] = result_meta
            response = Response(request.id, result)
        except RequestError as exc:
            response = ErrorResponse(request.id, exc.error)
        except Cancelled:
            response = None
        except Exception as exc:
            if not active.cancel.cancelled:
                self._drops(
                    logging.ERROR, "failed handlers", "the handler of %s failed", request.method, exc_info=exc
                )
            response = ErrorResponse(request.id, ErrorObject(INTERNAL_ERROR, "Internal error"))
        self._finish(active, response)

    def _finish(self, active: _Active, response: Message | None) -> None:
        with self._lock:
            active.finished = True
            deliver = response is not None and not active.cancelled
        if deliver:
            assert response is not None
            try:
                self._transport.send(response)
            except InvalidRequest:  # the result is not JSON (a handler returned a set, NaN, ...)
                self._drops(
                    logging.ERROR,
                    "results that cannot be written as JSON",
                    "the result of request %r cannot be written as JSON",
                    active.id,
                )
                self._send_error(active.id, INTERNAL_ERROR, "Internal error")
            except McpError as exc:
                log.debug("dropped the response to %r: %s", active.id, exc.cause)
        with self._idle:
            self._active.pop(active.id, None)
            self._idle.notify_all()

    def _context(
        self, active: _Active, request: Request, meta: _RequestMeta, params: dict[str, Any]
    ) -> Context:
        target = ""
        if request.method in ("tools/call", "prompts/get"):
            name = params.get("name")
            if not isinstance(name, str):
                raise RequestError(INVALID_PARAMS, "Invalid params: name must be a string")
            target = name
        elif request.method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str):
                raise RequestError(INVALID_PARAMS, "Invalid params: uri must be a string")
            target = uri
        responses: dict[str, Any] = {}
        request_state: Any = None
        if request.method in protocol.INPUT_METHODS:
            raw_responses = params.get("inputResponses")
            if raw_responses is not None and not isinstance(raw_responses, dict):
                raise RequestError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
            responses = dict(raw_responses or {})
            if "requestState" in params:
                binding = self.server._binding(request.method, target, params)
                try:
                    request_state = self.server._signer.verify(params["requestState"], binding=binding)
                except state.InvalidState as exc:
                    self._drops(
                        logging.INFO,
                        "refused request states",
                        "refused the requestState of request %r: %s",
                        request.id,
                        exc,
                    )
                    raise RequestError(INVALID_PARAMS, "the requestState is not valid") from exc
        return Context(
            self, request, meta, active.cancel, target=target, input_responses=responses, state=request_state
        )

    # ------------------------------------------------------------- listening

    def _open_listen(self, active: _Active, request: Request) -> None:
        params = request.params or {}
        wanted = params.get("notifications")
        problem = _filter_problem(wanted)
        if problem is not None:
            with self._idle:
                self._active.pop(active.id, None)
                self._idle.notify_all()
            self._send_error(request.id, INVALID_PARAMS, f"Invalid params: {problem}")
            return
        assert isinstance(wanted, dict)
        subscription = _Subscription(request.id, self.server.honored_filter(wanted))
        # Hold the stream's lock from before it is visible to publishers until the
        # acknowledgment is written: no event can overtake it.
        with subscription.lock:
            with self._lock:
                if active.cancelled:  # canceled on another thread before it started
                    self._active.pop(active.id, None)
                    self._idle.notify_all()
                    return
                active.subscription = subscription
                self._subscriptions[request.id] = subscription
            self.send(
                Notification(
                    protocol.LISTEN_ACKNOWLEDGED,
                    {
                        "_meta": {protocol.META_SUBSCRIPTION_ID: request.id},
                        "notifications": subscription.honored,
                    },
                )
            )

    def publish(self, method: str, uri: str | None) -> None:
        """Write one event to each listen stream of this connection that wants it."""
        with self._lock:
            subscriptions = list(self._subscriptions.values())
        for subscription in subscriptions:
            if not subscription.wants(method, uri):
                continue
            params: dict[str, Any] = {"_meta": {protocol.META_SUBSCRIPTION_ID: subscription.id}}
            if uri is not None:
                params["uri"] = uri
            with subscription.lock:
                if not subscription.ended:
                    self.send(Notification(method, params))

    def end_listen_streams(self, reason: str) -> None:
        """End each listen stream: its result, then ``notifications/cancelled`` with its id."""
        with self._idle:
            ending = list(self._subscriptions.values())
            self._subscriptions.clear()
            for subscription in ending:
                active = self._active.pop(subscription.id, None)
                if active is not None:
                    active.finished = True
            self._idle.notify_all()
        for subscription in ending:
            with subscription.lock:
                if subscription.ended:
                    continue
                subscription.ended = True
                meta = self.server._result_meta()
                meta[protocol.META_SUBSCRIPTION_ID] = subscription.id
                self.send(Response(subscription.id, {"resultType": protocol.RESULT_COMPLETE, "_meta": meta}))
                cancelled = {"requestId": subscription.id, "reason": reason}
                self.send(Notification("notifications/cancelled", cancelled))


def _filter_problem(wanted: Any) -> str | None:
    if not isinstance(wanted, dict):
        return "notifications must be an object"
    for flag in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
        if flag in wanted and not isinstance(wanted[flag], bool):
            return f"notifications.{flag} must be a boolean"
    uris = wanted.get("resourceSubscriptions")
    if uris is not None and (not isinstance(uris, list) or not all(isinstance(u, str) for u in uris)):
        return "notifications.resourceSubscriptions must be an array of strings"
    return None


def _parse_meta(params: dict[str, Any] | None) -> _RequestMeta:
    """The ``_meta`` of a request.

    Raises:
        RequestError: -32602 for a missing or malformed member, -32022 for an
            unsupported revision.
    """
    meta = (params or {}).get("_meta")
    if not isinstance(meta, dict):
        raise RequestError(INVALID_PARAMS, "Invalid params: the request has no _meta")
    version = meta.get(protocol.META_PROTOCOL_VERSION)
    if not isinstance(version, str):
        raise RequestError(INVALID_PARAMS, f"Invalid params: _meta needs {protocol.META_PROTOCOL_VERSION}")
    if version not in SUPPORTED_VERSIONS:
        raise RequestError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(SUPPORTED_VERSIONS), "requested": version},
        )
    capabilities = meta.get(protocol.META_CLIENT_CAPABILITIES)
    if not isinstance(capabilities, dict):
        raise RequestError(INVALID_PARAMS, f"Invalid params: _meta needs {protocol.META_CLIENT_CAPABILITIES}")
    level = meta.get(protocol.META_LOG_LEVEL)
    if level is not None and level not in protocol.LOG_LEVELS:
        raise RequestError(INVALID_PARAMS, "Invalid params: unknown log level")
    info = meta.get(protocol.META_CLIENT_INFO)
    token = meta.get("progressToken")
    if not isinstance(token, (str, int)) or isinstance(token, bool):
        token = None
    return _RequestMeta(
        protocol_version=version,
        client_capabilities=capabilities,
        client_info=info if isinstance(info, dict) else None,
        log_level=level,
        progress_token=token,
    )


def _has_modern_meta(params: Any) -> bool:
    """Tell whether request params carry the 2026-07-28 protocol-version key in ``_meta``."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
