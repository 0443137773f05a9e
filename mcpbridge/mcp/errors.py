"""The errors of the MCP layer.

Every error that can reach a peer is an :class:`McpError`, a
:class:`~.errorbase.BridgeError` like every error of the package (see
:mod:`.errorbase` for the tree). Each class names a
``cause`` (the snake_case name that the bridge's error table maps to a code and
a message) and a default JSON-RPC ``code``. ``detail`` is a short text without
secrets: a method name, a limit, an HTTP status.
"""

from __future__ import annotations

import copy
from typing import ClassVar

from .errorbase import BridgeError, LocalFault, PeerFault, UsageFault
from .jsonrpc import ErrorObject

__all__ = [
    "BridgeError",
    "Cancelled",
    "Closed",
    "ConnectFailed",
    "InvalidMeta",
    "InvalidRequest",
    "InvalidResponse",
    "LocalFault",
    "McpError",
    "NotConnected",
    "PeerFault",
    "RequestTimeout",
    "ResponseTooLarge",
    "RpcError",
    "SpawnFailed",
    "TooManyRequests",
    "TooManyRounds",
    "TransportFailed",
    "UsageFault",
    "fresh",
]


class McpError(BridgeError):
    """The root of the errors of :mod:`mcpbridge.mcp` that can reach a peer."""

    cause: ClassVar[str] = "internal"
    code: ClassVar[int] = -32603

    def __init__(self, detail: str | None = None, *, http_status: int | None = None) -> None:
        super().__init__(detail or self.cause)
        self.detail = detail
        self.http_status = http_status


class Closed(McpError, PeerFault):
    """The connection closed, or the upstream process stopped."""

    cause = "closed"


class TransportFailed(McpError, LocalFault):
    """Reading from or writing to the connection failed."""

    cause = "transport_failed"


class InvalidResponse(McpError, PeerFault):
    """The peer sent a response that is not valid."""

    cause = "invalid_response"


class ResponseTooLarge(InvalidResponse):
    """The answer is larger than a limit of this side: a line over the line limit (stdio), a
    body or an event over the response limit (HTTP). ``limit`` is that limit in bytes, and
    ``over_http`` tells which of the two it is."""

    cause = "response_too_large"

    def __init__(
        self,
        detail: str | None = None,
        *,
        limit: int = 0,
        over_http: bool = False,
        http_status: int | None = None,
    ) -> None:
        super().__init__(detail, http_status=http_status)
        self.limit = limit
        self.over_http = over_http


class RequestTimeout(McpError, PeerFault):
    """No response within the time limit of the request."""

    cause = "timeout"


class Cancelled(McpError):
    """The caller canceled the request."""

    cause = "canceled"


class InvalidMeta(McpError, UsageFault):
    """The caller gave a ``_meta`` key that the protocol layer owns or refuses."""

    cause = "invalid_meta"
    code = -32602


class InvalidRequest(McpError, UsageFault):
    """The request cannot be sent, for example its params are not an object."""

    cause = "invalid_request"
    code = -32602


class TooManyRounds(McpError, PeerFault):
    """The server asked for input more times than the limit."""

    cause = "too_many_rounds"


class NotConnected(McpError, UsageFault):
    """The client has no connection."""

    cause = "not_connected"


class SpawnFailed(McpError, UsageFault):
    """The upstream command did not start."""

    cause = "spawn_failed"


class ConnectFailed(McpError, UsageFault):
    """The client for the upstream URL could not be made."""

    cause = "connect_failed"


class TooManyRequests(McpError, UsageFault):
    """The limit of requests in flight is reached."""

    cause = "too_many_requests"


class RpcError(McpError, PeerFault):
    """The peer answered with a JSON-RPC error; ``error`` holds it unchanged."""

    cause = "rpc"

    def __init__(self, error: ErrorObject, *, http_status: int | None = None) -> None:
        super().__init__(error.message, http_status=http_status)
        self.error = error

    @property
    def rpc_code(self) -> int:
        return self.error.code


def fresh(error: McpError) -> McpError:
    """A copy of ``error``, so that two threads never raise the same object."""
    if isinstance(error, RpcError):
        return RpcError(error.error, http_status=error.http_status)
    try:
        duplicate = copy.copy(error)
    except Exception:  # noqa: BLE001 - an error class with an unusual constructor
        return error
    return duplicate if isinstance(duplicate, McpError) else error
