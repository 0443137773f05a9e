"""A server that speaks both eras is reached in the client's revision, as a direct connection reaches it.

The peers are servers of the official Python SDK 2.x, which answer both ``initialize``
and ``server/discover``: a command (``tests/peers/py_modern_stdio_server.py``) and a URL
(``tests/peers/py_http_server.py``, Streamable HTTP). Their tool ``ask_name_2025`` asks
the client the 2025 way (``ctx.elicit()``, a request in the middle of the call), which
only a connection opened with ``initialize`` carries; their tool ``ask_name`` asks with an
``input_required`` result, which only revision 2026-07-28 carries.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT
from harness import Bridge, bridge_command, fixture_command, run_client_script, text_of
from peers import running_py_http_server
from peers.legacy import legacy_python

DUAL_ERA_PEER = [sys.executable, str(REPO_ROOT / "tests" / "peers" / "py_modern_stdio_server.py")]
#: The client of revision 2025-11-25 of the Python SDK ``mcp==1.30.0``, straight to a URL.
DIRECT_URL_CLIENT = REPO_ROOT / "tests" / "interop" / "elicit_py_client.py"
#: The limit of a run of that client (a hang detector; its own whole run is 60 s).
RUN_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def dual_url() -> Iterator[str]:
    """The URL of a server of both eras (the Python SDK ``mcp==2.3.0`` on Streamable HTTP)."""
    with running_py_http_server() as url:
        yield url


def call_ask_name_2025(client: Bridge, name: str) -> dict[str, Any]:
    """Call ``ask_name_2025``, answer its elicitation with ``name``, and return the response."""
    call = client.request_async("tools/call", {"name": "ask_name_2025", "arguments": {}})
    ask = client.wait_frame(lambda frame: frame.get("method") == "elicitation/create", timeout=30.0)
    assert ask["params"]["message"] == "Your name?"
    client.send(
        {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": name}}}
    )
    return client.wait_response(call, timeout=30.0)


def assert_names_the_back_channel_fix(bridge: Bridge, refused: dict[str, Any]) -> None:
    """The SDK's error of a request in the middle of a call under ``--protocol 2026-07-28`` keeps its
    code and words, and names the cause and the fix, there and in the log line."""
    error = refused["error"]
    assert error["code"] == -32600
    assert error["message"].startswith(
        "Cannot send 'elicitation/create': this transport context has no back-channel for "
        "server-initiated requests. The tool sends a request of MCP 2025-11-25 in the middle of its call"
    )
    assert error["message"].endswith(
        "then remove --protocol 2026-07-28 from the arguments of the server, and the bridge passes it "
        "through."
    )
    bridge.wait_stderr(
        "warning: tools/call: the upstream server answered that it cannot send its request in the middle "
        "of the call (Cannot send 'elicitation/create'"
    )


def assert_passes_through(command: list[str], server_name: str) -> dict[str, Any]:
    """The bridge of ``command`` with the default options: the server named ``server_name`` gets the
    client's revision, 2025-11-25, and the 2025 way of ``ask_name_2025`` works; the response of its call."""
    with Bridge(command) as bridge:
        result = bridge.initialize()["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["serverInfo"]["name"] == server_name
        # The call reaches the client as an elicitation/create, and its answer returns the result.
        response = call_ask_name_2025(bridge, "Ada")
        assert text_of(response) == "Hello, Ada."
        # The era line says which revision the server got, and why.
        bridge.wait_stderr(
            "the upstream server speaks MCP 2025-11-25, the client's revision: the bridge passes it "
            "through; --protocol 2026-07-28 translates instead"
        )
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    assert "server/discover" not in bridge.stderr_text
    return response


def assert_translates(bridge: Bridge, greeting: str) -> None:
    """Under ``--protocol 2026-07-28``: the server gets that revision, an ``input_required`` result
    (which only the translation carries) reaches the client and its answer gets ``greeting`` for the
    name ``Bo``, and the SDK refuses the request of the 2025 era, which has no channel there."""
    assert bridge.initialize()["result"]["protocolVersion"] == "2025-11-25"
    bridge.wait_stderr("the upstream server speaks MCP 2026-07-28")
    call = bridge.request_async("tools/call", {"name": "ask_name", "arguments": {}})
    ask = bridge.wait_frame(lambda frame: frame.get("method") == "elicitation/create", timeout=30.0)
    assert str(ask["id"]).startswith("b-")
    bridge.send(
        {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Bo"}}}
    )
    assert text_of(bridge.wait_response(call, timeout=30.0)) == greeting
    refused = bridge.request("tools/call", {"name": "ask_name_2025", "arguments": {}}, timeout=30.0)
    assert_names_the_back_channel_fix(bridge, refused)


def test_a_tool_that_asks_the_2025_way_works_directly() -> None:
    """The reference: the server driven on its own stdio by a client of revision 2025-11-25."""
    with Bridge(DUAL_ERA_PEER) as direct:
        assert direct.initialize()["result"]["protocolVersion"] == "2025-11-25"
        response = call_ask_name_2025(direct, "Ada")
    assert text_of(response) == "Hello, Ada."


def test_a_tool_that_asks_the_2025_way_works_through_the_bridge_with_the_default_options() -> None:
    assert_passes_through(bridge_command(upstream=DUAL_ERA_PEER), "py-modern-peer")


def test_protocol_2026_07_28_translates_for_a_server_of_both_eras() -> None:
    with Bridge(bridge_command("--protocol", "2026-07-28", upstream=DUAL_ERA_PEER)) as bridge:
        assert_translates(bridge, "Hello, Bo.")


def test_a_server_of_2026_07_28_only_refuses_initialize_and_gets_server_discover_on_the_same_child() -> None:
    with Bridge(bridge_command(upstream=fixture_command("--count-requests"))) as bridge:
        result = bridge.initialize()["result"]
        assert result["serverInfo"]["name"] == "bridge-fixture-server"
        bridge.wait_stderr(
            "the upstream server refused initialize of MCP 2025-11-25, the client's revision "
            "(Unsupported protocol version): it speaks MCP 2026-07-28 only, thus the bridge translates"
        )
        # One child got both: the counts of the process that answers the call hold the initialize.
        counts = bridge.request("tools/call", {"name": "requests", "arguments": {}})["result"]
        assert counts["structuredContent"]["initialize"] == 1
        assert counts["structuredContent"]["server/discover"] == 1
        # The translation: an input_required result of the fixture reaches the client.
        bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        ask = bridge.wait_frame(lambda frame: frame.get("method") == "elicitation/create", timeout=30.0)
        assert str(ask["id"]).startswith("b-")


def test_a_silent_server_fails_initialize_after_one_time_limit(tmp_path: Path) -> None:
    heard = tmp_path / "heard.txt"
    # A server that answers nothing and writes down the method of each line it reads.
    silent = [
        sys.executable,
        "-c",
        "import json, sys\n"
        f"with open({str(heard)!r}, 'a') as out:\n"
        "    for line in sys.stdin:\n"
        "        out.write(json.loads(line).get('method', '') + '\\n'); out.flush()\n",
    ]
    with Bridge(bridge_command("--discover-timeout", "2", upstream=silent)) as bridge:
        response = bridge.initialize()
        assert response["error"]["code"] == -32603
        assert response["error"]["data"] == {"cause": "timeout", "detail": "initialize, no response in 2 s"}
        bridge.wait_stderr("initialize failed: initialize, no response in 2 s")
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    # One time limit: after the silent initialize (and its cancellation) the bridge sent no
    # server/discover to wait for.
    assert heard.read_text(encoding="utf-8").split() == ["initialize", "notifications/cancelled"]
    assert "server/discover" not in bridge.stderr_text


def test_a_tool_of_a_url_that_asks_the_2025_way_works_directly(dual_url: str) -> None:
    """The reference: the server at its URL driven by a client of revision 2025-11-25 of its own."""
    plan = {"url": dual_url, "tool": "ask_name_2025", "name": "Ada"}
    _, summary = run_client_script([legacy_python(), str(DIRECT_URL_CLIENT)], plan, RUN_TIMEOUT)
    assert summary["ok"] is True, summary.get("error")
    assert summary["protocolVersion"] == "2025-11-25"
    assert summary["asked"] == ["Your name?"]
    assert (summary["text"], summary["isError"]) == ("Hello, Ada.", False)


def test_a_tool_of_a_url_that_asks_the_2025_way_works_through_the_bridge_with_the_default_options(
    dual_url: str,
) -> None:
    response = assert_passes_through(bridge_command(dual_url), "py-http-peer")
    assert response["result"].get("isError") is not True


def test_protocol_2026_07_28_translates_for_a_url_of_both_eras(dual_url: str) -> None:
    with Bridge(bridge_command("--protocol", "2026-07-28", dual_url)) as bridge:
        assert_translates(bridge, "hello Bo")
