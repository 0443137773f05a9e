"""The words a user sees when something fails: the client's error and the Output channel line.

Each failure is the real one (a real upstream process, a real socket on 127.0.0.1), driven
through the real executable. Each test asserts the message and ``data`` of the error that
VS Code shows, and the line of the bridge on stderr: the message says what happened in the
user's words with the option or the action that fixes it, the line adds the detail (a limit,
an exit code, an address), and no bare internal code or exception class name reaches either.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import WAIT, read_line
from tests.harness import Bridge, bridge_command, fixture_command
from tests.peers.scripted_http import Exchange, ScriptedServer, default_script

BAD_UPSTREAM = Path(__file__).resolve().parents[1] / "peers" / "bad_upstream.py"
PREFIX = "mcp-bridge-vscode: "
#: The first step of a start, with the options that make it: server/discover, or the
#: initialize of the 2025 era for --protocol legacy.
#: The first request of each choice of --protocol to a command: the client's own initialize
#: (auto and legacy), or server/discover (2026-07-28).
START_STEPS = [
    ((), "initialize"),
    (("--protocol", "2026-07-28"), "server/discover"),
    (("--protocol", "legacy"), "initialize"),
]
#: The first request to a URL: the client's own initialize too (auto and legacy).
URL_STEPS = [
    ((), "initialize"),
    (("--protocol", "2026-07-28"), "server/discover"),
    (("--protocol", "legacy"), "initialize"),
]


def bad_upstream(*args: str) -> list[str]:
    return [sys.executable, str(BAD_UPSTREAM), *args]


def error_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "error" in response, response
    error: dict[str, Any] = response["error"]
    return error


def bridge_lines(stderr: str) -> list[str]:
    """The bridge's own lines of stderr (not the upstream command's)."""
    return [line for line in stderr.splitlines() if line.startswith(PREFIX)]


def finish(bridge: Bridge) -> str:
    bridge.close_stdin()
    bridge.wait_exit()
    assert "Traceback" not in bridge.stderr_text
    return bridge.stderr_text


def call(bridge: Bridge, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return bridge.request("tools/call", {"name": name, "arguments": arguments})


# --------------------------------------------------------------------------- the limits of the bridge

TOO_LARGE = (
    "The answer of the upstream server is larger than the limit of the bridge. Raise the limit with "
    "--max-line-bytes for a server that runs as a command, or with --max-response-bytes for a server "
    "at a URL."
)


def test_an_answer_over_the_line_limit_names_the_limit_of_the_bridge_and_its_option() -> None:
    command = bridge_command("--max-line-bytes", "300", upstream=bad_upstream())
    with Bridge(command) as bridge:
        assert "result" in bridge.initialize()
        response = call(bridge, "too_long", {"bytes": 1000})
        stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == TOO_LARGE
    assert error["data"]["cause"] == "response_too_large"
    detail = error["data"]["detail"]
    assert detail.startswith("tools/call: the response is a line of ")
    assert detail.endswith(" bytes, over the limit of 300 bytes")
    assert f"{PREFIX}bridge: warning: {detail}; to take such answers, raise --max-line-bytes" in stderr


@pytest.mark.parametrize("tool", ["big_json", "big_event"])
def test_an_http_answer_over_the_response_limit_names_the_limit_and_its_option(tool: str) -> None:
    with ScriptedServer(default_script) as server:
        with Bridge(bridge_command("--max-response-bytes", "2000", server.url())) as bridge:
            assert "result" in bridge.initialize()
            response = call(bridge, tool, {"size": 5000})
            stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == TOO_LARGE
    assert error["data"]["cause"] == "response_too_large"
    detail = error["data"]["detail"]
    what = "a response" if tool == "big_json" else "an event"
    assert detail == f"{what} longer than 2000 bytes"
    assert f"{PREFIX}bridge: warning: {detail}; to take such answers, raise --max-response-bytes" in stderr


# --------------------------------------------------------------------------- a server that stops at the start

STOPPED = (
    "The upstream server stopped during the start, before it answered. Its own lines just above in the "
    "Output channel of the server say why; to see more, run its command in a terminal."
)


@pytest.mark.parametrize(("options", "step"), START_STEPS)
def test_a_server_that_exits_during_the_start_is_named_with_its_exit_code_and_where_to_look(
    options: tuple[str, ...], step: str
) -> None:
    upstream = ["sh", "-c", "echo 'my-server: the config file is missing' >&2; exit 3"]
    with Bridge(bridge_command(*options, upstream=upstream)) as bridge:
        response = bridge.initialize()
        stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == STOPPED
    detail = f"{step}: the upstream server exited (code 3)"
    assert error["data"] == {"cause": "stopped_at_start", "detail": detail}
    lines = stderr.splitlines()
    said = lines.index("my-server: the config file is missing")
    line = (
        f"{PREFIX}bridge: error: the upstream server exited during {step} (code 3): its own lines above say "
        "why; to see more, run its command in a terminal"
    )
    assert line in lines[said + 1 :]


# ----------------------------------------------------------------- --protocol legacy, a modern server


def test_protocol_legacy_in_front_of_a_server_of_2026_07_28_only_says_to_remove_it() -> None:
    with Bridge(bridge_command("--protocol", "legacy", upstream=fixture_command())) as bridge:
        response = bridge.initialize()
        stderr = finish(bridge)
    error = error_of(response)
    assert error["code"] == -32603
    assert error["message"] == (
        "The upstream server speaks only MCP 2026-07-28, thus --protocol legacy, which passes servers of "
        "the 2025 era through, cannot work with it. Remove --protocol legacy from the arguments of the "
        "server, or use --protocol auto."
    )
    assert error["data"] == {
        "cause": "legacy_refused",
        "detail": "initialize: error -32022; the server supports MCP 2026-07-28",
    }
    assert (
        f"{PREFIX}bridge: error: initialize failed: the upstream server speaks only MCP 2026-07-28 "
        "(error -32022), thus --protocol legacy cannot work: remove it, or use --protocol auto"
    ) in bridge_lines(stderr)


def run_check(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``mcp-bridge-vscode check`` in its own process, without proxy variables."""
    return subprocess.run(
        [sys.executable, "-m", "mcpbridge", "check", *arguments],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "HTTPS_PROXY": "", "HTTP_PROXY": ""},
    )


