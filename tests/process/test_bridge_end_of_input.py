"""A file of requests piped into the real bridge: every request is answered before it stops.

``mcp-bridge-vscode -- server < requests.jsonl`` reads the whole file at once and
meets the end of its input while ``initialize`` still runs. The requests after it
wait for its answer, and the end of the input lets what was asked before it finish
(within the grace) before the bridge stops the server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT
from harness import ROOT, bridge_command, fixture_command
from mcpbridge.mcp.protocol import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, MODERN
from peers.legacy import legacy_command
from schema import validate_legacy_frame

MODERN_PEER = [sys.executable, str(ROOT / "tests" / "peers" / "py_modern_stdio_server.py")]


def requests_file(tmp_path: Path, call: dict[str, Any]) -> Path:
    """initialize, initialized, tools/list and ``call``, as a client writes them."""
    frames = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "pipe", "version": "1.0.0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
    ]
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(frame) + "\n" for frame in frames), encoding="utf-8")
    return path


def run_piped(command: list[str], path: Path) -> tuple[int, dict[Any, dict[str, Any]]]:
    """Run ``command < path``; its exit code and its responses by id."""
    with path.open("rb") as stdin:
        done = subprocess.run(command, stdin=stdin, capture_output=True, cwd=ROOT, timeout=3 * WAIT)
    responses: dict[Any, dict[str, Any]] = {}
    for line in done.stdout.splitlines():
        frame = json.loads(line)
        if "method" not in frame:
            responses[frame["id"]] = frame
    return done.returncode, responses


def call_text(response: dict[str, Any]) -> str:
    assert "result" in response, response
    return str(response["result"]["content"][0]["text"])


ECHO = {"name": "echo", "arguments": {"text": "piped"}}


def modern_file(tmp_path: Path, call: dict[str, Any]) -> Path:
    """The same requests as a client of 2026-07-28 writes them to the server alone."""
    meta = {
        META_PROTOCOL_VERSION: MODERN,
        META_CLIENT_INFO: {"name": "pipe", "version": "1.0.0"},
        META_CLIENT_CAPABILITIES: {},
    }
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {**call, "_meta": meta}},
    ]
    path = tmp_path / "modern.jsonl"
    path.write_text("".join(json.dumps(frame) + "\n" for frame in frames), encoding="utf-8")
    return path


def test_a_piped_file_gets_every_answer_that_the_server_alone_gives(tmp_path: Path) -> None:
    _, direct = run_piped(fixture_command(), modern_file(tmp_path, ECHO))
    code, bridged = run_piped(bridge_command(upstream=fixture_command()), requests_file(tmp_path, ECHO))
    assert sorted(direct) == [1, 2, 3] and all("result" in response for response in direct.values())
    assert sorted(bridged) == sorted(direct), bridged
    assert all("result" in response for response in bridged.values()), bridged
    for response in bridged.values():
        validate_legacy_frame(response)
    assert call_text(bridged[3]) == call_text(direct[3]) == "piped"
    names = {tool["name"] for tool in bridged[2]["result"]["tools"]}
    assert names == {tool["name"] for tool in direct[2]["result"]["tools"]}
    assert code == 0


def legacy_peer() -> list[str]:
    return legacy_command()


@pytest.mark.parametrize(
    "upstream",
    [fixture_command, lambda: MODERN_PEER, legacy_peer],
    ids=["fixture", "python-sdk-2026", "python-sdk-2025"],
)
def test_a_piped_file_gets_every_answer_through_the_bridge(
    tmp_path: Path, upstream: Callable[[], list[str]]
) -> None:
    """The SDK servers alone drop the call in flight at the end of their input; the bridge
    holds their input open until it has the answer."""
    code, responses = run_piped(bridge_command(upstream=upstream()), requests_file(tmp_path, ECHO))
    assert sorted(responses) == [1, 2, 3], responses
    assert responses[1]["result"]["protocolVersion"] == "2025-11-25"
    assert "echo" in {tool["name"] for tool in responses[2]["result"]["tools"]}
    assert call_text(responses[3]) == "piped"
    assert code == 0


def test_a_call_in_flight_at_the_end_of_input_is_answered(tmp_path: Path) -> None:
    path = requests_file(tmp_path, {"name": "slow", "arguments": {"ms": 300}})
    code, responses = run_piped(bridge_command(upstream=fixture_command()), path)
    assert call_text(responses[3]) == "slept 300 ms"
    assert code == 0


def test_a_call_longer_than_the_grace_gets_input_ended(tmp_path: Path) -> None:
    path = requests_file(tmp_path, {"name": "slow", "arguments": {"ms": 600_000}})
    code, responses = run_piped(bridge_command(upstream=fixture_command()), path)
    assert "result" in responses[1] and "result" in responses[2]
    error = responses[3]["error"]
    assert error["code"] == -32603 and error["data"] == {"cause": "input_ended"}
    assert code == 0
