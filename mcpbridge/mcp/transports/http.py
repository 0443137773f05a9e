"""The Streamable HTTP client transport of revision 2026-07-28.

Theory of operation
-------------------

Every request is its own ``POST`` to the one URL of the server. The thread that
calls :meth:`HttpTransport.send` does the whole exchange: it sends the request,
reads the answer and hands each message of it to ``on_message`` before it
returns. The answer is one JSON body or an SSE stream (:mod:`.sse`) of
notifications that ends with the response. A notification is not sent at all:
over HTTP the client cancels a request by closing its response, and the
revision defines no other notification from the client.

One :class:`~.httppool.Wire` (urllib3) holds the keep-alive connections for
all threads. Each exchange registers itself on the cancel token of its
request; a cancellation shuts down the socket of that one exchange at once,
from the cancelling thread, whether the exchange waits for the response head
or reads the stream. The wire tells the exchange which socket is its own and
makes it forget that link before the connection goes back to the pool, so a
late cancellation never touches a connection that serves another request.

Rules:

* A failed request fails alone: :meth:`HttpTransport.send` raises the
  :class:`~.errors.McpError` of that request, and the pool goes on.
* A JSON-RPC error body, whatever its HTTP status, is delivered as an
  :class:`~.jsonrpc.ErrorResponse`. A status without such a body raises
  :class:`HttpStatusError` (cause ``invalid_response``, detail
  ``"HTTP status N"``); 401 and 403 go to the :class:`Authorizer` first.
* ``max_response_bytes`` limits one JSON body and one event of a stream, never
  a whole stream: a listen stream may run for days.
* A request is sent at most once by the wire. When its connection breaks after
  it was written, a method without side effects (:data:`REISSUE_METHODS`) is
  sent once more with a new id, as the revision says of a lost request; any
  other fails with ``transport_failed`` and the client decides.
* A 429 or 503 with a ``Retry-After`` of at most 30 s is waited for once (the
  wait ends at a cancellation), then the request goes once more; a longer wait
  is an :class:`HttpStatusError` that names it.
* The connect timeout bounds the connection and the TLS handshake; the read
  limit bounds each wait for bytes (an idle limit, not a limit of the request):
  the time limit of the method (1 h for each round of ``tools/call``). TCP
  keep-alive finds a peer that vanished. The time limit of a
  request belongs to the client, which fires the cancel token.
* The transport learns the ``x-mcp-header`` markings of the tools from the
  ``tools/list`` results it carries and drops the tools whose markings are not
  valid. On ``-32020`` (header mismatch) a ``tools/call`` gets one refresh of
  the tool list and one retry.
* Certificates are checked against the trust store of the system plus
  ``ca_file``; there is no way to turn the check off. ``HTTPS_PROXY``,
  ``ALL_PROXY`` and ``NO_PROXY`` choose the proxy; a loopback host never goes
  through a proxy. Nothing else comes from the environment (no ``.netrc``, no
  CA bundle variables).
* No log line and no error holds the URL, a header value or a token.
"""

from __future__ import annotations

import base64
import enum
import itertools
import logging
import re
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .. import jsonrpc
from ..cancel import CancelToken
from ..deadline import Deadline
from ..errorbase import PeerFault
from ..errors import Cancelled, Closed, McpError, NotConnected
from ..jsonrpc import ErrorResponse, Message, Notification, Request, Response
from ..protocol import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    MODERN,
    READ_ONLY_METHODS,
    TASK_METHODS,
)
from . import OnClosed, OnFrameError, OnMessage
from .httpbase import Headers, HttpTransportBase, json_body
from .httpwire import (
    ACCEPT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_READ_TIMEOUT,
    Authorizer,
    CaFileError,
    Exchange,
    HttpStatusError,
    StreamBroken,
    media_type,
    parse_event,
    proxy_for,
    seconds_text,
    tls_context,
)

if TYPE_CHECKING:
    from .httppool import WireResponse

__all__ = [
    "Authorizer",
    "CaFileError",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "HttpStatusError",
    "HttpTransport",
    "InvalidMarking",
    "encode_header_value",
    "filter_tools",
    "header_markings",
    "param_headers",
    "parse_event",
    "proxy_for",
    "tls_context",
]

log = logging.getLogger("mcpbridge.http")

#: Pages of the tool list that a refresh after ``-32020`` reads at most.
REFRESH_MAX_PAGES: Final = 100
#: The methods whose ``Mcp-Name`` header mirrors a parameter, and that parameter; the
#: requests of the Tasks extension name their task, so that a load balancer routes them to
#: the instance that holds it.
NAME_PARAMS: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    **{method: "taskId" for method in sorted(TASK_METHODS)},
}
MARKING_KEY: Final = "x-mcp-header"
PARAM_HEADER_PREFIX: Final = "Mcp-Param-"
#: The headers that the transport sets for each request; a user header of another name is
#: written into the pool's fixed part of every request head once.
_PER_REQUEST_NAMES: Final = frozenset(
    {"content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name", "authorization"}
)

