"""The real ``@modelcontextprotocol/server-everything`` behind the bridge, over stdio and HTTP.

server-everything (2026.8.31, the 2025-era TypeScript SDK) sends messages outside any
request: while it handles ``notifications/initialized`` it registers tools (a tool list
change), then asks the client for its roots (``roots/list``) and logs what it got; a resource
subscription is acknowledged with a log message, ``toggle-subscriber-updates`` sends
``notifications/resources/updated`` at once, and ``gzip-file-as-resource`` adds a
resource (a resource list change). Through the bridge, each of them
must reach the client (VS Code's side), over the server's stdio and over its
Streamable HTTP transport (whose GET stream carries them). The progress of
``trigger-long-running-operation`` shares the stream of its call: each step, the
last one included, must reach the client before the result.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from everything_server import everything_entry, serve_everything

from conftest import NodePeers
from tests.harness import WAIT, Bridge, bridge_command

pytestmark = [pytest.mark.interop]

ROOTS = [{"uri": "file:///home/dev/project", "name": "project"}]
SUBSCRIBED = "demo://resource/static/document/architecture.md"
HELLO = "data:text/plain;base64,aGVsbG8="
LONG_RUNNING = {
    "name": "trigger-long-running-operation",
    "arguments": {"duration": 0.2, "steps": 4},
    "_meta": {"progressToken": "long"},
}


@pytest.fixture(scope="module")
def everything_url(node: NodePeers) -> Iterator[str]:
    with serve_everything(node) as url:
        yield url


class Client:
    """The client side of the bridge: answers ``roots/list`` and records every frame."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.frames: list[dict[str, Any]] = []

    def until(self, predicate: Any, timeout: float = WAIT * 2) -> dict[str, Any]:
        for frame in self.frames:
            if predicate(frame):
                return frame
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"not seen; frames: {[f.get('method', f.get('id')) for f in self.frames]}"
            frame = self.bridge.next_frame(remaining)
            self.frames.append(frame)
            if frame.get("method") == "roots/list" and "id" in frame:
                self.bridge.send({"jsonrpc": "2.0", "id": frame["id"], "result": {"roots": ROOTS}})
            if predicate(frame):
                return frame

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = self.bridge.request_async(method, params)
        return self.until(lambda f: f.get("id") == request_id and "method" not in f)


def _notification(method: str, contains: str = "") -> Any:
    def match(frame: dict[str, Any]) -> bool:
        return frame.get("method") == method and "id" not in frame and contains in str(frame.get("params"))

    return match


def _run(command: list[str]) -> None:
    with Bridge(command) as bridge:
        client = Client(bridge)
        answer = bridge.initialize()
        assert answer["result"]["serverInfo"]["name"] == "mcp-servers/everything"
        # The lists, as VS Code fetches them. The changes of the tools that the server registers
        # while it handles notifications/initialized, before, are dropped (test_everything_lists.py).
        client.request("tools/list")
        client.request("resources/list")
        # After initialized: the server's roots/list, and a log line of the roots it got.
        client.until(lambda f: f.get("method") == "roots/list" and "id" in f)
        client.until(_notification("notifications/message", "Roots updated: 1 root(s)"))
        roots = client.request("tools/call", {"name": "get-roots-list", "arguments": {}})
        assert "Current MCP Roots (1 total)" in roots["result"]["content"][0]["text"]
        # A subscription: its log message, then the update.
        assert client.request("resources/subscribe", {"uri": SUBSCRIBED})["result"] == {}
        client.until(_notification("notifications/message", "Received Subscribe Resource request"))
        toggled = client.request("tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
        assert "Started simulated resource updated" in toggled["result"]["content"][0]["text"]
        updated = client.until(_notification("notifications/resources/updated"))
        assert updated["params"]["uri"] == SUBSCRIBED
        client.request("tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
        # Progress and the result share a stream: each step comes before the result, the last too.
        client.request("tools/call", LONG_RUNNING)
        steps = [f["params"]["progress"] for f in client.frames if _notification("notifications/progress")(f)]
        assert steps == [1, 2, 3, 4]
        # A resource of the session: the server's resource list changes.
        gzipped = client.request(
            "tools/call",
            {"name": "gzip-file-as-resource", "arguments": {"name": "hello.gz", "data": HELLO}},
        )
        assert gzipped["result"]["content"][0]["type"] == "resource_link"
        client.until(_notification("notifications/resources/list_changed"))
        bridge.close_stdin()
        assert bridge.wait_exit(WAIT * 2) == 0


def test_messages_outside_requests_reach_the_client_over_stdio(node: NodePeers) -> None:
    _run(bridge_command(upstream=[str(node.node22), str(everything_entry(node)), "stdio"]))


def test_messages_outside_requests_reach_the_client_over_streamable_http(everything_url: str) -> None:
    _run(bridge_command(everything_url))


def test_server_everything_on_stdio_starts_behind_the_bridge_with_three_stderr_lines(node: NodePeers) -> None:
    with Bridge(bridge_command(upstream=[str(node.node22), str(everything_entry(node)), "stdio"])) as bridge:
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "mcp-servers/everything"
        bridge.close_stdin()
        assert bridge.wait_exit(WAIT * 2) == 0
    prefix = "mcp-bridge-vscode: "
    assert bridge.stderr_lines == [
        f"{prefix}vscode: info: version 0.1.0; pid {bridge.proc.pid}; "
        f"upstream: the command {node.node22.name} over stdio; "
        "era: found at the first initialize (--protocol auto, the default); log level: info (the default; "
        "--log-level sets it); host profile: picked at the first initialize (--host-profile auto, the "
        "default)\n",
        # server-everything's own line, unchanged: it gets VS Code's initialize first.
        "Starting default (STDIO) server...\n",
        f"{prefix}bridge: info: the upstream server speaks MCP 2025-11-25, the client's revision: "
        "the bridge passes it through; --protocol 2026-07-28 translates instead\n",
    ]
