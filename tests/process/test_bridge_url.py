"""The URL form: the real executable in front of the Python SDK server over Streamable HTTP.

``python -m mcpbridge http://127.0.0.1:<port>/mcp`` is driven over its stdin and stdout as
VS Code drives it, in front of ``mcp==2.3.0`` under uvicorn. That server speaks both eras:
the bridge reaches it in the client's revision by default (tests/process/test_bridge_dual_era.py),
so these tests give ``--protocol 2026-07-28`` (:data:`TRANSLATED`) to drive the translation.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness import WAIT, Bridge, bridge_command, text_of
from tests.peers import running_py_http_server
from tests.peers.scripted_http import Exchange, ScriptedServer, default_script

SECRET = "marker-7f3a9c-secret"
SECRET_VARIABLE = "MCPBRIDGE_TEST_API_KEY"
QUERY_SECRET = "tenant-q-55d1"
#: The option that makes the bridge translate for the server of both eras.
TRANSLATED = ("--protocol", "2026-07-28")


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with running_py_http_server() as url:
        yield url


def secret_bridge(url: str, *options: str) -> Bridge:
    command = bridge_command("--header-env", f"X-Api-Key={SECRET_VARIABLE}", *options, url)
    return Bridge(command, env={SECRET_VARIABLE: SECRET})


def every_frame(bridge: Bridge) -> str:
    return b"".join(bridge.raw_lines).decode("utf-8", "replace")


def test_initialize_list_and_call_through_the_url_form(sdk_url):
    with Bridge(bridge_command(*TRANSLATED, sdk_url)) as bridge:
        init = bridge.initialize()
        result = init["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["serverInfo"]["name"] == "py-http-peer"
        listing = bridge.request("tools/list")
        names = [tool["name"] for tool in listing["result"]["tools"]]
        assert {"echo", "steps", "located"} <= set(names)
        assert (
            text_of(bridge.request("tools/call", {"name": "echo", "arguments": {"text": "héllo"}})) == "héllo"
        )
        routed = bridge.request(
            "tools/call", {"name": "located", "arguments": {"region": "eu wést", "count": 2}}
        )
        assert text_of(routed) == "eu wést|2|False"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0


def test_a_remote_server_keeps_only_its_data_icons(sdk_url):
    with Bridge(bridge_command(*TRANSLATED, sdk_url)) as bridge:
        init = bridge.initialize()
        icons = init["result"]["serverInfo"].get("icons", [])
        assert [icon["src"][:5] for icon in icons] == ["data:"]
        tools = {tool["name"]: tool for tool in bridge.request("tools/list")["result"]["tools"]}
        assert [icon["src"][:5] for icon in tools["echo"]["icons"]] == ["data:"]


def test_progress_of_an_sse_answer_reaches_the_client_before_the_result(sdk_url):
    with Bridge(bridge_command(*TRANSLATED, sdk_url)) as bridge:
        bridge.initialize()
        params: dict[str, Any] = {
            "name": "steps",
            "arguments": {"count": 3},
            "_meta": {"progressToken": "tok"},
        }
        response = bridge.request("tools/call", params)
        assert text_of(response) == "done 3"
        progress = [f for f in bridge.seen if f.get("method") == "notifications/progress"]
        assert [f["params"]["progress"] for f in progress] == [1, 2, 3]
        assert all(f["params"]["progressToken"] == "tok" for f in progress)
        assert bridge.seen.index(progress[-1]) < bridge.seen.index(response)


def test_log_messages_of_a_call_reach_the_client_at_its_level(sdk_url):
    with Bridge(bridge_command(*TRANSLATED, sdk_url)) as bridge:
        bridge.initialize(initialized=False)
        assert bridge.request("logging/setLevel", {"level": "info"})["result"] == {}
        response = bridge.request("tools/call", {"name": "steps", "arguments": {"count": 2}})
        assert text_of(response) == "done 2"
        logs = [f["params"] for f in bridge.seen if f.get("method") == "notifications/message"]
        assert logs == [{"level": "info", "data": "log 1"}, {"level": "info", "data": "log 2"}]


def test_a_tool_list_change_on_the_listen_stream_reaches_the_client(sdk_url):
    with Bridge(bridge_command(*TRANSLATED, "--log-level", "debug", sdk_url)) as bridge:
        bridge.initialize()
        assert "result" in bridge.request("tools/list")  # a change of a list not asked for is dropped
        bridge.wait_stderr("the listen stream is open")
        # The first stream is no gap: no list change before the server changes a list.
        assert bridge.request("ping")["result"] == {}
        assert not [f for f in bridge.seen if f.get("method", "").endswith("/list_changed")]
        seen = len(bridge.seen)
        bridge.request("tools/call", {"name": "change_tools", "arguments": {}})

        def changes() -> list[dict[str, Any]]:
            return [f for f in bridge.seen[seen:] if f.get("method") == "notifications/tools/list_changed"]

        # Over HTTP the event and the result of the call travel on different streams.
        if not changes():
            bridge.wait_frame(lambda f: f.get("method") == "notifications/tools/list_changed")
        assert changes() and all("params" not in f for f in changes())


def test_the_secret_of_header_env_never_reaches_stderr_or_an_error(sdk_url):
    url = f"{sdk_url}?tenant={QUERY_SECRET}"
    with secret_bridge(url, *TRANSLATED, "--log-level", "debug") as bridge:
        bridge.initialize()
        bridge.request("tools/list")
        bridge.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        missing = bridge.request("tools/call", {"name": "no_such_tool", "arguments": {}})
        # The SDK's server answers an unknown tool with a tool result that is an error.
        assert missing["result"]["isError"] is True
        assert text_of(missing) == "Unknown tool: no_such_tool"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        for text in (bridge.stderr_text, every_frame(bridge)):
            assert SECRET not in text
            assert QUERY_SECRET not in text


def test_an_unreachable_url_fails_initialize_without_the_url_or_the_secret_and_exits_0():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp/{QUERY_SECRET}"
    with secret_bridge(url, "--log-level", "debug", "--discover-timeout", "5") as bridge:
        response = bridge.initialize()
        error = response["error"]
        assert error["code"] == -32603
        assert error["data"]["cause"] == "connection_refused"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        for text in (bridge.stderr_text, every_frame(bridge)):
            assert SECRET not in text and QUERY_SECRET not in text
            assert "/mcp" not in text
        # The port is named with the host, never beside the path: in the first line, and where
        # nothing listens.
        where = f"nothing listens at the host 127.0.0.1, port {port} (the connection was refused)"
        # The first request of --protocol auto is the client's initialize.
        assert error["data"]["detail"] == f"initialize: {where}"
        first, refused = [line for line in bridge.stderr_lines if str(port) in line]
        assert f"upstream: Streamable HTTP (http) to the host 127.0.0.1, port {port};" in first
        assert f"bridge: error: initialize failed: {where}" in refused


def test_an_unusable_ca_file_exits_2_naming_the_option(tmp_path, sdk_url):
    missing = tmp_path / "missing-ca.pem"
    with Bridge(bridge_command("--ca-file", str(missing), sdk_url)) as bridge:
        assert bridge.wait_exit(WAIT) == 2
        bridge.close_stdin()
        lines = bridge.stderr_lines
    expected = "cannot use the CA certificates of --ca-file: the file does not exist"
    # The first line, with the version, then the error and where the usage is, as for other usage errors.
    assert len(lines) == 3 and f"info: version 0.1.0; pid {bridge.proc.pid}; upstream: " in lines[0]
    assert lines[1] == f"mcp-bridge-vscode: vscode: error: {expected}\n"
    assert lines[2] == 'mcp-bridge-vscode: vscode: error: see "mcp-bridge-vscode --help"\n'


def test_32_concurrent_calls_through_the_bridge_reuse_the_pooled_connections():
    together = threading.Barrier(32)

    def handler(ex: Exchange) -> None:
        if ex.request.rpc_method == "tools/call":
            together.wait(WAIT)  # each answer waits until 32 calls are in flight
        default_script(ex)

    with ScriptedServer(handler) as server, Bridge(bridge_command(server.url())) as bridge:
        assert "result" in bridge.initialize()
        for _wave in range(3):
            ids = [bridge.request_async("tools/call", {"name": "ok", "arguments": {}}) for _ in range(32)]
            assert all(text_of(bridge.wait_response(i)) == "ok" for i in ids)
        # 32 pooled for the calls, and the one of the initialize of 2025-11-25 that the server
        # refused, whose transport closed with its pool.
        assert server.connections == 33
        bridge.close_stdin()
        assert bridge.wait_exit() == 0


#: The modules of a sign-in, of the answer to a 401 and of a refresh: a server that never asks
#: for a sign-in never loads them (``secrets`` loads with the stores).
SIGN_IN_MODULES = frozenset(
    "mcpbridge.oauth." + name
    for name in (
        "steps", "flow", "urls", "challenge", "context", "metadata", "clients", "tokenrequests",
        "tokens", "interactive", "attempt", "receiver", "device", "grants", "discovery", "web",
    )
)  # fmt: skip
#: The modules of the stored sign-in, which the first request looks up: none loads before it.
STORE_MODULES = frozenset(
    "mcpbridge.oauth." + name
    for name in ("stored", "records", "store", "tokenstore", "filestore", "keychain")
)


def imported(bridge: Bridge) -> set[str]:
    """The modules that the bridge, started with ``python -X importtime``, reported on stderr."""
    loaded = {
        line.rsplit("|", 1)[-1].strip() for line in bridge.stderr_lines if line.startswith("import time:")
    }
    assert "mcpbridge.oauth.authorizer" in loaded, (
        "no import lines of the sign-in on stderr: the test sees nothing"
    )
    return loaded


def test_a_server_that_needs_no_sign_in_is_served_without_loading_the_sign_in(sdk_url):
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "mcpbridge",
        "--token-store",
        "memory",
        *TRANSLATED,
        sdk_url,
    ]
    with Bridge(command) as bridge:
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "py-http-peer"
        assert {"echo", "steps"} <= {tool["name"] for tool in bridge.request("tools/list")["result"]["tools"]}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        loaded = imported(bridge)
    # The first request looked up the stored sign-in: there is none, and no 401 came.
    assert STORE_MODULES <= loaded
    assert not loaded & SIGN_IN_MODULES


def test_the_bridge_answers_ping_before_it_loads_the_http_client_or_the_token_store():
    # A URL without a static authorization header: the sign-in is on, with the keychain only.
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "mcpbridge",
        "--token-store",
        "keychain",
        "http://127.0.0.1:9/mcp",
    ]
    with Bridge(command) as bridge:
        assert bridge.request("ping")["result"] == {}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        loaded = {line.rsplit("|", 1)[-1].strip() for line in bridge.stderr_lines if "|" in line}
    assert "mcpbridge.bridge.front.frontend" in loaded
    # typer parses the command line; what it loads only for help or completion stays out.
    assert not loaded & {"requests", "urllib3", "keyring", "cryptography", "ssl", "pydantic", "rich"}
    # The gate of the sign-in is there for the client's consent; the rest waits for a request.
    assert {"mcpbridge.oauth.authorizer", "mcpbridge.oauth.signin"} <= loaded
    assert not loaded & (SIGN_IN_MODULES | STORE_MODULES | {"hashlib", "secrets"})
    # The text of a thread dump waits for a dump.
    assert "mcpbridge.bridge.front.dumptext" not in loaded
