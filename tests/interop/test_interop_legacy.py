"""The TypeScript SDK client in front of the bridge, in front of a 2025-era server (``mcp==1.30.0``).

``tests/interop/legacy_upstream_client.mjs`` spawns ``python -m mcpbridge`` with the peer
``tests/peers/py_legacy_server.py`` as its upstream, over stdio and over Streamable HTTP,
answers the server's requests as VS Code does and prints what it saw.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import REPO_ROOT, NodePeers
from harness import run_node_client
from peers.legacy import legacy_command, running_legacy_http_server

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SCRIPT = REPO_ROOT / "tests" / "interop" / "legacy_upstream_client.mjs"

STEPS: list[dict[str, Any]] = [
    {"id": "add", "kind": "call", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"id": "ask_name", "kind": "call", "name": "ask_name"},
    {"id": "roots", "kind": "call", "name": "roots"},
    {"id": "toggle", "kind": "call", "name": "toggle", "arguments": {"enabled": True}},
    {"id": "wait_tools", "kind": "wait", "method": "notifications/tools/list_changed"},
    {"id": "progress", "kind": "call", "name": "progress", "arguments": {"count": 3}, "progress": True},
    {"id": "slow", "kind": "cancel", "name": "slow", "arguments": {"seconds": 60}},
    {"id": "cancelled", "kind": "call", "name": "cancelled", "arguments": {"at_least": 1}},
    {"id": "log", "kind": "call", "name": "log", "arguments": {"text": "from the peer"}},
    {"id": "wait_log", "kind": "wait", "method": "notifications/message"},
]


def run(node: NodePeers, bridge_args: list[str]) -> dict[str, Any]:
    plan = {
        "command": sys.executable,
        "args": ["-m", "mcpbridge", *bridge_args],
        "cwd": str(REPO_ROOT),
        "timeoutMs": 20000,
        "exitMs": 5000,
        "steps": STEPS,
    }
    return run_node_client(node, SCRIPT, plan)


@pytest.fixture(scope="module", params=["stdio", "http"])
def summary(request: pytest.FixtureRequest, node: NodePeers) -> Iterator[dict[str, Any]]:
    if request.param == "stdio":
        yield run(node, ["--", *legacy_command()])
    else:
        with running_legacy_http_server() as url:
            yield run(node, [url])


def step(summary: dict[str, Any], step_id: str) -> dict[str, Any]:
    record: dict[str, Any] = summary["steps"][step_id]
    assert "error" not in record, f"{step_id}: {record['error']}"
    return record


def test_the_sdk_client_sees_the_2025_era_server_itself(summary: dict[str, Any]) -> None:
    assert summary["protocolVersion"] == "2025-11-25"
    info = summary["serverInfo"]
    assert (info["name"], info["version"]) == ("py-legacy-peer", "1.30.0")
    assert summary["instructions"] == "A 2025-era peer server written with the MCP Python SDK 1.30.0."
    assert {"add", "ask_name", "toggle", "progress", "slow", "cancelled"} <= set(summary["tools"])
    assert step(summary, "add")["text"] == "5"


def test_the_requests_of_the_server_are_answered_by_the_sdk_client(summary: dict[str, Any]) -> None:
    assert step(summary, "ask_name")["text"] == "Hello, Ada."
    assert step(summary, "roots")["text"] == "roots: file:///workspace"
    methods = [r["method"] for r in summary["requests"]]
    assert methods == ["elicitation/create", "roots/list"]
    assert summary["requests"][0]["params"]["message"] == "Your name?"


def test_a_tool_list_change_and_log_messages_reach_the_sdk_client(summary: dict[str, Any]) -> None:
    assert step(summary, "toggle")["text"] == "toggled: enabled"
    assert step(summary, "wait_tools")["seen"] is True
    assert step(summary, "log")["text"].startswith("logged")
    assert step(summary, "wait_log")["seen"] is True
    logs = [n["params"] for n in summary["notifications"] if n["method"] == "notifications/message"]
    assert any(entry["data"] == "from the peer" for entry in logs)


def test_progress_reaches_the_sdk_client(summary: dict[str, Any]) -> None:
    record = step(summary, "progress")
    assert record["text"] == "sent 3 progress notifications"
    frames = [p for p in summary["progressFrames"] if p.get("total") == 3]
    assert [p["progress"] for p in frames] == [1, 2, 3]
    assert [p["message"] for p in frames] == [f"Step {i} of 3" for i in (1, 2, 3)]
    assert len(record["progress"]) <= 3


def test_a_cancellation_of_the_sdk_client_reaches_the_server(summary: dict[str, Any]) -> None:
    assert "error" in summary["steps"]["slow"]
    assert step(summary, "cancelled")["text"] == "1"


def test_the_bridge_exits_0_at_the_end_of_stdin(summary: dict[str, Any]) -> None:
    assert summary["exit"] == {"code": 0, "signal": None}
