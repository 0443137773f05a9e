"""The error table of the bridge: each cause has a JSON-RPC code and a fixed message.

This module is pure: it does no I/O and reads no clock.

Rules:

* An error of the bridge itself is ``{"code": C, "message": M, "data": {"cause": K}}``,
  plus ``data.detail`` when there is more to say (a method, a limit, an HTTP status).
  The detail never holds a secret, a header value, a token, the upstream URL or the
  stderr output of the upstream process: callers give only such short texts.
* A JSON-RPC error of the upstream server goes to the client with its code, message and
  data unchanged, and without a ``cause``. The one exception is -32042 (URL elicitation
  required): VS Code opens each URL in its ``data``, so it becomes -32603 with the
  upstream message and no data.
* The other exception: the error of a server that has no channel for its requests in the
  middle of a call (:func:`no_back_channel`, the Python SDK's ``NoBackChannelError``) under
  ``--protocol 2026-07-28`` keeps its code and data, and its message gets
  :data:`BACK_CHANNEL_FIX` (:func:`with_back_channel_fix`): the cause, and the option to drop.
* Every message ends with a period, except the one of ``too_many_requests``, which is
  the text of the stdio server of the upstream SDK.
* ``canceled`` has a row so that every cause of the upstream client has one, but a
  canceled request gets no response (see :func:`has_response`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ...mcp.errors import McpError, RpcError
from ...mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_DATA,
    PARSE_ERROR,
    URL_ELICITATION_REQUIRED,
)
from ...mcp.text import format_duration as format_duration  # the one rule, also offered here
from ...oauth.errors import SignInError, problem_text

_SEE_OUTPUT = "See the Output channel of the server."
_REGISTER = (
    "Register a client with the redirect URI {redirect_uri} at the authorization server. "
    "Then give its client ID with --client-id and its issuer with --client-issuer."
)

#: cause -> (JSON-RPC code, message template). The templates of the sign-in causes have
#: the placeholders ``{seconds}``, ``{port}``, ``{redirect_uri}`` and ``{name}``; the one of
#: ``legacy_refused`` has ``{versions}``.
ERRORS: Final[Mapping[str, tuple[int, str]]] = MappingProxyType(
    {
        # The errors of the upstream client.
        "rpc": (INTERNAL_ERROR, f"The upstream server sent an error. {_SEE_OUTPUT}"),
        "canceled": (INTERNAL_ERROR, "The client canceled the request."),
        "timeout": (INTERNAL_ERROR, f"The upstream server did not answer in time. {_SEE_OUTPUT}"),
        "closed": (INTERNAL_ERROR, f"The upstream server stopped. {_SEE_OUTPUT}"),
        "transport_failed": (
            INTERNAL_ERROR,
            f"The connection to the upstream server failed. {_SEE_OUTPUT}",
        ),
        "invalid_response": (
            INTERNAL_ERROR,
            f"The upstream server sent a response that is not valid. {_SEE_OUTPUT}",
        ),
        "response_too_large": (
            INTERNAL_ERROR,
            "The answer of the upstream server is larger than the limit of the bridge. Raise the limit "
            "with --max-line-bytes for a server that runs as a command, or with --max-response-bytes "
            "for a server at a URL.",
        ),
        "too_many_rounds": (
            INTERNAL_ERROR,
            f"The upstream server asked for input too many times. {_SEE_OUTPUT}",
        ),
        "undeclared_input_request": (
            INTERNAL_ERROR,
            "The upstream server asked for input that the client did not declare.",
        ),
        "not_connected": (
            INTERNAL_ERROR,
            f"The bridge has no connection to the upstream server. {_SEE_OUTPUT}",
        ),
        "task_cancelled": (INTERNAL_ERROR, "The upstream server canceled the task of the request."),
        "session_expired": (
            INTERNAL_ERROR,
            "The upstream server ended its session, and a new session at once too, thus the bridge "
            f"starts no more sessions. Restart the server. {_SEE_OUTPUT}",
        ),
        "task_lost": (
            INTERNAL_ERROR,
            f"The upstream server no longer knows the task of the request. {_SEE_OUTPUT}",
        ),
        "task_expired": (
            INTERNAL_ERROR,
            "The task of the request did not end within the time to live that the upstream server gave it.",
        ),
        "invalid_request": (
            INVALID_PARAMS,
            "The bridge cannot send the parameters of the request to the upstream server.",
        ),
        "invalid_meta": (
            INVALID_PARAMS,
            "The request has a _meta key that the bridge cannot send to the upstream server.",
        ),
        # The failures of the bridge.
        "spawn_failed": (
            INTERNAL_ERROR,
            "The bridge cannot start the upstream server. Examine the command in the configuration "
            f"of the server. {_SEE_OUTPUT}",
        ),
        "connect_failed": (
            INTERNAL_ERROR,
            "The bridge cannot make the client for the URL of the upstream server. Examine the URL, "
            f"the proxy variables and the CA certificates. {_SEE_OUTPUT}",
        ),
        "connection_refused": (
            INTERNAL_ERROR,
            "Nothing listens at the address of the upstream server: the connection was refused. Start "
            "the server first, or check the host and the port of its URL.",
        ),
        "not_mcp_endpoint": (
            INTERNAL_ERROR,
            "The URL of the upstream server does not serve MCP: a web server answered, but no MCP "
            "server. Check the path of the URL (often /mcp).",
        ),
        "discover_failed": (
            INTERNAL_ERROR,
            "The upstream server did not answer server/discover. It is not an MCP server of revision "
            f"2026-07-28, or it does not respond. {_SEE_OUTPUT}",
        ),
        "stopped_at_start": (
            INTERNAL_ERROR,
            "The upstream server stopped during the start, before it answered. Its own lines just "
            "above in the Output channel of the server say why; to see more, run its command in a "
            "terminal.",
        ),
        "legacy_refused": (
            INTERNAL_ERROR,
            "The upstream server speaks only MCP {versions}, thus --protocol legacy, which passes "
            "servers of the 2025 era through, cannot work with it. Remove --protocol legacy from the "
            "arguments of the server, or use --protocol auto.",
        ),
        "upstream_exited": (INTERNAL_ERROR, f"The upstream server stopped. {_SEE_OUTPUT}"),
        "input_ended": (
            INTERNAL_ERROR,
            "The input of the bridge ended, and the upstream server did not answer within the grace "
            "period, thus the bridge stopped it.",
        ),
        "not_initialized": (
            INVALID_REQUEST,
            "The client did not initialize the connection. Send initialize first.",
        ),
        "already_initialized": (INVALID_REQUEST, "The client already sent initialize on this connection."),
        "too_many_requests": (INTERNAL_ERROR, "The connection has too many requests in flight"),
        "batch_too_large": (
            INTERNAL_ERROR,
            "The responses to the batch are larger than the bridge holds for the client at once "
            "(64 MiB). Send this request alone or in a smaller batch.",
        ),
        "line_too_long": (INVALID_REQUEST, "The request is longer than the line limit of the bridge."),
        "too_deep": (
            INVALID_REQUEST,
            "The request has more levels of nesting than the limit of the bridge.",
        ),
        "parse_error": (PARSE_ERROR, "The request is not valid JSON."),
        "invalid_request_shape": (INVALID_REQUEST, "The message is not a valid JSON-RPC 2.0 request."),
        "method_not_found": (METHOD_NOT_FOUND, "The server does not have this method."),
        "invalid_params": (INVALID_PARAMS, "The parameters of the request are not valid."),
        # The input requests of the upstream server.
        "invalid_input_request": (
            INTERNAL_ERROR,
            f"The upstream server sent an input request that is not valid for the client. {_SEE_OUTPUT}",
        ),
        "too_many_input_requests": (
            INTERNAL_ERROR,
            "The upstream server asked for more inputs at one time than the limit of the bridge.",
        ),
        "input_timeout": (
            INTERNAL_ERROR,
            "The client did not answer the input request of the upstream server in time.",
        ),
        "invalid_client_answer": (
            INTERNAL_ERROR,
            "The client sent an answer that is not valid for the input request of the upstream server.",
        ),
        # The sign-in at an upstream server at a URL.
        "sign_in_failed": (
            INTERNAL_ERROR,
            f"The sign-in at the authorization server of the upstream server failed. {_SEE_OUTPUT}",
        ),
        "sign_in_timeout": (
            INTERNAL_ERROR,
            "The sign-in did not complete in {seconds} s. The URL of the sign-in is in the Output channel "
            "of the server. To get more time, set --sign-in-timeout. During initialize, also set "
            "--discover-timeout. When the authorization server shows no sign-in page, it possibly does "
            'not know the stored client. Then run "{name} logout <url>" with the URL of this server, '
            "and restart the server.",
        ),
        "sign_in_denied": (
            INTERNAL_ERROR,
            "The authorization server refused the access. Restart the server to sign in again.",
        ),
        "sign_in_error": (
            INTERNAL_ERROR,
            f"The authorization server sent an error for the sign-in. {_SEE_OUTPUT}",
        ),
        "sign_in_invalid_url": (
            INTERNAL_ERROR,
            "The authorization server sent an authorization URL that is not valid. The bridge did not "
            f"open it. {_SEE_OUTPUT}",
        ),
        "sign_in_start_reused": (
            INTERNAL_ERROR,
            "The start URL of the sign-in received a second request, thus the bridge stopped the "
            "sign-in. Another program on the host of the bridge possibly opened the URL. Restart the "
            "server to sign in again. When this occurs again on a host that other users share, use "
            "--no-browser.",
        ),
        "redirect_port_unavailable": (
            INTERNAL_ERROR,
            "The bridge cannot listen on the redirect port {port}. Stop the program that uses the port, "
            "or set a different port with --redirect-port. Each server with a sign-in needs its own port.",
        ),
        "registration_unavailable": (
            INTERNAL_ERROR,
            f"The authorization server has no client registration that the bridge can use. {_REGISTER}",
        ),
        "registration_failed": (
            INTERNAL_ERROR,
            f"The authorization server refused the registration of the client. {_REGISTER}",
        ),
        "issuer_not_registered": (
            INTERNAL_ERROR,
            "The client ID of --client-id is not for the authorization server of the upstream server. "
            "Give a client ID of this authorization server with --client-id, and its issuer with "
            "--client-issuer.",
        ),
        "invalid_client_metadata_url": (
            INTERNAL_ERROR,
            "The URL of --client-metadata-url is not valid for a client ID metadata document. Use an "
            "https URL with a path.",
        ),
        "access_refused": (
            INTERNAL_ERROR,
            "The upstream server refused the access after the sign-in. The account possibly does not "
            f"have the necessary permissions. {_SEE_OUTPUT}",
        ),
        "resource_unknown": (
            INTERNAL_ERROR,
            "The upstream server refused the token of the sign-in: the authorization server does not "
            "know the upstream server's address as a resource, so the sign-in went without it and the "
            "token is not for this server. Register the upstream server's address as a resource (an API "
            "or audience) at the authorization server, or give the resource it knows with "
            f"--resource-indicator <uri>. {_SEE_OUTPUT}",
        ),
        "reauthorization_required": (
            INTERNAL_ERROR,
            "The upstream server needs a new sign-in, and the client did not open the URL of the "
            "sign-in. Restart the server to sign in again.",
        ),
        "sandbox": (
            INTERNAL_ERROR,
            "The upstream server needs a sign-in, but the bridge runs in the sandbox of VS Code, which "
            "blocks the browser and the redirect port of the sign-in. Use --sign-in device when the "
            "authorization server offers it, and allow the host of the upstream server and the host of the "
            "authorization server in the sandbox (the Output channel names both); or remove sandboxEnabled "
            "from the entry of this server.",
        ),
        "device_sign_in_unavailable": (
            INTERNAL_ERROR,
            "The authorization server of the upstream server offers no device sign-in that the bridge "
            "can use. Use --sign-in browser, or --sign-in auto.",
        ),
        "client_credentials_refused": (
            INTERNAL_ERROR,
            "The authorization server refused the client credentials. Check the client ID of --client-id "
            "and the secret in MCP_BRIDGE_CLIENT_SECRET, or use --sign-in browser to sign in as a person.",
        ),
    }
)

#: The causes that give the client no response at all.
NO_RESPONSE_CAUSES: Final = frozenset({"canceled"})

#: The cause of :func:`internal_error`: a bug of the bridge, not a row of the table.
INTERNAL_CAUSE: Final = "internal"
_INTERNAL_MESSAGE: Final = f"The bridge failed to process the request. {_SEE_OUTPUT}"


def connect_fix(*, refused: bool, loopback: bool) -> str:
    """What to do when the bridge gets no connection to the host of the URL.

    ``refused``: the host refused the connection, so nothing listens at the port.
    ``loopback``: the host is this machine, which no proxy stands in front of, so only a
    host elsewhere gets the advice of the proxy variables.
    """
    if refused and loopback:
        return "Nothing listens at the port of the URL: start the server first, or check the port."
    if refused:
        return "Nothing listens at the port of the URL: start the server, or check the host and the port."
    if loopback:
        return "Examine the URL and that the server runs."
    return "Examine the URL and that the server runs; behind a proxy, set HTTPS_PROXY."


def error_object(cause: str, detail: str | None = None, **placeholders: object) -> dict[str, Any]:
    """The error object of the bridge for ``cause``.

    ``detail`` goes to ``data.detail``. ``placeholders`` fill the ``{seconds}``,
    ``{port}``, ``{redirect_uri}`` and ``{name}`` of the sign-in messages; each value
    is written with ``str``.

    Raises:
        KeyError: ``cause`` is not in :data:`ERRORS`, or the message needs a
            placeholder that was not given. The error names the missing key.
    """
    row = ERRORS.get(cause)
    if row is None:
        raise KeyError(f"the error table has no cause {cause!r}")
    code, template = row
    try:
        message = template.format(**placeholders) if "{" in template else template
    except KeyError as exc:
        raise KeyError(f"the message of {cause!r} needs the placeholder {exc.args[0]!r}") from exc
    data: dict[str, Any] = {"cause": cause}
    if detail is not None:
        data["detail"] = detail
    return {"code": code, "message": message, "data": data}


def has_response(cause: str) -> bool:
    """False when the bridge sends no response for ``cause`` (the client canceled)."""
    return cause not in NO_RESPONSE_CAUSES


def internal_error(detail: str | None = None) -> dict[str, Any]:
    """The error for a failure inside the bridge that no row of the table describes."""
    data: dict[str, Any] = {"cause": INTERNAL_CAUSE}
    if detail is not None:
        data["detail"] = detail
    return {"code": INTERNAL_ERROR, "message": _INTERNAL_MESSAGE, "data": data}


def upstream_error(code: int, message: str, data: Any = NO_DATA) -> dict[str, Any]:
    """The error for the client from a JSON-RPC error of the upstream server.

    The code, the message and the data stay as they are, except -32042, which becomes
    -32603 without data.
    """
    if code == URL_ELICITATION_REQUIRED:
        return {"code": INTERNAL_ERROR, "message": message}
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not NO_DATA:
        error["data"] = data
    return error


#: The words (lower case) of an upstream error that says the server cannot send its request in
#: the middle of a call, which a connection of 2026-07-28 does not carry: the Python SDK's
#: ``NoBackChannelError`` ("... has no back-channel for server-initiated requests") and
#: FastMCP's ``ctx.elicit()`` ("... is unavailable on 2026-07-28 connections").
NO_BACK_CHANNEL: Final = ("back-channel", "server-initiated request", "unavailable on 2026-07-28")
#: What the client's error and the log line add to such an error under ``--protocol 2026-07-28``.
BACK_CHANNEL_FIX: Final = (
    "The tool sends a request of MCP 2025-11-25 in the middle of its call (such as ctx.elicit()), "
    "which a connection of MCP 2026-07-28 does not carry, and --protocol 2026-07-28 makes the bridge "
    "translate. The server speaks MCP 2025-11-25 too when it answers initialize: then remove "
    "--protocol 2026-07-28 from the arguments of the server, and the bridge passes it through."
)


def no_back_channel(error: Mapping[str, Any]) -> bool:
    """Whether the upstream error object ``error`` says that the server has no channel for a
    request in the middle of a call."""
    message = error.get("message")
    return isinstance(message, str) and any(words in message.lower() for words in NO_BACK_CHANNEL)


def with_back_channel_fix(error: Mapping[str, Any]) -> dict[str, Any]:
    """``error`` with :data:`BACK_CHANNEL_FIX` after its message; code and data stay."""
    message = str(error.get("message", "")).rstrip()
    return {**error, "message": f"{message} {BACK_CHANNEL_FIX}" if message else BACK_CHANNEL_FIX}


def error_from_mcp(exc: McpError) -> dict[str, Any]:
    """The error object that the client gets for a failed upstream request.

    An :class:`~mcpbridge.mcp.errors.RpcError` passes as :func:`upstream_error` says.
    Each other error gives the row of its ``cause`` with its ``detail``. A cause that
    the table does not have (for example ``internal`` of the root class) gives
    :func:`internal_error`. ``closed`` stays ``closed``: the caller turns it into
    ``upstream_exited`` when it knows that the upstream process is gone.
    """
    if isinstance(exc, RpcError):
        return upstream_error(exc.error.code, exc.error.message, exc.error.data)
    if exc.cause not in ERRORS:
        return internal_error(exc.detail)
    return error_object(exc.cause, exc.detail)


def error_from_sign_in(exc: SignInError) -> dict[str, Any]:
    """The error object that the client gets for a failed sign-in.

    The row of the error's ``cause``, its ``detail`` (a problem of
    :data:`~mcpbridge.oauth.errors.SIGN_IN_PROBLEMS` in its words, with what to do), and
    its ``placeholders`` filled into the message.
    """
    detail = problem_text(exc.detail) if exc.detail else exc.detail
    return error_object(exc.cause, detail, **exc.placeholders)
