"""The errors of the MCP layer.

Every error that can reach a peer is an :class:`McpError`. Each class names a
``cause`` (the snake_case name that the bridge's error table maps to a code and
a message) and a default JSON-RPC ``code``. ``detail`` is a short text without
secrets: a method name, a limit, an HTTP status.
"""

from __future__ import annotations

from typing import ClassVar

from .jsonrpc import ErrorObject


class McpError(Exception):
    """The root of the errors of :mod:`mcpbridge.mcp`."""

    cause: ClassVar[str] = "internal"
    code: ClassVar[int] = -32603

    def __init__(self, detail: str | None = None, *, http_status: int | None = None) -> None:
        super().__init__(detail or self.cause)
        self.detail = detail
        self.http_status = http_status


class Closed(McpError):
    """The connection closed, or the upstream process stopped."""

    cause = "closed"


class TransportFailed(McpError):
    """Reading from or writing to the connection failed."""

    cause = "transport_failed"


class InvalidResponse(McpError):
    """The peer sent a response that is not valid."""

    cause = "invalid_response"


class RequestTimeout(McpError):
    """No response within the time limit of the request."""

    cause = "timeout"


class Cancelled(McpError):
    """The caller canceled the request."""

    cause = "canceled"


class InvalidMeta(McpError):
    """The caller gave a ``_meta`` key that the protocol layer owns or refuses."""

    cause = "invalid_meta"
    code = -32602


class InvalidRequest(McpError):
    """The request cannot be sent, for example its params are not an object."""

    cause = "invalid_request"
    code = -32602


class TooManyRounds(McpError):
    """The server asked for input more times than the limit."""

    cause = "too_many_rounds"


class NotConnected(McpError):
    """The client has no connection."""

    cause = "not_connected"


class SpawnFailed(McpError):
    """The upstream command did not start."""

    cause = "spawn_failed"


class ConnectFailed(McpError):
    """The client for the upstream URL could not be made."""

    cause = "connect_failed"


class TooManyRequests(McpError):
    """The limit of requests in flight is reached."""

    cause = "too_many_requests"


class RpcError(McpError):
    """The peer answered with a JSON-RPC error; ``error`` holds it unchanged."""

    cause = "rpc"

    def __init__(self, error: ErrorObject, *, http_status: int | None = None) -> None:
        super().__init__(error.message, http_status=http_status)
        self.error = error

    @property
    def rpc_code(self) -> int:
        return self.error.code
