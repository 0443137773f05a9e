"""The part of revision 2025-11-25 that the bridge receives from its client (VS Code).

This module is pure: it does no I/O and reads no clock. It gives the class of each
method and notification of the client, parses the params that the front end reads
itself, and finds the id of a line that is too long to parse.

Rules:

* The class of a method is a lookup in :data:`METHOD_CLASSES`: exact and case
  sensitive. A method that the table does not have is :attr:`MethodClass.UNKNOWN`.
* Eight methods have the same name in both revisions; the bridge forwards them
  (:data:`FORWARDED_METHODS`). Everything else it answers itself.
* A parser raises :class:`InvalidParams` with a short detail; the front end answers
  -32602 with the cause ``invalid_params``. A parser never echoes a value of the
  client in the detail.
* Request ids are strings or integers. ``true`` is not an integer, and ``1.5`` is not
  an id.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from ...mcp.errorbase import PeerFault
from ...mcp.ids import recover_id as recover_id
from ...mcp.jsonrpc import RequestId
from ...mcp.protocol import LOG_LEVELS, META_PROTOCOL_VERSION


class MethodClass(enum.Enum):
    """What the front end does with a request of the client."""

    #: Start the upstream connection and answer with the translated discover result.
    INITIALIZE = "initialize"
    #: Answer ``{}``.
    PING = "ping"
    #: ``logging/setLevel``: keep the level and answer ``{}``.
    SET_LEVEL = "set_level"
    #: ``server/discover`` of 2026-07-28: answer -32601 at once, so that a client of both
    #: revisions continues with ``initialize``.
    DISCOVER = "discover"
    #: Send the request to the upstream server and translate the result.
    FORWARD = "forward"
    #: ``resources/subscribe``: the listen stream gets the URI.
    SUBSCRIBE = "subscribe"
    #: ``resources/unsubscribe``: the listen stream loses the URI.
    UNSUBSCRIBE = "unsubscribe"
    #: ``tasks/get``, ``tasks/result``, ``tasks/cancel``, ``tasks/list``: the tasks that the
    #: client made (only when the bridge declared ``capabilities.tasks``; else -32601).
    TASK = "task"
    #: Answer -32601.
    UNKNOWN = "unknown"


class NotificationClass(enum.Enum):
    """What the reader does with a notification of the client.

    The bridge never sends a notification of the client to the upstream server.
    """

    #: ``notifications/initialized``: may start the listen stream.
    INITIALIZED = "initialized"
    #: ``notifications/cancelled``: cancel the request with that id.
    CANCELLED = "cancelled"
    #: ``notifications/roots/list_changed``: ignored; the upstream server asks for the
    #: roots with each input request.
    ROOTS_LIST_CHANGED = "roots_list_changed"
    #: Each other notification: ignored with a debug line.
    OTHER = "other"


#: The requests that go to the upstream server. Both revisions have them with the same name.
FORWARDED_METHODS: Final = frozenset(
    {
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    }
)

#: The requests of the client about its own tasks.
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/list"})

#: The forwarded methods whose results have pages and a ``nextCursor``.
LIST_METHODS: Final = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list"})

METHOD_CLASSES: Final[Mapping[str, MethodClass]] = MappingProxyType(
    {
        "initialize": MethodClass.INITIALIZE,
        "ping": MethodClass.PING,
        "logging/setLevel": MethodClass.SET_LEVEL,
        "server/discover": MethodClass.DISCOVER,
        "resources/subscribe": MethodClass.SUBSCRIBE,
        "resources/unsubscribe": MethodClass.UNSUBSCRIBE,
        **{method: MethodClass.FORWARD for method in sorted(FORWARDED_METHODS)},
        **{method: MethodClass.TASK for method in sorted(TASK_METHODS)},
    }
)

NOTIFICATION_CLASSES: Final[Mapping[str, NotificationClass]] = MappingProxyType(
    {
        "notifications/initialized": NotificationClass.INITIALIZED,
        "notifications/cancelled": NotificationClass.CANCELLED,
        "notifications/roots/list_changed": NotificationClass.ROOTS_LIST_CHANGED,
    }
)


def classify(method: str) -> MethodClass:
    """The class of the request method ``method`` (exact, case sensitive)."""
    return METHOD_CLASSES.get(method, MethodClass.UNKNOWN)


def classify_notification(method: str) -> NotificationClass:
    """The class of the notification method ``method`` (exact, case sensitive)."""
    return NOTIFICATION_CLASSES.get(method, NotificationClass.OTHER)


class InvalidParams(PeerFault):
    """The params of a request that the front end answers itself are not valid.

    ``detail`` tells which member is wrong. It never holds a value of the client.
    """

    cause: Final = "invalid_params"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True, slots=True)
class InitializeParams:
    """The params of ``initialize`` that the bridge uses."""

    #: The revision that the client asks for. The bridge always answers 2025-11-25.
    protocol_version: str
    #: The capabilities of the client as it sent them; ``{}`` when missing or not an object.
    capabilities: dict[str, Any]
    #: The ``Implementation`` of the client: ``name`` and ``version``, and ``title``,
    #: ``description``, ``websiteUrl`` and ``icons`` when they have the right type. The
    #: upstream server gets it as the identity of the bridge's client.
    client_info: dict[str, Any]


_OPTIONAL_INFO_STRINGS = ("title", "description", "websiteUrl")


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _object(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise InvalidParams("the params are not an object")
    return params


def parse_initialize(params: Any) -> InitializeParams:
    """Parse the params of ``initialize``.

    ``protocolVersion`` must be a string and ``clientInfo`` an object with the strings
    ``name`` and ``version``. Other members are ignored.

    Raises:
        InvalidParams: a mandatory member is missing or has the wrong type.
    """
    obj = _object(params)
    version = obj.get("protocolVersion")
    if not isinstance(version, str):
        raise InvalidParams("protocolVersion is not a string")
    info = obj.get("clientInfo")
    if not isinstance(info, dict):
        raise InvalidParams("clientInfo is not an object")
    if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        raise InvalidParams("clientInfo needs the strings name and version")
    client_info: dict[str, Any] = {"name": info["name"], "version": info["version"]}
    for key in _OPTIONAL_INFO_STRINGS:
        if isinstance(info.get(key), str):
            client_info[key] = info[key]
    icons = info.get("icons")
    if isinstance(icons, list) and all(isinstance(i, dict) and isinstance(i.get("src"), str) for i in icons):
        client_info["icons"] = icons
    capabilities = obj.get("capabilities")
    return InitializeParams(
        protocol_version=version,
        capabilities=capabilities if isinstance(capabilities, dict) else {},
        client_info=client_info,
    )


def parse_set_level(params: Any) -> str:
    """The level of ``logging/setLevel``: one of the eight MCP log levels.

    Raises:
        InvalidParams: no params, or ``level`` is not a log level.
    """
    level = _object(params).get("level")
    if not isinstance(level, str) or level not in LOG_LEVELS:
        raise InvalidParams("level is not a log level")
    return level


def parse_subscribe(params: Any) -> str:
    """The ``uri`` of ``resources/subscribe`` and ``resources/unsubscribe``.

    Raises:
        InvalidParams: no params, or ``uri`` is not a string that is not empty.
    """
    uri = _object(params).get("uri")
    if not isinstance(uri, str) or not uri:
        raise InvalidParams("uri is not a string that is not empty")
    return uri


def parse_cancelled(params: Any) -> RequestId | None:
    """The ``requestId`` of ``notifications/cancelled``, or ``None``.

    2025-11-25 makes ``requestId`` optional (tasks are canceled with ``tasks/cancel``),
    and the bridge declares no tasks, so a notification without a valid id cancels
    nothing. A float or a boolean is not an id.
    """
    if not isinstance(params, dict):
        return None
    request_id = params.get("requestId")
    return request_id if _is_request_id(request_id) else None


def has_modern_meta(params: Any) -> bool:
    """True when ``params._meta`` has the protocol version key of 2026-07-28.

    A client of both revisions sends this key with each modern request. Before
    ``initialize`` such a request gets -32601, so the client falls back to
    ``initialize``.
    """
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
