"""``check`` with ``--allow-tool`` and ``--deny-tool``: it counts the tools as the bridge lists
them and VS Code shows them, and names each pattern that matches no tool."""

from __future__ import annotations

import sys

from test_check import assert_matches_no_tool, block, check_json, run_check, tool_count

from conftest import REPO_ROOT
from harness import Bridge, bridge_command, fixture_command
from mcpbridge.bridge.front.listrules import app_only

#: A server with MCP Apps (the Python SDK's ``mcp.server.apps``): the app *dashboard*
#: (``show_dashboard`` and its app-only tools ``refresh_dashboard`` and ``export_dashboard``),
#: the app *chart* (``show_chart``, app-only ``zoom_chart``) and the plain tool ``echo``.
APPS_PEER = [sys.executable, str(REPO_ROOT / "tests" / "peers" / "py_apps_server.py")]
APP_ONLY = ["refresh_dashboard", "export_dashboard", "zoom_chart"]


def listed_by_the_bridge(*options: str) -> list[dict[str, object]]:
    """The tools that the bridge lists to a VS Code client under ``options``."""
    with Bridge(bridge_command(*options, upstream=APPS_PEER)) as bridge:
        assert "result" in bridge.initialize()
        response = bridge.request("tools/list", {})
        tools: list[dict[str, object]] = response["result"]["tools"]
        bridge.close_stdin()
        bridge.wait_exit()
    return tools


def test_check_counts_the_app_only_tools_that_the_bridge_keeps_apart_from_what_the_model_sees() -> None:
    options = ("--allow-tool", "show_dashboard")
    code, report = check_json(*options, "--call-tool", "refresh_dashboard", "--", *APPS_PEER)
    assert code == 0 and report["problems"] == []
    assert report["appOnlyTools"] == APP_ONLY
    tool_filter = report["toolFilter"]
    assert (tool_filter["before"], tool_filter["after"]) == (3, 1)
    assert (tool_filter["appOnlyBefore"], tool_filter["appOnlyAfter"]) == (3, 2)
    # The bridge forwards the call of an app-only tool of a kept app: the check calls it too.
    [call] = [step for step in report["steps"] if step["step"] == "tools/call"]
    assert call["status"] == "ok" and call["outcome"] == "refresh_dashboard: a result (dashboard refreshed)"

    # The same count as the tools that the real bridge lists under the same filter.
    listed = listed_by_the_bridge(*options)
    kept = ["export_dashboard", "refresh_dashboard", "show_dashboard"]
    assert sorted(str(tool["name"]) for tool in listed) == kept
    assert sum(1 for tool in listed if app_only(tool)) == tool_filter["appOnlyAfter"]
    assert sum(1 for tool in listed if not app_only(tool)) == tool_filter["after"]

    code, out, _err = run_check(*options, "--", *APPS_PEER, env={"COLUMNS": "200"})
    assert code == 0
    lines = out.splitlines()
    assert (
        "Filter:     VS Code sees 1 of 3 tools (--allow-tool, --deny-tool); 2 more are for apps only: "
        "the bridge keeps them for the views of the apps it keeps"
    ) in lines
    assert block(lines, "Tools:", 1) == [
        "Tools:      6 (3 for apps only): show_dashboard, refresh_dashboard, export_dashboard, show_chart, "
        "zoom_chart, echo"
    ]


def test_a_deny_pattern_hides_an_app_only_tool_of_a_kept_app_in_the_count_and_for_the_call() -> None:
    options = ("--allow-tool", "show_*", "--deny-tool", "export_*", "--deny-tool", "show_chart")
    code, report = check_json(*options, "--call-tool", "export_dashboard", "--", *APPS_PEER)
    assert code == 0 and report["problems"] == []
    tool_filter = report["toolFilter"]
    assert (tool_filter["before"], tool_filter["after"], tool_filter["appOnlyAfter"]) == (3, 1, 1)
    [call] = [step for step in report["steps"] if step["step"] == "tools/call"]
    assert call["status"] == "skipped"
    assert call["outcome"] == "export_dashboard: the tool filter hides it from VS Code"


def test_a_deny_pattern_that_matches_no_tool_is_a_problem_with_the_pattern_that_would_match() -> None:
    # "ask-*" was meant for the tools ask_form, ask_url...: it hides nothing, silently in VS Code.
    options = ("--deny-tool", "ask-*", "--deny-tool", "zzz*", "--deny-tool", "echo")
    code, out, _err = run_check(*options, "--", *fixture_command(), env={"COLUMNS": "200"})
    assert code == 1
    lines = out.splitlines()
    assert_matches_no_tool(lines, "--deny-tool", "ask-*", "hides nothing", ("ask_*", "ask_form"))
    assert block(lines, "  - --deny-tool 'zzz*'", 2)[1] == (
        "    fix: Give a pattern that matches the name of the tool to hide (the Tools line lists them)."
    )
    assert not any("'echo'" in line for line in lines)  # a pattern that hides a tool is no problem
    assert not any(line.startswith("  warning:") for line in lines)  # each said once, as a problem
    assert lines[-1] == "Result:     the server answers, but the check found 2 problems (see Problems)"
    count = tool_count(lines)
    assert f"Filter:     VS Code sees {count - 1} of {count} tools (--allow-tool, --deny-tool)" in lines