_ids = itertools.count(1)


# ---------------------------------------------------------------------------------------------
# Header values and the x-mcp-header markings (pure)
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_SAFE_VALUE = re.compile(r"[\x20-\x7e]*\Z")
_SENTINEL = re.compile(r"=\?base64\?.*\?=\Z", re.DOTALL)
_MARKABLE_TYPES = frozenset({"string", "integer", "boolean"})
# Keywords whose values are schemas; a marking below them is not reachable through
# `properties` alone. `$ref` is never followed.
_SUBSCHEMA_ONE = frozenset(
    {
        "items",
        "contains",
        "additionalItems",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


class InvalidMarking(PeerFault, ValueError):
    """A tool's ``x-mcp-header`` marking breaks a rule; the message names the property."""


def encode_header_value(value: str) -> str:
    """The header form of ``value``.

    Visible ASCII without space at its ends goes as it is (inner spaces are
    fine); anything else, and a value that looks like the sentinel itself, goes
    as ``=?base64?<Base64 of the UTF-8 bytes>?=``.
    """
    if _SAFE_VALUE.match(value) and value == value.strip(" ") and not _SENTINEL.match(value):
        return value
    encoded = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii")
    return f"=?base64?{encoded}?="


def _schema_positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Each schema object in ``root`` with its path of ``properties`` keys (None off that path)."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif key in _SUBSCHEMA_ONE:
                stack.append((None, value))
            elif key in _SUBSCHEMA_LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif key in _SUBSCHEMA_MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


def header_markings(input_schema: Any) -> dict[tuple[str, ...], str]:
    """The ``x-mcp-header`` markings of a tool: property path -> header name suffix.

    A marking is valid when it is a non-empty HTTP token, sits on a property
    of type ``string``, ``integer`` or ``boolean`` that the root reaches
    through ``properties`` keys only, and no other marking of the schema has
    the same name ignoring case.

    Raises:
        InvalidMarking: a marking breaks one of these rules.
    """
    markings: dict[tuple[str, ...], str] = {}
    seen: dict[str, str] = {}
    for path, schema in _schema_positions(input_schema):
        if MARKING_KEY not in schema:
            continue
        if not path:
            raise InvalidMarking("a marking is not on a property that properties alone reach")
        where = ".".join(path)
        name = schema[MARKING_KEY]
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise InvalidMarking(f"the marking of the property {where!r} is not an HTTP token")
        kind = schema.get("type")
        if not isinstance(kind, str) or kind not in _MARKABLE_TYPES:
            raise InvalidMarking(f"the property {where!r} is not of type string, integer or boolean")
        lower = name.lower()
        if lower in seen:
            raise InvalidMarking(f"the properties {seen[lower]!r} and {where!r} have the same marking")
        seen[lower] = where
        markings[path] = name
    return markings


def _header_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return jsonrpc.dumps(value).decode("ascii")
    return None


def param_headers(markings: Mapping[tuple[str, ...], str], arguments: Any) -> list[tuple[str, str]]:
    """The ``Mcp-Param-*`` headers of a ``tools/call`` with ``arguments``.

    A property that is absent or ``null`` gives no header; a string goes
    through :func:`encode_header_value`, an integer or a boolean as JSON text.
    """
    headers: list[tuple[str, str]] = []
    for path, name in markings.items():
        node: Any = arguments
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        text = _header_text(node)
        if text is not None:
            headers.append((PARAM_HEADER_PREFIX + name, encode_header_value(text)))
    return headers


def filter_tools(result: Any) -> tuple[Any, dict[str, dict[tuple[str, ...], str]], list[tuple[str, str]]]:
    """Split a ``tools/list`` result into what passes and what the transport learns.

    Returns the result without the tools whose markings are not valid, the
    markings of the valid tools by name, and ``(name, reason)`` for each tool
    that was dropped. A result without a ``tools`` array comes back unchanged.
    """
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return result, {}, []
    kept: list[Any] = []
    learned: dict[str, dict[tuple[str, ...], str]] = {}
    dropped: list[tuple[str, str]] = []
    for tool in result["tools"]:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            kept.append(tool)
            continue
        try:
            markings = header_markings(tool.get("inputSchema"))
        except InvalidMarking as exc:
            dropped.append((tool["name"], str(exc)))
            continue
        learned[tool["name"]] = markings
        kept.append(tool)
    if dropped:
        result = {**result, "tools": kept}
    return result, learned, dropped


# ---------------------------------------------------------------------------------------------
# The transport
# ---------------------------------------------------------------------------------------------


#: The methods without side effects: a request of one of them whose connection broke
#: after it was written is sent once more, with a new id (the revision says such a
#: request is lost). Any other request fails with ``transport_failed``.
REISSUE_METHODS: Final = READ_ONLY_METHODS


class _Retry(enum.Enum):
    AUTH = "auth"
    HEADERS = "headers"


@dataclass
class _Attempts:
    auth: bool = False
    headers: bool = False
    busy: bool = False
    reissued: bool = False


class HttpTransport(HttpTransportBase):
    """A client transport to one Streamable HTTP URL; see the module docstring.

    The parameters are those of :class:`~.httpbase.HttpTransportBase`.

    Raises:
        ConnectFailed: the URL is not http or https, or a proxy variable has a scheme
            other than http and https (the detail names the variable).
        CaFileError: ``ca_file`` cannot be used.
    """

    def _fixed_headers(self) -> Headers:
        fixed: Headers = []
        # A user header that a request sets too stays in the mapping of each request, as it was.
        per_request: Headers = []
        for name, raw in self._headers:
            lower = name.lower()
            if name in ("Content-Type", "Accept"):
                continue  # each request sets it
            if lower in _PER_REQUEST_NAMES or lower.startswith("mcp-param-"):
                per_request.append((name, raw))
            else:
                fixed.append((name, raw))
        self._headers = per_request
        return [*fixed, ("Content-Type", "application/json"), ("Accept", ACCEPT)]

    def _own_state(self) -> None:
        self._markings: dict[str, dict[tuple[str, ...], str]] = {}

    # ------------------------------------------------------------------ seam

    def start(self, on_message: OnMessage, on_frame_error: OnFrameError, on_closed: OnClosed) -> None:
        self._on_message = on_message
        self._on_closed = on_closed

    def send(self, message: Message, *, cancel: CancelToken | None = None) -> None:
        """Send one request and deliver the messages of its answer; see the module docstring.

        The errors are those of :class:`~.httpbase.HttpTransportBase`.
        """
        if self._closed:
            raise self._closed_error()
        if not isinstance(message, Request):
            if isinstance(message, Notification):
                self._drops(
                    logging.DEBUG,
                    "notifications not sent over HTTP",
                    "%s is not sent over HTTP",
                    _loggable(message.method),
                )
            return
        on_message = self._on_message
        if on_message is None:
            raise NotConnected("the transport is not started")
        self._exchange(message, cancel, on_message, _Attempts())

    def close(self, grace: float = 2.0) -> None:
        """Abort the requests in flight, wait at most ``grace`` for them, close the pool."""
        if not self._begin_close():
            return
        self._shut()
        deadline = Deadline(grace)
        with self._idle:
            while self._in_flight:
                if not deadline.wait(self._idle):
                    log.debug("%d requests did not stop in %s", len(self._in_flight), seconds_text(grace))
                    break
        self._finish(grace)

    # -------------------------------------------------------------- exchange

    def _exchange(
        self, request: Request, cancel: CancelToken | None, deliver: OnMessage, attempts: _Attempts
    ) -> None:
        sent = request
        while True:
            try:
                retry = self._attempt(sent, cancel, _same_id(request, sent, deliver), attempts)
            except StreamBroken as exc:
                if request.method not in REISSUE_METHODS or attempts.reissued or self._closed:
                    raise
                attempts.reissued = True
                sent = Request(f"mcpbridge-again-{next(_ids)}", request.method, request.params)
                self._drops(
                    logging.INFO,
                    "requests sent again after a broken connection",
                    "%s: the connection broke (%s), thus the bridge sends it once more with a new id",
                    _loggable(request.method),
                    exc.detail,
                )
                continue
            except HttpStatusError as exc:
                if not self._wait_busy(request.method, exc, cancel, waited=attempts.busy):
                    raise
                attempts.busy = True
                continue
            if retry is None:
                return
            if retry is _Retry.HEADERS:
                attempts.headers = True
            else:
                attempts.auth = True

    def _attempt(
        self, request: Request, cancel: CancelToken | None, deliver: OnMessage, attempts: _Attempts
    ) -> _Retry | None:
        """One POST. Returns what to retry, or None when the answer was delivered."""
        with self._tracked(cancel) as exchange, closing(self._post(request, exchange, cancel)) as response:
            status, media = response.status, media_type(response)
            log.debug("%s: HTTP status %d (%s)", _loggable(request.method), status, media or "no body")
            if self._challenged(response, attempts.auth):
                return _Retry.AUTH
            answer = self._read_answer(request, response, exchange, cancel, deliver)
            if (
                media == "application/json"
                and isinstance(answer, ErrorResponse)
                and answer.error.code == jsonrpc.HEADER_MISMATCH
                and request.method == "tools/call"
                and not attempts.headers
            ):
                response.close()
                if self._refresh_tools(request, cancel):
                    return _Retry.HEADERS
            deliver(answer)
            return None

    def _post(self, request: Request, exchange: Exchange, cancel: CancelToken | None) -> WireResponse:
        body = json_body(request)
        return self._send("POST", self._headers_of(request), body, exchange, cancel, method=request.method)

    def _headers_of(self, request: Request) -> dict[str, str | bytes]:
        headers = self._base_headers()
        params = request.params or {}
        meta = params.get("_meta")
        version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        headers["MCP-Protocol-Version"] = version if isinstance(version, str) else MODERN
        headers["Mcp-Method"] = encode_header_value(request.method)
        name_key = NAME_PARAMS.get(request.method)
        if name_key is not None and isinstance(params.get(name_key), str):
            headers["Mcp-Name"] = encode_header_value(params[name_key])
        tool = params.get("name")
        if request.method == "tools/call" and isinstance(tool, str):
            with self._lock:
                markings = self._markings.get(tool)
            if markings:
                headers.update(param_headers(markings, params.get("arguments")))
        return headers

    # ---------------------------------------------------------------- tools

    def _passing(self, request: Request, message: Response | ErrorResponse) -> Response | ErrorResponse:
        """The response as it goes to the client: a tool list without the tools of invalid markings."""
        if request.method != "tools/list" or not isinstance(message, Response):
            return message
        result, learned, dropped = filter_tools(message.result)
        for name, reason in dropped:
            self._drops(
                logging.WARNING,
                "tools left out for an x-mcp-header marking that is not valid",
                "the upstream tool %s has an x-mcp-header marking that is not valid, thus the bridge "
                "leaves it out: %s",
                _loggable(name),
                reason,
            )
        with self._lock:
            self._markings.update(learned)
            for name, _reason in dropped:
                self._markings.pop(name, None)
        return message if not dropped else Response(message.id, result)

    def _refresh_tools(self, call: Request, cancel: CancelToken | None) -> bool:
        """Read the whole tool list again after a header mismatch; tell whether it worked."""
        meta = (call.params or {}).get("_meta")
        base = {
            key: value
            for key, value in (meta.items() if isinstance(meta, dict) else ())
            if key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO)
        }
        learned: dict[str, dict[tuple[str, ...], str]] = {}
        cursor: str | None = None
        for _page in range(REFRESH_MAX_PAGES):
            params: dict[str, Any] = {"_meta": base}
            if cursor is not None:
                params["cursor"] = cursor
            request = Request(f"mcpbridge-tools-{next(_ids)}", "tools/list", params)
            answers: list[Message] = []
            try:
                self._exchange(request, cancel, answers.append, _Attempts(headers=True))
            except (Cancelled, Closed):
                raise
            except McpError as exc:
                self._drops(
                    logging.WARNING,
                    "failed refreshes of the tool list",
                    "the refresh of the tool list after a header mismatch failed: %s",
                    exc.detail,
                )
                return False
            answer = answers[-1] if answers else None
            if not isinstance(answer, Response) or not isinstance(answer.result, dict):
                self._drops(
                    logging.WARNING,
                    "failed refreshes of the tool list",
                    "the refresh of the tool list after a header mismatch got no tool list",
                )
                return False
            _result, page, _dropped = filter_tools(answer.result)
            learned.update(page)
            next_cursor = answer.result.get("nextCursor")
            if not isinstance(next_cursor, str):
                break
            cursor = next_cursor
        with self._lock:
            self._markings = learned
        self._drops(
            logging.INFO,
            "refreshes of the tool list",
            "refreshed the tool list after a header mismatch of tools/call",
        )
        return True


def _same_id(original: Request, sent: Request, deliver: OnMessage) -> OnMessage:
    """``deliver``, with the response to ``sent`` under the id of ``original``."""
    if sent is original:
        return deliver

    def renamed(message: Message) -> None:
        if isinstance(message, Response) and message.id == sent.id:
            message = Response(original.id, message.result)
        elif isinstance(message, ErrorResponse) and message.id == sent.id:
            message = ErrorResponse(original.id, message.error)
        deliver(message)

    return renamed


def _loggable(text: str) -> str:
    """A name from the server for a log line: at most 128 characters."""
    return text if len(text) <= 128 else text[:125] + "..."
