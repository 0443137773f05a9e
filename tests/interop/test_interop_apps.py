"""MCP Apps under a tool filter: the Python SDK client (``mcp==2.3.0``) directly and through the bridge.

The server is ``tests/peers/py_apps_server.py`` (the SDK's ``mcp.server.apps``): the app
*dashboard* (entry tool ``show_dashboard``, app-only tools ``refresh_dashboard`` and
``export_dashboard`` of its view), the app *chart* (``show_chart``, app-only ``zoom_chart``)
and the plain tool ``echo``. With ``--allow-tool show_dashboard``, the client through the
bridge must see the dashboard and the app-only tools its view calls, with the same answers as
directly (whether the bridge speaks 2026-07-28 to the server or passes the 2025 era
through), and nothing of the chart or ``echo``; a deny pattern still hides an app-only tool.
A view that is in no ``resources/list`` reads through the bridge as directly.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from conftest import REPO_ROOT, WAIT

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PEER = REPO_ROOT / "tests" / "peers" / "py_apps_server.py"
#: The time limit of one whole exercise with the SDK.
EXERCISE_LIMIT = 6 * WAIT
CALLS = ["show_dashboard", "refresh_dashboard", "export_dashboard", "show_chart", "zoom_chart"]
#: Views that the server lists, and one that it lists nowhere (read through its template).
VIEWS = ["ui://dashboard/view.html", "ui://dashboard/help.html"]


def parameters(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=list(args), env=dict(os.environ), cwd=REPO_ROOT)


def exercise(params: StdioServerParameters, mode: str) -> dict[str, Any]:
    """The tools (name -> ``_meta``), the answer of each call in :data:`CALLS` (its text, or the
    error message), the listed resources and the contents of each view in :data:`VIEWS`."""
    seen: dict[str, Any] = {"calls": {}, "views": {}}

    async def run() -> None:
        with anyio.fail_after(EXERCISE_LIMIT):
            async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
                seen["tools"] = {tool.name: tool.meta for tool in (await client.list_tools()).tools}
                for name in CALLS:
                    try:
                        result = await client.call_tool(name, {})
                    except MCPError as exc:
                        seen["calls"][name] = f"error {exc.error.code}: {exc.error.message}"
                        continue
                    text = [block.text for block in result.content if isinstance(block, types.TextContent)]
                    seen["calls"][name] = "\n".join(text)
                seen["resources"] = sorted(str(r.uri) for r in (await client.list_resources()).resources)
                for uri in VIEWS:
                    contents = (await client.read_resource(uri)).contents
                    seen["views"][uri] = [c.model_dump(by_alias=True, exclude_none=True) for c in contents]

    anyio.run(run)
    return seen


@pytest.fixture(scope="module")
def direct() -> dict[str, Any]:
    return exercise(parameters(str(PEER)), "auto")


def bridged(*options: str) -> dict[str, Any]:
    return exercise(parameters("-m", "mcpbridge", *options, "--", sys.executable, str(PEER)), "legacy")


def test_directly_every_tool_answers(direct: dict[str, Any]) -> None:
    assert set(direct["tools"]) == {*CALLS, "echo"}
    assert direct["tools"]["refresh_dashboard"]["ui"] == {
        "resourceUri": "ui://dashboard/view.html",
        "visibility": ["app"],
    }
    assert direct["calls"]["refresh_dashboard"] == "dashboard refreshed"
    assert "ui://dashboard/help.html" not in direct["resources"]


@pytest.mark.parametrize("era", [[], ["--protocol", "legacy"]], ids=["2026-07-28", "2025-era"])
def test_an_allowed_app_keeps_the_app_only_tools_of_its_view(direct: dict[str, Any], era: list[str]) -> None:
    seen = bridged(*era, "--allow-tool", "show_dashboard")
    kept = ["show_dashboard", "refresh_dashboard", "export_dashboard"]
    assert seen["tools"] == {name: direct["tools"][name] for name in kept}
    for name in kept:
        assert seen["calls"][name] == direct["calls"][name]
    # Another app, its app-only tool and a plain tool stay hidden: their calls never reach the server.
    assert seen["calls"]["show_chart"] == "error -32602: Unknown tool: show_chart"
    assert seen["calls"]["zoom_chart"] == "error -32602: Unknown tool: zoom_chart"


def test_a_deny_pattern_hides_an_app_only_tool_of_an_allowed_app(direct: dict[str, Any]) -> None:
    seen = bridged("--allow-tool", "show_dashboard", "--deny-tool", "export_*")
    assert set(seen["tools"]) == {"show_dashboard", "refresh_dashboard"}
    assert seen["calls"]["refresh_dashboard"] == direct["calls"]["refresh_dashboard"]
    assert seen["calls"]["export_dashboard"] == "error -32602: Unknown tool: export_dashboard"


def test_the_views_read_through_the_bridge_as_directly_also_one_in_no_list(direct: dict[str, Any]) -> None:
    seen = bridged("--allow-tool", "show_dashboard")
    assert seen["resources"] == direct["resources"]
    assert seen["views"] == direct["views"]
    assert seen["views"]["ui://dashboard/help.html"][0]["mimeType"] == "text/html;profile=mcp-app"
