"""What the server wrote against what the client got, directly and through the bridge, on record.

The real ``@modelcontextprotocol/server-everything`` (2026.8.31, the 2025-era TypeScript
SDK) runs over Streamable HTTP. The TypeScript SDK client
(``tests/interop/everything_client.mjs``) carries out the same steps twice: directly to
the server, then through the bridge (``mcp-bridge-vscode <url>``, spawned over stdio). Both
reach the server through a recording proxy (``tests/peers/recording_proxy.py``), which
keeps every SSE event as the server wrote it, so each notification that the client got
can be set against what the server wrote to its session.

The server writes its notifications outside any request on the GET stream of the session:
the log messages (the roots it got, the acknowledgement of a subscription), the resource
update and the resource list change; the progress of ``trigger-long-running-operation``
goes on the stream of its call. Both paths get each of them, each as often. Some of them
follow timers of the server (its ``roots/list`` 350 ms after ``notifications/initialized``,
a resource update every 5 s until the tool is toggled off, none after the session ended):
the steps wait for each notification and toggle the updates off at once, so that the server
writes the same to both sessions whatever the time each run takes.

One difference is the server's, and the bridge keeps it: while it handles
``notifications/initialized``, the server registers the tools of the client's capabilities
and writes a ``notifications/tools/list_changed`` for each, in the same turn of its event
loop as its answer (202) to that notification. The bridge opens its GET stream before it
sends the notification (a server drops what it sends while none is open, requests too),
so the server writes them to the bridge's session; the SDK client opens its stream only
once it has that answer, so the server writes them to no stream of a direct session (over
stdio the same client gets each of them directly too). They come to the bridge after the
client's ``tools/list`` went to the server, so the bridge passes them on: it drops only a
change of a list that the client has not asked for yet.

The notifications are counted as the client's transport delivered them. The SDK's own
progress callback may miss the last step over stdio, directly to a stdio server as much as
through the bridge: it runs a notification a tick late, and a response that comes in the
same read of the pipe removes the callback first.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from everything_server import serve_everything

from conftest import REPO_ROOT, NodePeers
from harness import run_node_client
from peers.recording_proxy import Exchange, RecordingProxy

pytestmark = [pytest.mark.interop]

SCRIPT = REPO_ROOT / "tests" / "interop" / "everything_client.mjs"
TOOLS_CHANGED = "notifications/tools/list_changed"
#: What the server writes to a session in the steps of the script, but the tool list changes.
EXPECTED = Counter(
    {
        "notifications/message": 2,
        "notifications/resources/updated": 1,
        "notifications/resources/list_changed": 1,
        "notifications/progress": 4,
    }
)
#: The kind of the bridge's drops of list changes, in its line of their count.
DROP_KIND = "dropped list changes of lists that the client has not asked for"
#: The tools that server-everything registers for the client's roots and elicitation.
CONDITIONAL_TOOLS = 3


@pytest.fixture(scope="module")
def server_url(node: NodePeers) -> Iterator[str]:
    """server-everything over Streamable HTTP on a port of its own choice."""
    with serve_everything(node) as url:
        yield url


class Recorded:
    """One run of the client's steps: what it got and what the server wrote to its session."""

    def __init__(self, summary: dict[str, Any], exchanges: list[Exchange]) -> None:
        self.summary = summary
        self.exchanges = exchanges

    def written(self) -> list[dict[str, Any]]:
        """The notifications that the server wrote to the session, in the order of their exchanges."""
        return [
            message
            for exchange in self.exchanges
            for message in exchange.messages()
            if isinstance(message, dict) and "method" in message and "id" not in message
        ]

    def written_requests(self) -> list[str]:
        return [
            message["method"]
            for exchange in self.exchanges
            for message in exchange.messages()
            if isinstance(message, dict) and "method" in message and "id" in message
        ]

    def delivered(self) -> list[dict[str, Any]]:
        delivered: list[dict[str, Any]] = self.summary["delivered"]
        return delivered

    def dropped(self) -> Counter[str]:
        """The list changes that the bridge dropped on purpose (the client had not asked for the
        list yet), from its debug lines: one line for the first, then counts."""
        if "stderr" not in self.summary:
            return Counter()
        assert self.summary["stderrEnded"] is True, "the bridge's stderr did not end"
        dropped: Counter[str] = Counter()
        for line in self.summary["stderr"].splitlines():
            first = re.search(r"dropped a (\S+): the client has not asked for that list yet", line)
            if first is not None:
                more = re.search(r"\(and (\d+) more of these", line)
                dropped[first.group(1)] += 1 + (int(more.group(1)) if more else 0)
            counted = re.search(f"{DROP_KIND} since the last such line: (\\d+) more", line)
            if counted is not None:
                # The kind of drop names no method: server-everything changes only its tools here.
                dropped[TOOLS_CHANGED] += int(counted.group(1))
        return dropped


