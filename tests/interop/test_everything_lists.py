"""A list change of a list that the client has not asked for yet does not reach it.

The real ``@modelcontextprotocol/server-everything`` (the 2025-era TypeScript SDK) registers
tools while it handles ``notifications/initialized``: five ``notifications/tools/list_changed``,
then a ``roots/list`` request, in this order on its GET stream over Streamable HTTP (which
the bridge opens before it sends that notification) and on its stdout over stdio. A client
that has not asked for the tools yet learns nothing from them (it fetches the list right
after ``initialize``), and directly over HTTP it never gets them: the bridge drops them. A
client that asked for the list before gets each change.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from everything_server import everything_entry, serve_everything

from conftest import NodePeers
from tests.harness import WAIT, Bridge, bridge_command

pytestmark = [pytest.mark.interop]

TOOLS_CHANGED = "notifications/tools/list_changed"
ROOTS = [{"uri": "file:///home/dev/project", "name": "project"}]
DROP_LINE = "dropped a notifications/tools/list_changed: the client has not asked for that list yet"


@pytest.fixture(scope="module")
def everything_url(node: NodePeers) -> Iterator[str]:
    with serve_everything(node) as url:
        yield url


@pytest.fixture(params=["http", "stdio"])
def command(request: pytest.FixtureRequest, node: NodePeers) -> list[str]:
    """The bridge in front of server-everything, over each transport, with its debug lines."""
    if request.param == "http":
        return bridge_command("--log-level", "debug", request.getfixturevalue("everything_url"))
    return bridge_command(
        "--log-level", "debug", upstream=[str(node.node22), str(everything_entry(node)), "stdio"]
    )


def answer_roots(bridge: Bridge) -> dict[str, Any]:
    """Wait for the server's ``roots/list`` (it follows its tool list changes) and answer it."""
    ask = bridge.wait_frame(lambda frame: frame.get("method") == "roots/list" and "id" in frame, WAIT * 2)
    bridge.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": ROOTS}})
    return ask


def test_the_tool_list_changes_of_the_start_do_not_reach_a_client_that_has_not_asked_for_the_tools(
    command: list[str],
) -> None:
    with Bridge(command) as bridge:
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "mcp-servers/everything"
        answer_roots(bridge)
        # The changes came before roots/list: the bridge has dropped them, with a debug line.
        assert not [frame for frame in bridge.seen if frame.get("method") == TOOLS_CHANGED]
        bridge.wait_stderr(DROP_LINE)
        # The list that the client fetches has the tools that the server registered.
        tools = bridge.request("tools/list")["result"]["tools"]
        assert "get-roots-list" in [tool["name"] for tool in tools]
        bridge.close_stdin()
        assert bridge.wait_exit(WAIT * 2) == 0
    assert not [frame for frame in bridge.seen + bridge.drain() if frame.get("method") == TOOLS_CHANGED]


def test_a_client_that_asked_for_the_tools_gets_each_change_of_them(command: list[str]) -> None:
    with Bridge(command) as bridge:
        assert "result" in bridge.initialize(initialized=False)
        tools = bridge.request("tools/list")["result"]["tools"]
        assert "get-roots-list" not in [tool["name"] for tool in tools]
        # Now the server registers the tools for the client's capabilities.
        bridge.notify("notifications/initialized")
        ask = answer_roots(bridge)
        before_roots = bridge.seen[: bridge.seen.index(ask)]
        assert [frame for frame in before_roots if frame.get("method") == TOOLS_CHANGED]
        assert DROP_LINE not in bridge.stderr_text
