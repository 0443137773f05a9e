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
to one :class:`~mcpbridge.mcp.transports.ServerTransport` and returns a
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

Layout: this module holds :class:`Server`; :mod:`mcpbridge.mcp.server.connection` the
connection runtime and :class:`Context`; :mod:`mcpbridge.mcp.server.results` what a
handler returns or raises; :mod:`mcpbridge.mcp.server.registry` the records of what is
registered; :mod:`mcpbridge.mcp.server.schema_infer` the input schema read from a
handler's signature; :mod:`mcpbridge.mcp.server.uritemplate` the URI templates. The
public names of those modules are importable from here.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

from .. import protocol, state
from ..jsonrpc import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY
from ..transports import ServerTransport
from .connection import SUPPORTED_VERSIONS, Context, Handler, ServerConnection
from .registry import (
    Named,
    Prompt,
    PromptOptions,
    Resource,
    ResourceOptions,
    Template,
    TemplateOptions,
    Tool,
    ToolOptions,
    decorator,
    make_definition,
    named_definition,
)
from .results import (
    InputRequired,
    RequestError,
    ResourceNotFound,
    ToolError,
    ToolResult,
    create_message,
    decode_cursor,
    elicit_form,
    elicit_url,
    encode_cursor,
    list_roots,
    missing_capabilities,
    prompt_result,
    read_result,
    text_content,
    tool_result,
)
from .schema_infer import Signature
from .uritemplate import template_pattern

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
#: A completion result holds at most this many values (schema: ``maxItems``).
MAX_COMPLETION_VALUES: Final = 100

_F = TypeVar("_F", bound=Callable[..., Any])
_N = TypeVar("_N", bound=Named)


def _compact(**members: Any) -> dict[str, Any]:
    return {k: v for k, v in members.items() if v is not None}


# ------------------------------------------------------------------- server


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
        self._tools: dict[str, Tool] = {}
        self._prompts: dict[str, Prompt] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: list[Template] = []
        self._completion: Callable[..., Any] | None = None
        self._connections: set[ServerConnection] = set()
        self._methods: dict[str, tuple[str | None, Handler]] = {
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
    def tool(self, name: str | None = None, /, **options: Unpack[ToolOptions]) -> Callable[[_F], _F]: ...

    def tool(self, name: str | Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]) -> Any:
        """Register a tool: ``@server.tool()``, ``@server.tool("name")`` or ``@server.tool``.

        The options are those of :meth:`add_tool`. The handler is called as
        ``fn(ctx, **arguments)``. Without ``input_schema``, the schema is
        inferred from the parameters after the context (``str``, ``int``,
        ``float``, ``bool``, ``list``, ``dict``, ``list[X]``, ``X | None``; a
        default makes a parameter optional) and the arguments are checked
        against those types. The description defaults to the docstring. See
        :meth:`add_tool` for the results a tool may return.
        """
        return decorator(self.add_tool, ToolOptions, name, options)

    def add_tool(self, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> None:
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
        signature = Signature.of(fn)
        input_schema = options.get("input_schema")
        schema = input_schema if input_schema is not None else signature.input_schema()
        definition = named_definition(ToolOptions, fn, options, input_schema=schema)
        self._add_named("tools", self._tools, Tool(definition, fn, signature, inferred=input_schema is None))

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
    def prompt(self, name: str | None = None, /, **options: Unpack[PromptOptions]) -> Callable[[_F], _F]: ...

    def prompt(
        self, name: str | Callable[..., Any] | None = None, /, **options: Unpack[PromptOptions]
    ) -> Any:
        """Register a prompt; the handler is called as ``fn(ctx, **arguments)`` (strings).

        The options are those of :meth:`add_prompt`. The handler returns a
        ``str`` (one user message), a list of messages (``str`` or
        ``PromptMessage`` dicts), or a dict with ``messages`` (and optionally
        ``description``). ``arguments`` defaults to the handler's parameters.
        """
        return decorator(self.add_prompt, PromptOptions, name, options)

    def add_prompt(self, fn: Callable[..., Any], **options: Unpack[PromptOptions]) -> None:
        """Register a prompt and tell the listen streams. Raises: ValueError: the name exists.

        Options (all optional): ``name`` (default: the function's name),
        ``title``, ``description`` (default: the docstring), ``arguments``
        (default: the handler's parameters) and ``icons``.
        """
        signature = Signature.of(fn)
        arguments = options.get("arguments")
        if arguments is None:
            arguments = [{"name": n, "required": n in signature.required} for n in signature.names]
        definition = named_definition(PromptOptions, fn, options, arguments=arguments or None)
        self._add_named("prompts", self._prompts, Prompt(definition, fn, signature))

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

    def resource(self, uri: str, **options: Unpack[ResourceOptions]) -> Callable[[_F], _F]:
        """Register a resource; the handler is called as ``fn(ctx)``.

        Options: ``name`` (required), ``title``, ``mime_type``,
        ``description``, ``size`` and ``icons``. The handler returns a ``str``
        (text), ``bytes`` (a blob), a list of resource contents, or a dict with
        ``contents``.
        """
        definition = make_definition(ResourceOptions, options, uri=uri)

        def register(fn: _F) -> _F:
            with self._lock:
                if uri in self._resources:
                    raise ValueError(f"a resource {uri!r} exists")
                self._resources[uri] = Resource(definition, fn)
            self.notify_list_changed("resources")
            return fn

        return register

    def resource_template(self, uri_template: str, **options: Unpack[TemplateOptions]) -> Callable[[_F], _F]:
        """Register a resource template (``{var}``, ``{+var}``); the handler gets ``fn(ctx, **vars)``.

        Options: ``name`` (required), ``title``, ``mime_type``, ``description`` and ``icons``.
        """
        pattern = template_pattern(uri_template)
        definition = make_definition(TemplateOptions, options, uri_template=uri_template)

        def register(fn: _F) -> _F:
            with self._lock:
                self._templates.append(Template(definition, fn, pattern))
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
        from ..transports.stdio import StdioServerTransport

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

    def _lookup(self, method: str) -> Handler | None:
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
            start = decode_cursor(kind, params["cursor"], len(items))
        end = start + self.page_size
        result: dict[str, Any] = {kind: items[start:end]}
        if end < len(items):
            result["nextCursor"] = encode_cursor(kind, end)
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
        return tool_result(value)

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
        return prompt_result(prompt.fn(ctx, **call_arguments))

    def _read_resource(self, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
        uri = ctx.target
        with self._lock:
            resource = self._resources.get(uri)
            templates = list(self._templates)
        if resource is not None:
            return read_result(uri, resource.definition.get("mimeType"), resource.fn(ctx))
        for template in templates:
            match = template.pattern.fullmatch(uri)
            if match is not None:
                variables = {k: urllib.parse.unquote(v) for k, v in match.groupdict().items()}
                value = template.fn(ctx, **variables)
                return read_result(uri, template.definition.get("mimeType"), value)
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