def test_check_with_protocol_legacy_in_front_of_a_server_of_2026_07_28_only_names_the_revision() -> None:
    run = run_check("--protocol", "legacy", "--", *fixture_command())
    assert run.returncode == 1
    assert (
        "  - the server speaks only MCP 2026-07-28, thus --protocol legacy, which passes servers of the "
        "2025 era through, cannot work with it: it answered initialize with error -32022 (Unsupported "
        "protocol version)\n"
        "    fix: Remove --protocol legacy from the arguments of the server, or use --protocol auto.\n"
    ) in run.stdout
    assert "Traceback" not in run.stderr


# --------------------------------------------------------------------------- a URL that serves no MCP

NOT_MCP = (
    "The URL of the upstream server does not serve MCP: a web server answered, but no MCP server. Check "
    "the path of the URL (often /mcp)."
)
NOT_MCP_ADVICE = "the URL does not serve MCP; check its path (often /mcp)"


@contextmanager
def plain_web_server() -> Iterator[str]:
    """``python3 -m http.server`` on a free port of 127.0.0.1: it answers a POST with 501 and a web page."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        cwd=Path(__file__).parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        # It listens before it writes this line.
        assert read_line(server.stdout, "the first line of http.server").startswith("Serving HTTP on ")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


def test_a_url_of_a_plain_web_server_that_refuses_post_is_not_an_mcp_endpoint() -> None:
    with plain_web_server() as url:
        with Bridge(bridge_command(url)) as bridge:
            response = bridge.initialize()
            stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == NOT_MCP
    detail = "initialize: HTTP status 501, a web page"
    assert error["data"] == {"cause": "not_mcp_endpoint", "detail": detail}
    line = f"{PREFIX}bridge: error: initialize failed: HTTP status 501, a web page: {NOT_MCP_ADVICE}"
    assert line in bridge_lines(stderr)


def test_check_of_a_url_of_a_plain_web_server_says_it_is_not_an_mcp_endpoint() -> None:
    with plain_web_server() as url:
        run = run_check(url)
    assert run.returncode == 1
    assert (
        "  - the URL is not an MCP endpoint (HTTP status 501)\n"
        "    fix: Examine the path of the URL (often /mcp).\n"
    ) in run.stdout
    assert "Traceback" not in run.stderr


def not_found(ex: Exchange) -> None:
    ex.body(404, b"<html><body>Not Found</body></html>", "text/html")


def test_a_url_without_an_mcp_server_is_worded_after_every_fallback_was_tried() -> None:
    with ScriptedServer(not_found) as server:
        with Bridge(bridge_command(server.url())) as bridge:
            response = bridge.initialize()
            stderr = finish(bridge)
        # Every fallback ran: the initialize of the 2025 era over Streamable HTTP, then the
        # stream of the HTTP+SSE transport. A 404 without a JSON-RPC error is no refusal of a
        # server of 2026-07-28, thus no server/discover follows.
        requests = [(request.method, request.rpc_method) for request in server.wait_requests(2)]
    assert requests == [("POST", "initialize"), ("GET", None)]
    error = error_of(response)
    assert error["message"] == NOT_MCP
    assert error["data"]["cause"] == "not_mcp_endpoint"
    assert error["data"]["detail"].endswith(": HTTP status 404, a web page")
    said = f"failed: HTTP status 404, a web page: {NOT_MCP_ADVICE}"
    assert any(line.endswith(said) for line in bridge_lines(stderr))


# --------------------------------------------------------------------------- nothing listens at the URL

REFUSED = (
    "Nothing listens at the address of the upstream server: the connection was refused. Start the server "
    "first, or check the host and the port of its URL."
)


@pytest.mark.parametrize(("options", "step"), URL_STEPS)
def test_a_refused_connection_on_loopback_says_nothing_listens_there_and_no_word_of_a_proxy(
    options: tuple[str, ...], step: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port is free again: nothing listens there.
    url = f"http://127.0.0.1:{port}/mcp-path-7c1?tenant=q-31f"
    with Bridge(bridge_command(*options, url), env={"HTTPS_PROXY": "", "HTTP_PROXY": ""}) as bridge:
        response = bridge.initialize()
        stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == REFUSED
    where = f"nothing listens at the host 127.0.0.1, port {port}"
    detail = f"{step}: {where} (the connection was refused)"
    assert error["data"] == {"cause": "connection_refused", "detail": detail}
    line = (
        f"{PREFIX}bridge: error: {step} failed: {where} (the connection was refused): start the server "
        "first, or check the port of the URL"
    )
    assert line in bridge_lines(stderr)
    assert "PROXY" not in stderr and "proxy" not in str(error)
    assert "mcp-path-7c1" not in stderr and "q-31f" not in stderr


def test_check_of_a_refused_loopback_url_says_to_start_the_server_and_no_word_of_a_proxy() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = run_check(f"http://127.0.0.1:{port}/mcp")
    assert run.returncode == 1
    assert (
        "    fix: Nothing listens at the port of the URL: start the server first, or check the port.\n"
        in run.stdout
    )
    assert "HTTPS_PROXY" not in run.stdout


# --------------------------------------------------------------------------- the problems of the sign-in

INSECURE = (
    "the protected resource metadata is at an http address, which the bridge refuses: it allows http only "
    "when the address and the upstream server are both on loopback; serve the metadata over https, or run "
    "the upstream server and its authorization server both on loopback (127.0.0.1, ::1 or localhost) for a "
    "local test"
)


def http_metadata(ex: Exchange) -> None:
    """A server that asks for a sign-in whose metadata is at an http address off loopback."""
    ex.close()
    ex.body(
        401,
        b"",
        "text/plain",
        [("WWW-Authenticate", 'Bearer resource_metadata="http://auth.example.invalid/x"')],
    )


def test_a_sign_in_whose_metadata_is_not_https_is_told_in_words_with_what_to_do() -> None:
    with ScriptedServer(http_metadata) as server:
        with Bridge(bridge_command(server.url())) as bridge:
            response = bridge.initialize()
            stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == (
        "The sign-in at the authorization server of the upstream server failed. See the Output channel of "
        "the server."
    )
    assert error["data"] == {"cause": "sign_in_failed", "detail": INSECURE}
    assert f"{PREFIX}bridge: error: initialize failed: {INSECURE}" in bridge_lines(stderr)
    assert "InsecureMetadataUrl" not in stderr


def test_a_url_that_needs_no_sign_in_writes_no_word_of_a_sign_in() -> None:
    with ScriptedServer(default_script) as server:
        with Bridge(bridge_command(server.url())) as bridge:
            assert "result" in bridge.initialize()
            assert "result" in call(bridge, "ok", {})
            stderr = finish(bridge)
    lines = bridge_lines(stderr)
    # The start line, the refused initialize that tells the era, and the revisions of the connection.
    kinds = [line.split(": ")[1:3] for line in lines]
    assert kinds == [["vscode", "info"], ["bridge", "info"], ["bridge", "info"]], lines
    assert "refused initialize" in lines[1] and "speaks MCP 2026-07-28" in lines[2], lines
    for word in ("sign-in", "sign in", "oauth", "token", "keychain", "authoriz"):
        assert word not in stderr.lower(), word


# --------------------------------------------------------------------------- no unrelated causes


def refused_token(ex: Exchange) -> None:
    """A server that refuses the token of the request with an OAuth error body, not a JSON-RPC one."""
    ex.close()
    ex.body(401, b'{"error":"invalid_token"}', "application/json")


def test_an_http_status_whose_body_is_no_json_rpc_message_names_no_parse_failure_even_at_debug() -> None:
    command = bridge_command("--log-level", "debug", "--header-env", "Authorization=H10_TOKEN", "")
    with ScriptedServer(refused_token) as server:
        command[-1] = server.url()
        with Bridge(command, env={"H10_TOKEN": "Bearer tok-5be1c0"}) as bridge:
            response = bridge.initialize()
            stderr = finish(bridge)
    assert error_of(response)["data"]["detail"] == "initialize, HTTP status 401"
    [line] = [line for line in bridge_lines(stderr) if "initialize failed" in line]
    assert line.endswith("initialize failed: HTTP status 401 - HttpStatusError: HTTP status 401")
    assert "FrameError" not in stderr and "jsonrpc is not 2.0" not in stderr
    assert "tok-5be1c0" not in stderr


def test_a_stray_line_on_the_stdout_of_the_server_is_told_without_the_class_of_the_parse_error() -> None:
    upstream = [
        "sh",
        "-c",
        'echo "starting up"; exec "$0" "$@"',
        *fixture_command(),
    ]
    with Bridge(bridge_command(upstream=upstream)) as bridge:
        assert "result" in bridge.initialize()
        stderr = finish(bridge)
    assert (
        f"{PREFIX}upstream: warning: the upstream server wrote a line of 11 bytes that is not valid JSON on "
        "stdout, and the bridge dropped it: the output of a server other than its messages belongs on stderr"
    ) in bridge_lines(stderr)
    assert "Error" not in stderr


#: A 2025-era server on stdio: -32601 for server/discover, a result for initialize, and a
#: result of 5000 characters for each tools/call.
LEGACY_LONG_ANSWERS = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if 'id' not in m:
        continue
    if m['method'] == 'server/discover':
        answer = {'error': {'code': -32601, 'message': 'Method not found'}}
    elif m['method'] == 'initialize':
        answer = {'result': {'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}},
                             'serverInfo': {'name': 'scripted', 'version': '1'}}}
    else:
        answer = {'result': {'content': [{'type': 'text', 'text': 'x' * 5000}]}}
    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], **answer}), flush=True)
"""


