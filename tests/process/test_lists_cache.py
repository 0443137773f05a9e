"""The list cache through the real executable: ``ttlMs`` of 2026-07-28 list results.

The upstreams count the requests that reach them: the project's fixture server
(``--count-requests``, pages with ``--page-size``, ``--ttl-ms``) and a server of the
Python SDK ``mcp==2.3.0`` with cache hints (``tests/peers/py_modern_lists_server.py``).
A ttl of ten minutes is far longer than any test, so no test depends on the clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from harness import ROOT, Bridge, bridge_command, fixture_command, text_of
from peers.legacy import legacy_command
from schema import validate_legacy_frame

LISTS_PEER = ROOT / "tests" / "peers" / "py_modern_lists_server.py"
LONG_TTL = "600000"
TOOLS_CHANGED = "notifications/tools/list_changed"


def started(*options: str, upstream: list[str]) -> Bridge:
    """A bridge after initialize, once its listen stream is open (its debug line tells)."""
    bridge = Bridge(bridge_command("--log-level", "debug", *options, upstream=upstream))
    assert "result" in bridge.initialize()
    bridge.wait_stderr("the listen stream is open")
    return bridge


def fixture_bridge(*fixture_options: str) -> Bridge:
    return started(upstream=fixture_command("--count-requests", *fixture_options))


def counts_of(bridge: Bridge) -> dict[str, int]:
    response = bridge.request("tools/call", {"name": "requests", "arguments": {}})
    counts: dict[str, int] = response["result"]["structuredContent"]
    return counts


def list_result(bridge: Bridge, method: str = "tools/list", cursor: str | None = None) -> dict[str, Any]:
    response = bridge.request(method, {} if cursor is None else {"cursor": cursor})
    validate_legacy_frame(response)
    result: dict[str, Any] = response["result"]
    assert "ttlMs" not in result and "cacheScope" not in result
    return result


def debug_lines(bridge: Bridge, word: str) -> list[str]:
    """The debug lines of the bridge with ``word``, after its end."""
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    return [line for line in bridge.stderr_lines if ": debug: " in line and word in line]


def test_two_lists_within_the_ttl_reach_the_server_once() -> None:
    with fixture_bridge("--ttl-ms", LONG_TTL) as bridge:
        first = list_result(bridge)
        second = list_result(bridge)
        assert second == first
        assert counts_of(bridge)["tools/list"] == 1
        for method in ("prompts/list", "resources/list", "resources/templates/list"):
            assert list_result(bridge, method) == list_result(bridge, method)
        counts = counts_of(bridge)
        for method in ("prompts/list", "resources/list", "resources/templates/list"):
            assert counts[method] == 1, method
        lines = debug_lines(bridge, "list cache")
    assert len([line for line in lines if "list cache miss: tools/list (first page)" in line]) == 1
    assert len([line for line in lines if "list cache hit: tools/list (first page)" in line]) == 1


def test_a_list_change_drops_the_cached_list() -> None:
    with fixture_bridge("--ttl-ms", LONG_TTL) as bridge:
        before = list_result(bridge)
        assert "toggled" in [tool["name"] for tool in before["tools"]]
        list_result(bridge, "prompts/list")
        call = bridge.request_async(
            "tools/call", {"name": "toggle", "arguments": {"enabled": False, "target": "tool"}}
        )
        bridge.wait_frame(lambda f: f.get("method") == TOOLS_CHANGED)
        bridge.wait_response(call)
        after = list_result(bridge)
        assert "toggled" not in [tool["name"] for tool in after["tools"]]
        assert list_result(bridge) == after
        list_result(bridge, "prompts/list")
        counts = counts_of(bridge)
        assert counts["tools/list"] == 2
        # the change of the tools keeps the prompts
        assert counts["prompts/list"] == 1


def test_a_new_listen_stream_after_a_loss_drops_the_cached_lists() -> None:
    with fixture_bridge("--ttl-ms", LONG_TTL) as bridge:
        first = list_result(bridge)
        bridge.request("tools/call", {"name": "end_listen", "arguments": {}})
        bridge.wait_stderr("the listen stream is open again")
        bridge.wait_frame(lambda f: f.get("method") == TOOLS_CHANGED)
        assert list_result(bridge) == first
        assert counts_of(bridge)["tools/list"] == 2
        lines = debug_lines(bridge, "list cache dropped")
    assert [line for line in lines if "a gap of the listen stream" in line]


def test_a_result_with_ttl_0_is_never_cached() -> None:
    with fixture_bridge() as bridge:  # the fixture's ttlMs is 0
        for _ in range(3):
            list_result(bridge)
        assert counts_of(bridge)["tools/list"] == 3
        lines = debug_lines(bridge, "list cache")
    assert not [line for line in lines if "list cache hit" in line]


def test_a_cursor_page_is_cached_apart_from_the_first_page() -> None:
    with fixture_bridge("--ttl-ms", LONG_TTL, "--many-tools", "12", "--page-size", "10") as bridge:
        first = list_result(bridge)
        cursor = first["nextCursor"]
        second = list_result(bridge, cursor=cursor)
        assert {tool["name"] for tool in second["tools"]}.isdisjoint(tool["name"] for tool in first["tools"])
        assert list_result(bridge, cursor=cursor) == second
        assert list_result(bridge) == first
        counts = counts_of(bridge)
        assert counts["tools/list"] == 1
        assert counts[f"tools/list {cursor}"] == 1
        lines = debug_lines(bridge, "list cache")
    assert len([line for line in lines if "list cache hit: tools/list (a later page)" in line]) == 1


def test_filters_apply_to_cached_pages() -> None:
    upstream = fixture_command("--count-requests", "--ttl-ms", LONG_TTL)
    with started("--deny-tool", "toggle*", upstream=upstream) as bridge:
        names = [tool["name"] for tool in list_result(bridge)["tools"]]
        assert list_result(bridge) == list_result(bridge)
        assert "toggle" not in names and "toggled" not in names and "echo" in names
        assert counts_of(bridge)["tools/list"] == 1


def peer_counts(bridge: Bridge) -> dict[str, int]:
    counts: dict[str, int] = json.loads(text_of(bridge.request("tools/call", {"name": "requests"})))
    return counts


#: The peer speaks both eras: the cache is of the translation, which this option makes the bridge use.
TRANSLATE = ("--protocol", "2026-07-28")


def test_the_cache_with_a_server_of_the_python_sdk() -> None:
    with started(*TRANSLATE, upstream=[sys.executable, str(LISTS_PEER), "--ttl-ms", LONG_TTL]) as bridge:
        first = list_result(bridge)
        assert list_result(bridge) == first
        assert peer_counts(bridge)["tools/list"] == 1
        call = bridge.request_async("tools/call", {"name": "toggle", "arguments": {"enabled": True}})
        bridge.wait_frame(lambda f: f.get("method") == TOOLS_CHANGED)
        bridge.wait_response(call)
        after = list_result(bridge)
        assert "toggled" in [tool["name"] for tool in after["tools"]]
        assert list_result(bridge) == after
        assert peer_counts(bridge)["tools/list"] == 2


def test_the_python_sdk_server_without_a_ttl_is_asked_each_time() -> None:
    with started(*TRANSLATE, upstream=[sys.executable, str(LISTS_PEER)]) as bridge:
        list_result(bridge)
        list_result(bridge)
        assert peer_counts(bridge)["tools/list"] == 2


@pytest.mark.interop
def test_nothing_is_cached_for_a_2025_era_server() -> None:
    with Bridge(bridge_command("--log-level", "debug", upstream=legacy_command())) as bridge:
        assert bridge.initialize()["result"]["protocolVersion"] == "2025-11-25"
        assert list_result(bridge) == list_result(bridge)
        lines = debug_lines(bridge, "list cache")
    assert lines == []


def check_report(*arguments: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "mcpbridge", "check", "--json", "--", *arguments],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60.0,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    report: dict[str, Any] = json.loads(completed.stdout)
    return report


@pytest.mark.parametrize(("ttl", "expected"), [(LONG_TTL, int(LONG_TTL)), ("0", 0)])
def test_check_reports_how_long_the_bridge_keeps_each_list(ttl: str, expected: int) -> None:
    report = check_report(*fixture_command("--ttl-ms", ttl))
    assert report["listTtlMs"] == {
        "tools": expected,
        "prompts": expected,
        "resources": expected,
        "resourceTemplates": expected,
    }


@pytest.mark.interop
def test_check_of_a_2025_era_server_reports_no_list_cache() -> None:
    assert check_report(*legacy_command())["listTtlMs"] is None
