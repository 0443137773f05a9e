"""The error table of the bridge: causes, codes, verbatim messages, upstream errors, durations."""

from __future__ import annotations

from typing import Any

import pytest

from mcpbridge.bridge.rules.errortable import (
    ERRORS,
    connect_fix,
    error_from_mcp,
    error_from_sign_in,
    error_object,
    format_duration,
    has_response,
    internal_error,
)
from mcpbridge.mcp import errors
from mcpbridge.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorObject,
)
from mcpbridge.mcp.transports.legacy_http import SessionExpired
from mcpbridge.oauth.errors import SignInFailed
from tests.schema import validate_legacy

SEE = "See the Output channel of the server."
REGISTER = (
    "Register a client with the redirect URI {redirect_uri} at the authorization server. "
    "Then give its client ID with --client-id and its issuer with --client-issuer."
)

# The table of the behaviour reference, row by row, written out independently of the module.
EXPECTED = {
    "rpc": (INTERNAL_ERROR, f"The upstream server sent an error. {SEE}"),
    "canceled": (INTERNAL_ERROR, "The client canceled the request."),
    "timeout": (INTERNAL_ERROR, f"The upstream server did not answer in time. {SEE}"),
    "closed": (INTERNAL_ERROR, f"The upstream server stopped. {SEE}"),
    "transport_failed": (INTERNAL_ERROR, f"The connection to the upstream server failed. {SEE}"),
    "invalid_response": (INTERNAL_ERROR, f"The upstream server sent a response that is not valid. {SEE}"),
    "response_too_large": (
        INTERNAL_ERROR,
        "The answer of the upstream server is larger than the limit of the bridge. Raise the limit with "
        "--max-line-bytes for a server that runs as a command, or with --max-response-bytes for a server "
        "at a URL.",
    ),
    "too_many_rounds": (INTERNAL_ERROR, f"The upstream server asked for input too many times. {SEE}"),
    "undeclared_input_request": (
        INTERNAL_ERROR,
        "The upstream server asked for input that the client did not declare.",
    ),
    "not_connected": (INTERNAL_ERROR, f"The bridge has no connection to the upstream server. {SEE}"),
    "task_cancelled": (INTERNAL_ERROR, "The upstream server canceled the task of the request."),
    "session_expired": (
        INTERNAL_ERROR,
        "The upstream server ended its session, and a new session at once too, thus the bridge starts no "
        f"more sessions. Restart the server. {SEE}",
    ),
    "task_lost": (
        INTERNAL_ERROR,
        f"The upstream server no longer knows the task of the request. {SEE}",
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
    "spawn_failed": (
        INTERNAL_ERROR,
        f"The bridge cannot start the upstream server. Examine the command in the configuration of the "
        f"server. {SEE}",
    ),
    "connect_failed": (
        INTERNAL_ERROR,
        "The bridge cannot make the client for the URL of the upstream server. Examine the URL, the proxy "
        f"variables and the CA certificates. {SEE}",
    ),
    "connection_refused": (
        INTERNAL_ERROR,
        "Nothing listens at the address of the upstream server: the connection was refused. Start the "
        "server first, or check the host and the port of its URL.",
    ),
    "not_mcp_endpoint": (
        INTERNAL_ERROR,
        "The URL of the upstream server does not serve MCP: a web server answered, but no MCP server. Check "
        "the path of the URL (often /mcp).",
    ),
    "discover_failed": (
        INTERNAL_ERROR,
        "The upstream server did not answer server/discover. It is not an MCP server of revision "
        f"2026-07-28, or it does not respond. {SEE}",
    ),
    "stopped_at_start": (
        INTERNAL_ERROR,
        "The upstream server stopped during the start, before it answered. Its own lines just above in "
        "the Output channel of the server say why; to see more, run its command in a terminal.",
    ),
    "legacy_refused": (
        INTERNAL_ERROR,
        "The upstream server speaks only MCP {versions}, thus --protocol legacy, which passes servers of "
        "the 2025 era through, cannot work with it. Remove --protocol legacy from the arguments of the "
        "server, or use --protocol auto.",
    ),
    "upstream_exited": (INTERNAL_ERROR, f"The upstream server stopped. {SEE}"),
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
        "The responses to the batch are larger than the bridge holds for the client at once (64 MiB). "
        "Send this request alone or in a smaller batch.",
    ),
    "line_too_long": (INVALID_REQUEST, "The request is longer than the line limit of the bridge."),
    "too_deep": (INVALID_REQUEST, "The request has more levels of nesting than the limit of the bridge."),
    "parse_error": (PARSE_ERROR, "The request is not valid JSON."),
    "invalid_request_shape": (INVALID_REQUEST, "The message is not a valid JSON-RPC 2.0 request."),
    "method_not_found": (METHOD_NOT_FOUND, "The server does not have this method."),
    "invalid_params": (INVALID_PARAMS, "The parameters of the request are not valid."),
    "invalid_input_request": (
        INTERNAL_ERROR,
        f"The upstream server sent an input request that is not valid for the client. {SEE}",
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
    "sign_in_failed": (
        INTERNAL_ERROR,
        f"The sign-in at the authorization server of the upstream server failed. {SEE}",
    ),
    "sign_in_timeout": (
        INTERNAL_ERROR,
        "The sign-in did not complete in {seconds} s. The URL of the sign-in is in the Output channel of "
        "the server. To get more time, set --sign-in-timeout. During initialize, also set "
        "--discover-timeout. When the authorization server shows no sign-in page, it possibly does not "
        'know the stored client. Then run "{name} logout <url>" with the URL of this server, and restart '
        "the server.",
    ),
    "sign_in_denied": (
        INTERNAL_ERROR,
        "The authorization server refused the access. Restart the server to sign in again.",
    ),
    "sign_in_error": (INTERNAL_ERROR, f"The authorization server sent an error for the sign-in. {SEE}"),
    "sign_in_invalid_url": (
        INTERNAL_ERROR,
        "The authorization server sent an authorization URL that is not valid. The bridge did not open "
        f"it. {SEE}",
    ),
    "sign_in_start_reused": (
        INTERNAL_ERROR,
        "The start URL of the sign-in received a second request, thus the bridge stopped the sign-in. "
        "Another program on the host of the bridge possibly opened the URL. Restart the server to sign "
        "in again. When this occurs again on a host that other users share, use --no-browser.",
    ),
    "redirect_port_unavailable": (
        INTERNAL_ERROR,
        "The bridge cannot listen on the redirect port {port}. Stop the program that uses the port, or "
        "set a different port with --redirect-port. Each server with a sign-in needs its own port.",
    ),
    "registration_unavailable": (
        INTERNAL_ERROR,
        f"The authorization server has no client registration that the bridge can use. {REGISTER}",
    ),
    "registration_failed": (
        INTERNAL_ERROR,
        f"The authorization server refused the registration of the client. {REGISTER}",
    ),
    "issuer_not_registered": (
        INTERNAL_ERROR,
        "The client ID of --client-id is not for the authorization server of the upstream server. Give a "
        "client ID of this authorization server with --client-id, and its issuer with --client-issuer.",
    ),
    "invalid_client_metadata_url": (
        INTERNAL_ERROR,
        "The URL of --client-metadata-url is not valid for a client ID metadata document. Use an https "
        "URL with a path.",
    ),
    "access_refused": (
        INTERNAL_ERROR,
        "The upstream server refused the access after the sign-in. The account possibly does not have "
        f"the necessary permissions. {SEE}",
    ),
    "resource_unknown": (
        INTERNAL_ERROR,
        "The upstream server refused the token of the sign-in: the authorization server does not know the "
        "upstream server's address as a resource, so the sign-in went without it and the token is not for "
        "this server. Register the upstream server's address as a resource (an API or audience) at the "
        f"authorization server, or give the resource it knows with --resource-indicator <uri>. {SEE}",
    ),
    "reauthorization_required": (
        INTERNAL_ERROR,
        "The upstream server needs a new sign-in, and the client did not open the URL of the sign-in. "
        "Restart the server to sign in again.",
    ),
    "sandbox": (
        INTERNAL_ERROR,
        "The upstream server needs a sign-in, but the bridge runs in the sandbox of VS Code, which blocks "
        "the browser and the redirect port of the sign-in. Use --sign-in device when the authorization "
        "server offers it, and allow the host of the upstream server and the host of the authorization "
        "server in the sandbox (the Output channel names both); or remove sandboxEnabled from the entry "
        "of this server.",
    ),
    "device_sign_in_unavailable": (
        INTERNAL_ERROR,
        "The authorization server of the upstream server offers no device sign-in that the bridge can use. "
        "Use --sign-in browser, or --sign-in auto.",
    ),
    "client_credentials_refused": (
        INTERNAL_ERROR,
        "The authorization server refused the client credentials. Check the client ID of --client-id and "
        "the secret in MCP_BRIDGE_CLIENT_SECRET, or use --sign-in browser to sign in as a person.",
    ),
}

PLACEHOLDERS: dict[str, Any] = {
    "seconds": 300,
    "port": 41894,
    "redirect_uri": "http://127.0.0.1:41894/callback",
    "name": "x",
    "versions": "2026-07-28",
}


def test_the_table_has_exactly_the_causes_codes_and_messages_of_the_reference() -> None:
    assert dict(ERRORS) == EXPECTED


def test_the_table_cannot_be_changed_at_run_time() -> None:
    with pytest.raises(TypeError):
        ERRORS["rpc"] = (1, "x")  # type: ignore[index]


@pytest.mark.parametrize("cause", sorted(EXPECTED))
def test_each_message_ends_with_a_period_except_too_many_requests(cause: str) -> None:
    message = error_object(cause, **PLACEHOLDERS)["message"]
    assert message.endswith(".") is (cause != "too_many_requests")


@pytest.mark.parametrize("cause", sorted(EXPECTED))
def test_each_error_object_is_a_valid_2025_11_25_error_response(cause: str) -> None:
    error = error_object(cause, "some detail", **PLACEHOLDERS)
    validate_legacy({"jsonrpc": "2.0", "id": 1, "error": error}, "JSONRPCErrorResponse")
    assert error["data"] == {"cause": cause, "detail": "some detail"}


def test_an_error_object_has_the_cause_and_a_detail_only_when_given() -> None:
    assert error_object("parse_error") == {
        "code": -32700,
        "message": "The request is not valid JSON.",
        "data": {"cause": "parse_error"},
    }
    assert error_object("line_too_long", "limit: 1024 bytes")["data"] == {
        "cause": "line_too_long",
        "detail": "limit: 1024 bytes",
    }
    assert error_object("timeout", "tools/call: no response in 1 s") == {
        "code": -32603,
        "message": f"The upstream server did not answer in time. {SEE}",
        "data": {"cause": "timeout", "detail": "tools/call: no response in 1 s"},
    }


def test_the_placeholders_of_the_sign_in_messages_are_filled_from_keywords() -> None:
    timeout = error_object("sign_in_timeout", seconds=3, name="mcp-bridge-vscode")["message"]
    assert timeout.startswith("The sign-in did not complete in 3 s. ")
    assert 'run "mcp-bridge-vscode logout <url>" with the URL' in timeout
    port = error_object("redirect_port_unavailable", "address_in_use", port=41894)
    assert "the redirect port 41894. Stop" in port["message"]
    assert port["data"] == {"cause": "redirect_port_unavailable", "detail": "address_in_use"}
    uri = "http://127.0.0.1:41894/callback"
    for cause in ("registration_unavailable", "registration_failed"):
        assert f"with the redirect URI {uri} at the" in error_object(cause, redirect_uri=uri)["message"]


def test_a_detail_with_braces_is_not_taken_for_a_placeholder() -> None:
    assert error_object("invalid_response", "{seconds}")["data"]["detail"] == "{seconds}"


def test_an_unknown_cause_raises_a_key_error_that_names_it() -> None:
    with pytest.raises(KeyError, match="no_such_cause"):
        error_object("no_such_cause")


def test_a_missing_placeholder_raises_a_key_error_that_names_it() -> None:
    with pytest.raises(KeyError, match="seconds"):
        error_object("sign_in_timeout", name="x")


def test_a_canceled_request_gets_no_response() -> None:
    assert not has_response("canceled")
    assert all(has_response(cause) for cause in EXPECTED if cause != "canceled")


def test_an_upstream_json_rpc_error_passes_with_its_code_message_and_data() -> None:
    error = errors.RpcError(ErrorObject(-32002, "Resource not found", {"uri": "file:///x"}))
    assert error_from_mcp(error) == {
        "code": -32002,
        "message": "Resource not found",
        "data": {"uri": "file:///x"},
    }
    no_data = errors.RpcError(ErrorObject(-32601, "Method not found: completion/complete"))
    assert error_from_mcp(no_data) == {"code": -32601, "message": "Method not found: completion/complete"}
    null_data = errors.RpcError(ErrorObject(-32000, "refused", None))
    assert error_from_mcp(null_data) == {"code": -32000, "message": "refused", "data": None}


def test_url_elicitation_required_becomes_an_internal_error_without_its_urls() -> None:
    data = {"elicitations": [{"mode": "url", "elicitationId": "e", "url": "https://x", "message": "m"}]}
    error = errors.RpcError(ErrorObject(-32042, "Sign in first.", data))
    assert error_from_mcp(error) == {"code": -32603, "message": "Sign in first."}


def test_the_2026_resource_not_found_is_not_changed_by_the_error_table() -> None:
    error = errors.RpcError(ErrorObject(-32602, "Resource not found", {"uri": "file:///x"}))
    assert error_from_mcp(error)["code"] == -32602


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            errors.RequestTimeout("tools/call: no response in 1 s"),
            ("timeout", "tools/call: no response in 1 s"),
        ),
        (errors.Closed(), ("closed", None)),
        (errors.TransportFailed("read failed"), ("transport_failed", "read failed")),
        (errors.InvalidResponse("HTTP status 502"), ("invalid_response", "HTTP status 502")),
        (
            errors.ResponseTooLarge("a response longer than 9 bytes", limit=9, over_http=True),
            ("response_too_large", "a response longer than 9 bytes"),
        ),
        (errors.TooManyRounds(), ("too_many_rounds", None)),
        (errors.NotConnected(), ("not_connected", None)),
        (errors.SpawnFailed(), ("spawn_failed", None)),
        (errors.ConnectFailed(), ("connect_failed", None)),
        (errors.InvalidMeta("vscode.bad key"), ("invalid_meta", "vscode.bad key")),
        (errors.InvalidRequest(), ("invalid_request", None)),
        (errors.Cancelled(), ("canceled", None)),
        (SessionExpired("a new session ended"), ("session_expired", "a new session ended")),
    ],
)
def test_every_other_error_of_the_upstream_client_gives_the_row_of_its_cause(
    exc: errors.McpError, expected: tuple[str, str | None]
) -> None:
    cause, detail = expected
    assert error_from_mcp(exc) == error_object(cause, detail)
    assert error_from_mcp(exc)["code"] == EXPECTED[cause][0]


