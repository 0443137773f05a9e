"""The lifecycle of the stdio bridge, on the real executable over real pipes."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from harness import Bridge, bridge_command, fixture_command
from mcpbridge import __version__
from schema import validate_legacy_frame


def test_initialize_answers_2025_11_25_with_the_upstream_capabilities_and_info() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        response = bridge.initialize()
        validate_legacy_frame(response)
        result = response["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["serverInfo"]["name"] == "bridge-fixture-server"
        assert result["serverInfo"]["version"] == "0.0.0"
        assert result["instructions"] == "The upstream server of the mcpbridge tests."
        caps = result["capabilities"]
        assert "tools" in caps and "logging" in caps
        assert "tasks" not in caps
        for member in ("resultType", "ttlMs", "cacheScope", "supportedVersions", "_meta"):
            assert member not in result


def test_before_initialize_ping_and_set_level_are_answered_and_others_refused() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        assert bridge.request("ping")["result"] == {}
        assert bridge.request("logging/setLevel", {"level": "debug"})["result"] == {}
        bridge.notify("notifications/initialized")
        for method in ("tools/list", "tools/call", "resources/subscribe", "no/such/method"):
            error = bridge.request(method, {})["error"]
            assert error["code"] == -32600 and error["data"]["cause"] == "not_initialized"
        error = bridge.request("server/discover", {})["error"]
        assert error["code"] == -32601
        modern = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
        error = bridge.request("tools/list", modern)["error"]
        assert error["code"] == -32601 and error["data"]["cause"] == "method_not_found"


def test_server_discover_gets_method_not_found_in_every_state() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        assert bridge.request("server/discover")["error"]["code"] == -32601
        bridge.initialize()
        assert bridge.request("server/discover")["error"]["code"] == -32601


def test_a_second_initialize_is_refused_and_the_connection_stays() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        error = bridge.initialize(initialized=False)["error"]
        assert error["code"] == -32600 and error["data"]["cause"] == "already_initialized"
        assert "tools" in bridge.request("tools/list")["result"]


def test_concurrent_initializes_start_one_upstream() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        }
        first = bridge.request_async("initialize", params)
        second = bridge.request_async("initialize", params)
        answers = [bridge.wait_response(first, 30), bridge.wait_response(second, 30)]
        assert sum("result" in a for a in answers) == 1
        refused = [a for a in answers if "error" in a][0]
        assert refused["error"]["data"]["cause"] == "already_initialized"


def test_a_spawn_failure_returns_to_awaiting_initialize() -> None:
    with Bridge(bridge_command(upstream=["/nonexistent/mcp-server-command"])) as bridge:
        error = bridge.initialize()["error"]
        assert error["code"] == -32603 and error["data"]["cause"] == "spawn_failed"
        error = bridge.initialize()["error"]
        assert error["data"]["cause"] == "spawn_failed"
        assert bridge.request("ping")["result"] == {}


def test_after_a_spawn_failure_initialize_starts_the_command_once_it_is_in_place(tmp_path: Path) -> None:
    command = tmp_path / "server"
    with Bridge(bridge_command(upstream=[str(command)])) as bridge:
        assert bridge.initialize()["error"]["data"]["cause"] == "spawn_failed"
        command.write_text(f"#!/bin/sh\nexec {shlex.join(fixture_command())}\n", encoding="utf-8")
        command.chmod(0o755)
        again = bridge.initialize()
        assert again.get("result", {}).get("serverInfo", {}).get("name") == "bridge-fixture-server", again
        assert "tools" in bridge.request("tools/list")["result"]


def test_an_upstream_that_exits_at_start_fails_initialize_and_initialize_can_retry() -> None:
    with Bridge(bridge_command(upstream=[sys.executable, "-c", "pass"])) as bridge:
        error = bridge.initialize()["error"]
        assert error["code"] == -32603
        assert error["data"] == {
            "cause": "stopped_at_start",
            "detail": "initialize: the upstream server exited (code 0)",
        }
        assert bridge.initialize()["error"]["data"]["cause"] == "stopped_at_start"


def test_an_upstream_that_never_answers_initialize_times_out_and_meanwhile_the_bridge_answers() -> None:
    silent = [sys.executable, "-c", "import sys\nfor line in sys.stdin: pass"]
    with Bridge(bridge_command("--discover-timeout", "1", upstream=silent)) as bridge:
        init_id = bridge.request_async(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
        held = bridge.request_async("tools/list")
        assert bridge.request("ping")["result"] == {}
        assert bridge.request("logging/setLevel", {"level": "info"})["result"] == {}
        assert bridge.request("server/discover")["error"]["code"] == -32601
        again = bridge.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
        )
        assert again["error"]["code"] == -32600
        error = bridge.wait_response(init_id, 15)["error"]
        assert error["code"] == -32603
        assert error["data"] == {"cause": "timeout", "detail": "initialize, no response in 1 s"}
        error = bridge.wait_response(held)["error"]
        assert error["data"] == {"cause": "not_connected", "detail": "the initialize failed: timeout"}


def test_a_legacy_upstream_answering_method_not_found_keeps_its_code() -> None:
    legacy = [
        sys.executable,
        "-c",
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if 'id' in m:\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'],"
        " 'error': {'code': -32601, 'message': 'Method not found'}}), flush=True)\n",
    ]
    with Bridge(bridge_command("--protocol", "2026-07-28", upstream=legacy)) as bridge:
        error = bridge.initialize()["error"]
        assert error["code"] == -32601
        assert error["data"] == {"cause": "discover_failed", "detail": "Method not found"}


def test_without_server_info_the_name_comes_from_the_option_or_the_command() -> None:
    bare = [
        sys.executable,
        "-c",
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    if m.get('method') == 'initialize':\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': -32022,"
        " 'message': 'Unsupported protocol version', 'data': {'supported': ['2026-07-28']}}}), flush=True)\n"
        "    if m.get('method') == 'server/discover':\n"
        "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'resultType': 'complete',"
        " 'supportedVersions': ['2026-07-28'], 'capabilities': {'tools': {}}, 'ttlMs': 0,"
        " 'cacheScope': 'public'}}), flush=True)\n",
    ]
    with Bridge(bridge_command("--name", "my-server", upstream=bare)) as bridge:
        info = bridge.initialize()["result"]["serverInfo"]
        assert info["name"] == "my-server"
        assert info["version"] == __version__  # the bridge's own, as the upstream gives none
    with Bridge(bridge_command(upstream=bare)) as bridge:
        name = bridge.initialize()["result"]["serverInfo"]["name"]
        assert name == __import__("os").path.basename(sys.executable).rsplit(".", 1)[0]


def test_the_end_of_stdin_before_initialize_exits_0_with_empty_stdout() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert bridge.raw_lines == []
