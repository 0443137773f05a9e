"""An old server on the HTTP+SSE transport of 2024-11-05, directly and through the bridge.

The server is ``tests/peers/py_legacy_server.py --sse``: FastMCP of ``mcp==1.30.0`` with the
app of ``run("sse")`` (its stream is ``/sse``). Directly, the SSE client of that SDK
(``tests/interop/sse_py_client.py``) lists its tools and calls one. Through the bridge's URL
form, the TypeScript SDK client on stdio (``tests/interop/legacy_upstream_client.mjs``) must
see the same tools and the same result, and the server's requests, notifications, progress and
a cancellation must pass: the bridge's ``POST`` of ``initialize`` gets 405, and the bridge
falls back to the HTTP+SSE transport. ``check`` names the transport it found.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import REPO_ROOT, NodePeers
from harness import Bridge, bridge_command, run_client_script, run_node_client
from peers.legacy import legacy_python, running_legacy_sse_server

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SCRIPT = REPO_ROOT / "tests" / "interop" / "legacy_upstream_client.mjs"
DIRECT_CLIENT = REPO_ROOT / "tests" / "interop" / "sse_py_client.py"
RUN_TIMEOUT = 150.0

STEPS: list[dict[str, Any]] = [
    {"id": "add", "kind": "call", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"id": "ask_name", "kind": "call", "name": "ask_name"},
    {"id": "toggle", "kind": "call", "name": "toggle", "arguments": {"enabled": True}},
    {"id": "wait_tools", "kind": "wait", "method": "notifications/tools/list_changed"},
    {"id": "progress", "kind": "call", "name": "progress", "arguments": {"count": 3}, "progress": True},
    {"id": "slow", "kind": "cancel", "name": "slow", "arguments": {"seconds": 60}},
    {"id": "cancelled", "kind": "call", "name": "cancelled", "arguments": {"at_least": 1}},
]


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    with running_legacy_sse_server() as url:
        yield url


def direct(url: str) -> dict[str, Any]:
    plan = {"url": url, "tool": "add", "arguments": {"a": 2, "b": 3}}
    _, summary = run_client_script([legacy_python(), str(DIRECT_CLIENT)], plan, RUN_TIMEOUT)
    assert summary["ok"] is True, summary.get("error")
    return summary


def through_bridge(node: NodePeers, bridge_args: list[str]) -> dict[str, Any]:
    plan = {
        "command": sys.executable,
        "args": ["-m", "mcpbridge", *bridge_args],
        "cwd": str(REPO_ROOT),
        "timeoutMs": 20000,
        "exitMs": 5000,
        "steps": STEPS,
    }
    return run_node_client(node, SCRIPT, plan)


def step(summary: dict[str, Any], step_id: str) -> dict[str, Any]:
    record: dict[str, Any] = summary["steps"][step_id]
    assert "error" not in record, f"{step_id}: {record['error']}"
    return record


@pytest.fixture(scope="module", params=["auto", "sse"])
def runs(request: pytest.FixtureRequest, node: NodePeers) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """On a new server each: what the direct client saw, then what the TypeScript SDK client saw
    through the bridge, with the default transport or with --transport sse."""
    options = [] if request.param == "auto" else ["--transport", "sse"]
    with running_legacy_sse_server() as url:
        seen = direct(url)
        yield seen, through_bridge(node, [*options, url])


@pytest.fixture
def bridged(runs: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    return runs[1]


def test_the_sdk_client_of_the_old_transport_reaches_the_server_directly(
    runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    summary = runs[0]
    assert summary["serverInfo"]["name"] == "py-legacy-peer"
    assert {"add", "ask_name", "toggle"} <= set(summary["tools"])
    assert (summary["text"], summary["isError"]) == ("5", False)


def test_through_the_bridge_the_client_sees_what_the_direct_client_sees(
    runs: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    seen, bridged = runs
    info = bridged["serverInfo"]
    assert (info["name"], info["version"]) == (seen["serverInfo"]["name"], seen["serverInfo"]["version"])
    assert bridged["protocolVersion"] == seen["protocolVersion"]
    assert bridged["tools"] == seen["tools"]
    assert step(bridged, "add")["text"] == seen["text"]


def test_the_requests_notifications_and_progress_of_the_server_pass(bridged: dict[str, Any]) -> None:
    assert step(bridged, "ask_name")["text"] == "Hello, Ada."
    assert [r["method"] for r in bridged["requests"]] == ["elicitation/create"]
    assert step(bridged, "toggle")["text"] == "toggled: enabled"
    assert step(bridged, "wait_tools")["seen"] is True
    assert step(bridged, "progress")["text"] == "sent 3 progress notifications"
    frames = [p for p in bridged["progressFrames"] if p.get("total") == 3]
    assert [p["progress"] for p in frames] == [1, 2, 3]


def test_a_cancellation_through_the_bridge_reaches_the_server(bridged: dict[str, Any]) -> None:
    assert "error" in bridged["steps"]["slow"]
    assert int(step(bridged, "cancelled")["text"]) >= 1


def test_the_bridge_exits_0_at_the_end_of_stdin(bridged: dict[str, Any]) -> None:
    assert bridged["exit"] == {"code": 0, "signal": None}


@pytest.mark.parametrize("options", [[], ["--transport", "sse"]])
def test_check_names_the_transport_it_found(sse_url: str, options: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mcpbridge", "check", "--json", *options, sse_url],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, report["problems"]
    assert report["upstream"]["transport"] == "sse"
    assert report["era"] == "2025-11-25"
    # With --transport sse, the bridge asks no server/discover of 2026-07-28: the transport is older.
    discover = next(s for s in report["steps"] if s["step"] == "server/discover")
    assert discover["status"] == ("skipped" if options else "ok")
    text = subprocess.run(
        [sys.executable, "-m", "mcpbridge", "check", *options, sse_url],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    out = text.stdout.decode()
    assert "over HTTP+SSE (2024-11-05)" in out and out.splitlines()[-1] == "Result:     the server works"
    assert "not an MCP endpoint" not in out


def test_check_of_an_http_sse_server_under_forced_streamable_http_names_the_older_transport(
    sse_url: str,
) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mcpbridge", "check", "--transport", "streamable-http", sse_url],
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    out = completed.stdout.decode()
    assert completed.returncode == 1
    assert "not an MCP endpoint" not in out
    lines = out.splitlines()
    [index] = [n for n, line in enumerate(lines) if "refused the POST of Streamable HTTP" in line]
    assert lines[index] == (
        "  - the URL refused the POST of Streamable HTTP (HTTP status 405): it is not a Streamable HTTP "
        "endpoint, and may be one of the older HTTP+SSE transport (2024-11-05)"
    )
    assert lines[index + 1].startswith("    fix: Remove --transport streamable-http: with --transport auto")


def test_the_end_of_the_servers_stream_ends_the_bridge_as_the_loss_of_the_upstream() -> None:
    """The session of an HTTP+SSE server lives as long as its stream: when the server stops, a
    call in flight fails with the end of the stream, and the bridge exits with 1, as after the
    loss of an upstream command."""
    with contextlib.ExitStack() as server:
        url = server.enter_context(running_legacy_sse_server())
        with Bridge(bridge_command(url)) as bridge:
            assert bridge.initialize()["result"]["serverInfo"]["name"] == "py-legacy-peer"
            slow = bridge.request_async(
                "tools/call", {"name": "slow", "arguments": {"seconds": 60}, "_meta": {"progressToken": 1}}
            )
            bridge.wait_frame(lambda f: f.get("method") == "notifications/progress")  # the call runs
            server.close()  # the server stops: its stream ends
            answer = bridge.wait_response(slow)
            data = answer["error"]["data"]
            assert (data["cause"], data["detail"]) == (
                "transport_failed",
                "the event stream of the upstream server ended",
            ), answer
            assert bridge.wait_exit() == 1
            # Said as the end of a session at a URL, not as the exit of a process.
            stderr = bridge.stderr_text
            assert "the upstream server ended the session of the bridge (its event stream closed)" in stderr
            assert "exited with" not in stderr