def test_an_error_without_a_row_gives_the_internal_error_of_the_bridge() -> None:
    error = error_from_mcp(errors.McpError("bug"))
    assert error == internal_error("bug")
    assert error["code"] == INTERNAL_ERROR and error["data"]["cause"] == "internal"
    validate_legacy({"jsonrpc": "2.0", "id": 1, "error": internal_error()}, "JSONRPCErrorResponse")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (60, "60 s"),
        (1, "1 s"),
        (1.0, "1 s"),
        (3600, "3600 s"),
        (0.3, "300 ms"),
        (1.5, "1500 ms"),
        (0.001, "1 ms"),
    ],
)
def test_a_duration_is_whole_seconds_else_milliseconds(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_only_a_host_elsewhere_gets_the_advice_of_the_proxy_variables() -> None:
    assert connect_fix(refused=True, loopback=True) == (
        "Nothing listens at the port of the URL: start the server first, or check the port."
    )
    assert "HTTPS_PROXY" not in connect_fix(refused=True, loopback=False)
    assert "HTTPS_PROXY" not in connect_fix(refused=False, loopback=True)
    assert connect_fix(refused=False, loopback=False).endswith("behind a proxy, set HTTPS_PROXY.")


def test_a_problem_of_the_sign_in_reaches_the_client_in_words_with_what_to_do() -> None:
    error = error_from_sign_in(SignInFailed("NoS256"))
    assert error["data"] == {
        "cause": "sign_in_failed",
        "detail": "the authorization server does not offer PKCE with S256; the bridge signs in only with "
        "it: ask the owner of the authorization server to offer it",
    }
    other = error_from_sign_in(SignInFailed("token: HTTP status 500"))
    assert other["data"]["detail"] == "token: HTTP status 500"