def _run(node: NodePeers, url: str, *, bridge: bool) -> Recorded:
    with RecordingProxy(url) as proxy:
        plan: dict[str, Any] = {"url": proxy.url, "timeoutMs": 20000, "waitMs": 20000, "exitMs": 10000}
        if bridge:
            args = ["-m", "mcpbridge", "--log-level", "debug", proxy.url]
            plan["bridge"] = {"command": sys.executable, "args": args, "cwd": str(REPO_ROOT)}
        summary = run_node_client(node, SCRIPT, plan)
    sessions = proxy.sessions()
    assert len(sessions) == 1, f"the client started {len(sessions)} sessions"
    exchanges = proxy.session_exchanges(sessions[0])
    assert all(exchange.done for exchange in exchanges), "an exchange was still open at the end"
    return Recorded(summary, exchanges)


@pytest.fixture(scope="module")
def paths(node: NodePeers, server_url: str) -> dict[str, Recorded]:
    return {"direct": _run(node, server_url, bridge=False), "bridge": _run(node, server_url, bridge=True)}


def _kinds(messages: list[dict[str, Any]]) -> Counter[str]:
    return Counter(message["method"] for message in messages)


def _texts(messages: list[dict[str, Any]], method: str) -> list[str]:
    """The log texts (without the session id) or the parameters of ``method``, in order."""
    found = []
    for message in messages:
        if message["method"] != method:
            continue
        params = message.get("params") or {}
        if method == "notifications/message":
            found.append(str(params.get("data")).split(" from session")[0].strip())
        elif method == "notifications/progress":
            found.append(f"{params.get('progress')}/{params.get('total')}")
        else:
            found.append(str(params.get("uri", "")))
    return found


@pytest.mark.parametrize("path", ["direct", "bridge"])
def test_each_step_saw_its_notification(paths: dict[str, Recorded], path: str) -> None:
    summary = paths[path].summary
    assert summary["waits"] == {"roots": True, "subscribed": True, "updated": True, "resources_changed": True}
    assert summary["requests"] == ["roots/list"]
    assert summary["exit"] == {"code": 0, "signal": None}


def test_the_server_writes_the_same_to_both_sessions_but_the_tool_changes_of_its_start(
    paths: dict[str, Recorded],
) -> None:
    direct, bridge = paths["direct"], paths["bridge"]
    assert direct.written_requests() == bridge.written_requests() == ["roots/list"]
    assert _kinds(direct.written()) == EXPECTED
    # The bridge's GET stream was open while the server handled notifications/initialized.
    assert _kinds(bridge.written()) == EXPECTED + Counter({TOOLS_CHANGED: CONDITIONAL_TOOLS})


@pytest.mark.parametrize("path", ["direct", "bridge"])
def test_the_client_gets_each_notification_that_the_server_wrote_to_it(
    paths: dict[str, Recorded], path: str
) -> None:
    """Each one, but the list changes that the bridge drops on purpose."""
    recorded = paths[path]
    written, delivered = recorded.written(), recorded.delivered()
    assert _kinds(delivered) == _kinds(written) - recorded.dropped()
    for method in EXPECTED:
        assert _texts(delivered, method) == _texts(written, method), method


def test_through_the_bridge_the_client_gets_what_it_gets_directly(paths: dict[str, Recorded]) -> None:
    direct, bridge = paths["direct"], paths["bridge"]
    assert not direct.dropped()
    assert set(bridge.dropped()) <= {TOOLS_CHANGED}
    delivered = bridge.delivered()
    other = [message for message in delivered if message["method"] != TOOLS_CHANGED]
    assert _kinds(other) == _kinds(direct.delivered()) == EXPECTED
    for method in EXPECTED:
        assert _texts(other, method) == _texts(direct.delivered(), method), method
    assert _texts(other, "notifications/progress") == ["1/4", "2/4", "3/4", "4/4"]
    # The tool list changes of the server's start: the direct client gets none (the server
    # wrote none to it); through the bridge, each that the bridge did not drop on purpose.
    changes = len(delivered) - len(other)
    assert changes + bridge.dropped()[TOOLS_CHANGED] == CONDITIONAL_TOOLS