def test_an_answer_of_a_2025_era_server_over_the_line_limit_names_the_option_too() -> None:
    upstream = [sys.executable, "-c", LEGACY_LONG_ANSWERS]
    with Bridge(bridge_command("--max-line-bytes", "1000", upstream=upstream)) as bridge:
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "scripted"
        response = call(bridge, "any", {})
        stderr = finish(bridge)
    error = error_of(response)
    assert error["message"] == TOO_LARGE
    assert error["data"]["cause"] == "response_too_large"
    detail = error["data"]["detail"]
    assert detail.startswith("the response is a line of ")
    assert detail.endswith(" bytes, over the limit of 1000 bytes")
    assert f"{PREFIX}bridge: warning: {detail}; to take such answers, raise --max-line-bytes" in stderr


def plain_not_found(ex: Exchange) -> None:
    ex.body(404, b"no such path", "text/plain")


@pytest.mark.parametrize(
    ("handler", "cause"), [(not_found, "not_mcp_endpoint"), (plain_not_found, "invalid_response")]
)
def test_with_protocol_2026_07_28_only_a_web_page_or_501_is_not_an_mcp_endpoint(
    handler: Any, cause: str
) -> None:
    # No fallback follows: a 404 without a web page may be a server of the 2025 era.
    with ScriptedServer(handler) as server:
        with Bridge(bridge_command("--protocol", "2026-07-28", server.url())) as bridge:
            response = bridge.initialize()
            finish(bridge)
        assert [request.rpc_method for request in server.wait_requests(1)] == ["server/discover"]
    assert error_of(response)["data"]["cause"] == cause
