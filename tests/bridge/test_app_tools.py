"""The tool filter and the tools of MCP Apps: an allowed app keeps the app-only tools of its view."""

from __future__ import annotations

from typing import Any

import pytest

from mcpbridge.bridge.front.listrules import ListRules
from mcpbridge.bridge.rules.lists import ToolFilter, app_only, app_view

DASHBOARD = "ui://dashboard/view.html"
CHART = "ui://chart/view.html"


def tool(name: str, view: str | None = None, visibility: list[str] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}}
    if view is not None:
        ui: dict[str, Any] = {"resourceUri": view}
        if visibility is not None:
            ui["visibility"] = visibility
        entry["_meta"] = {"ui": ui}
    return entry


TOOLS = [
    tool("refresh_dashboard", DASHBOARD, ["app"]),  # before its entry tool on the same page
    tool("show_dashboard", DASHBOARD),
    tool("export_dashboard", DASHBOARD, ["app"]),
    tool("shared_dashboard", DASHBOARD, ["model", "app"]),
    tool("show_chart", CHART),
    tool("zoom_chart", CHART, ["app"]),
    tool("echo"),
]


def names(rules: ListRules, tools: list[dict[str, Any]], params: Any = None) -> list[str]:
    page = rules.page("tools/list", params or {}, {"tools": tools}, cache=False)
    return [entry["name"] for entry in page["tools"]]


def test_an_allowed_app_keeps_its_app_only_tools_in_the_list_and_for_calls() -> None:
    rules = ListRules(ToolFilter(allow=("show_dashboard",)))
    assert names(rules, TOOLS) == ["refresh_dashboard", "show_dashboard", "export_dashboard"]
    assert rules.refuse_call({"name": "refresh_dashboard"}) is None
    # A tool that the model may call too is the user's choice: the allow-list hides it.
    for hidden in ("shared_dashboard", "show_chart", "zoom_chart", "echo"):
        assert rules.refuse_call({"name": hidden}) == {"code": -32602, "message": f"Unknown tool: {hidden}"}


def test_a_deny_pattern_hides_an_app_only_tool_of_an_allowed_app() -> None:
    rules = ListRules(ToolFilter(allow=("show_*",), deny=("export_*", "show_chart")))
    assert names(rules, TOOLS) == ["refresh_dashboard", "show_dashboard"]
    assert rules.refuse_call({"name": "export_dashboard"}) is not None
    assert rules.refuse_call({"name": "zoom_chart"}) is not None
    assert rules.refuse_call({"name": "refresh_dashboard"}) is None


def test_an_app_only_tool_is_refused_before_the_list_tells_its_app() -> None:
    rules = ListRules(ToolFilter(allow=("show_dashboard",)))
    assert rules.refuse_call({"name": "refresh_dashboard"}) is not None


def test_an_app_only_tool_on_an_earlier_page_than_its_app_shows_from_the_next_listing() -> None:
    rules = ListRules(ToolFilter(allow=("show_dashboard",)))
    first, second = TOOLS[:1], TOOLS[1:3]
    assert names(rules, first) == []
    assert names(rules, second, {"cursor": "2"}) == ["show_dashboard", "export_dashboard"]
    assert names(rules, first) == ["refresh_dashboard"]
    assert rules.refuse_call({"name": "refresh_dashboard"}) is None


def test_the_deprecated_flat_key_names_a_view_too() -> None:
    flat = [
        {"name": "show", "_meta": {"ui/resourceUri": DASHBOARD}},
        {"name": "helper", "_meta": {"ui/resourceUri": DASHBOARD, "ui": {"visibility": ["app"]}}},
    ]
    rules = ListRules(ToolFilter(allow=("show",)))
    assert names(rules, flat) == ["show", "helper"]


@pytest.mark.parametrize(
    ("meta", "view", "only"),
    [
        ({"ui": {"resourceUri": DASHBOARD, "visibility": ["app"]}}, DASHBOARD, True),
        ({"ui": {"resourceUri": DASHBOARD}}, DASHBOARD, False),
        ({"ui": {"resourceUri": DASHBOARD, "visibility": ["app", "model"]}}, DASHBOARD, False),
        ({"ui": {"resourceUri": 5, "visibility": "app"}}, None, False),
        ({"ui": []}, None, False),
        (None, None, False),
    ],
)
def test_the_view_and_the_visibility_of_a_tool_are_read_defensively(meta: Any, view: Any, only: bool) -> None:
    entry = {"name": "t", "_meta": meta}
    assert (app_view(entry), app_only(entry)) == (view, only)
