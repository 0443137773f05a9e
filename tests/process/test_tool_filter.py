"""``--allow-tool`` and ``--deny-tool`` through the real executable, for both eras and both forms.

The upstreams: the project's fixture server (pages, a request counter), a server of the
Python SDK ``mcp==2.3.0`` (``tests/peers/py_modern_lists_server.py``, a request counter in a
middleware), the SDK's server over Streamable HTTP, and the 2025-era server of ``mcp==1.30.0``
over stdio and HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from harness import ROOT, Bridge, bridge_command, fixture_command, text_of
from mcpbridge.vscode.cli import parse
from mcpbridge.vscode.settings import ArgError, Settings
from peers import running_py_http_server
from peers.legacy import legacy_command, running_legacy_http_server
from schema import validate_legacy_frame

LISTS_PEER = ROOT / "tests" / "peers" / "py_modern_lists_server.py"
PAGE_SIZE = 5
MANY_TOOLS = 12
#: A check starts Python servers; this bounds one run.
CHECK_TIMEOUT = 60.0


def walk_tools(bridge: Bridge) -> list[list[str]]:
    """Every page of tools/list, as the names on each page."""
    pages: list[list[str]] = []
    params: dict[str, Any] = {}
    while True:
        response = bridge.request("tools/list", params)
        validate_legacy_frame(response)
        result = response["result"]
        pages.append([tool["name"] for tool in result["tools"]])
        if "nextCursor" not in result:
            return pages
        assert len(pages) < 100, "the pages do not end"
        params = {"cursor": result["nextCursor"]}


def counts_of(bridge: Bridge) -> dict[str, int]:
    """The requests that reached the fixture server (its tool ``requests``)."""
    response = bridge.request("tools/call", {"name": "requests", "arguments": {}})
    counts: dict[str, int] = response["result"]["structuredContent"]
    return counts


def peer_counts(bridge: Bridge) -> dict[str, int]:
    """The requests that reached the server of the Python SDK (its tool ``requests``)."""
    counts: dict[str, int] = json.loads(text_of(bridge.request("tools/call", {"name": "requests"})))
    return counts


def call_error(bridge: Bridge, name: str) -> dict[str, Any]:
    response = bridge.request("tools/call", {"name": name, "arguments": {}})
    validate_legacy_frame(response)
    assert "error" in response, response
    error: dict[str, Any] = response["error"]
    return error


def warnings_of(bridge: Bridge) -> list[str]:
    """The warning lines of the bridge, after its end."""
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    return [
        line
        for line in bridge.stderr_lines
        if line.startswith("mcp-bridge-vscode: ") and ": warning: " in line
    ]


def fixture_bridge(*options: str, many_tools: int = MANY_TOOLS) -> Bridge:
    upstream = fixture_command(
        "--many-tools", str(many_tools), "--page-size", str(PAGE_SIZE), "--count-requests"
    )
    bridge = Bridge(bridge_command(*options, upstream=upstream))
    assert "result" in bridge.initialize()
    return bridge


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    ("argv", "allow", "deny"),
    [
        (["--", "srv"], (), ()),
        (["--allow-tool", "git_*", "--allow-tool=read_*", "--", "srv"], ("git_*", "read_*"), ()),
        (["--deny-tool", "*rm*", "--allow-tool", "*", "--deny-tool", "x", "--", "s"], ("*",), ("*rm*", "x")),
        (["check", "--allow-tool", "a", "https://a.example/mcp"], ("a",), ()),
    ],
)  # fmt: skip
def test_each_pattern_option_adds_one_pattern(
    argv: list[str], allow: tuple[str, ...], deny: tuple[str, ...]
) -> None:
    result = parse(argv, {})
    assert isinstance(result, Settings)
    assert (result.serving.allow_tools, result.serving.deny_tools) == (allow, deny)


def test_a_separate_pattern_never_starts_with_two_dashes() -> None:
    with pytest.raises(ArgError, match="--deny-tool needs a value"):
        parse(["--deny-tool", "--odd", "https://a.example/mcp"], {})


@pytest.mark.parametrize("argv", [["--allow-tool=", "--", "srv"], ["--deny-tool", "", "--", "srv"]])
def test_an_empty_pattern_is_refused(argv: list[str]) -> None:
    with pytest.raises(ArgError, match="the pattern cannot be empty"):
        parse(argv, {})


def test_logout_takes_no_pattern() -> None:
    with pytest.raises(ArgError, match="--allow-tool cannot be used here"):
        parse(["logout", "--allow-tool", "a", "--all"], {})


# --------------------------------------------------------------------------- the fixture server


def test_filters_apply_to_every_page_and_keep_the_cursors() -> None:
    with fixture_bridge(
        "--allow-tool", "tool_*", "--allow-tool", "requests", "--deny-tool", "tool_1*"
    ) as bridge:
        pages = walk_tools(bridge)
        visible = [name for page in pages for name in page]
        assert sorted(visible) == sorted(["requests", "tool_0", *(f"tool_{i}" for i in range(2, 10))])
        # the server gave every page: the client walked as many pages as the server served
        counts = counts_of(bridge)
        served = sum(n for key, n in counts.items() if key.split(" ")[0] == "tools/list")
        assert served == len(pages) > 2
        # a page comes back shorter (even empty) and the listing still goes on
        assert any(len(page) < PAGE_SIZE for page in pages[:-1])
        assert all(len(page) <= PAGE_SIZE for page in pages)


def test_without_filters_every_tool_is_listed() -> None:
    with fixture_bridge() as bridge:
        visible = [name for page in walk_tools(bridge) for name in page]
        assert {"echo", "requests", "tool_0", "tool_11"} <= set(visible)
        assert len(visible) == len(set(visible))


def test_a_call_of_a_hidden_tool_never_reaches_the_server() -> None:
    with fixture_bridge("--deny-tool", "tool_1", "--deny-tool", "*crash*") as bridge:
        for name in ("tool_1", "crash"):
            assert call_error(bridge, name) == {"code": -32602, "message": f"Unknown tool: {name}"}
        # the server's own answer to an unknown tool has the same code and message
        unknown = call_error(bridge, "no_such_tool")
        assert unknown == {"code": -32602, "message": "Unknown tool: no_such_tool"}
        assert text_of(bridge.request("tools/call", {"name": "tool_2", "arguments": {}})) == "tool_2"
        counts = counts_of(bridge)
        assert "tools/call tool_1" not in counts
        assert "tools/call crash" not in counts
        assert counts["tools/call no_such_tool"] == 1
        assert counts["tools/call tool_2"] == 1
        # a visible tool whose name only starts like a hidden one still works
        assert text_of(bridge.request("tools/call", {"name": "tool_10", "arguments": {}})) == "tool_10"


def test_a_pattern_that_matches_no_tool_gets_one_warn_line() -> None:
    with fixture_bridge("--deny-tool", "tool_*", "--deny-tool", "tol_9", "--allow-tool", "*") as bridge:
        for _ in range(2):
            visible = [name for page in walk_tools(bridge) for name in page]
            assert not [name for name in visible if name.startswith("tool_")]
        warnings = warnings_of(bridge)
    about = [line for line in warnings if "tol_9" in line]
    assert len(about) == 1, warnings
    assert "--deny-tool" in about[0]
    assert not [line for line in warnings if "tool_*" in line]


def test_an_allow_pattern_that_matches_no_tool_gets_a_warn_line() -> None:
    with fixture_bridge("--allow-tool", "ehco", "--allow-tool", "echo", many_tools=0) as bridge:
        assert [name for page in walk_tools(bridge) for name in page] == ["echo"]
        warnings = warnings_of(bridge)
    about = [line for line in warnings if "ehco" in line]
    assert len(about) == 1, warnings
    assert "--allow-tool" in about[0]


# --------------------------------------------------------------------------- the Python SDK


def test_filters_with_a_server_of_the_python_sdk() -> None:
    command = bridge_command(
        "--allow-tool", "git_*", "--allow-tool", "requests", "--deny-tool", "git_push",
        upstream=[sys.executable, str(LISTS_PEER)],
    )  # fmt: skip
    with Bridge(command) as bridge:
        assert "result" in bridge.initialize()
        assert walk_tools(bridge) == [["git_status", "requests"]]
        for name in ("git_push", "delete_repo", "toggle"):
            assert call_error(bridge, name) == {"code": -32602, "message": f"Unknown tool: {name}"}
        assert text_of(bridge.request("tools/call", {"name": "git_status"})) == "git_status"
        counts = peer_counts(bridge)
        assert counts["tools/call git_status"] == 1
        assert not [key for key in counts if key in ("tools/call git_push", "tools/call delete_repo")]


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with running_py_http_server() as url:
        yield url


def test_filters_in_the_url_form(sdk_url: str) -> None:
    # The server speaks both eras: --protocol 2026-07-28 makes the bridge translate for it.
    options = ("--protocol", "2026-07-28", "--deny-tool", "located", "--deny-tool", "nothing_like_this")
    with Bridge(bridge_command(*options, sdk_url)) as bridge:
        assert "result" in bridge.initialize()
        visible = [name for page in walk_tools(bridge) for name in page]
        assert "echo" in visible and "located" not in visible
        assert call_error(bridge, "located") == {"code": -32602, "message": "Unknown tool: located"}
        echo = bridge.request("tools/call", {"name": "echo", "arguments": {"text": "still here"}})
        assert text_of(echo) == "still here"
        warnings = warnings_of(bridge)
    assert len([line for line in warnings if "nothing_like_this" in line]) == 1


# --------------------------------------------------------------------------- a 2025-era server


@pytest.fixture(scope="module")
def legacy_url() -> Iterator[str]:
    with running_legacy_http_server() as url:
        yield url


@pytest.mark.interop
@pytest.mark.parametrize("form", ["stdio", "http"])
def test_filters_with_a_2025_era_server(form: str, request: pytest.FixtureRequest) -> None:
    options = ("--deny-tool", "crash", "--deny-tool", "ask_*", "--deny-tool", "no_such_*")
    if form == "stdio":
        command = bridge_command(*options, upstream=legacy_command())
    else:
        command = bridge_command(*options, request.getfixturevalue("legacy_url"))
    with Bridge(command) as bridge:
        init = bridge.initialize()
        assert init["result"]["protocolVersion"] == "2025-11-25"
        visible = [name for page in walk_tools(bridge) for name in page]
        assert "echo" in visible
        assert "crash" not in visible and "ask_name" not in visible
        # crash would stop the server at once: the next call shows that it never got there
        assert call_error(bridge, "crash") == {"code": -32602, "message": "Unknown tool: crash"}
        assert call_error(bridge, "ask_name") == {"code": -32602, "message": "Unknown tool: ask_name"}
        echo = bridge.request("tools/call", {"name": "echo", "arguments": {"text": "alive"}})
        assert text_of(echo) == "alive"
        warnings = warnings_of(bridge)
    assert len([line for line in warnings if "no_such_*" in line]) == 1
    assert not [line for line in warnings if "'crash'" in line or "ask_*" in line]


# --------------------------------------------------------------------------- check


def run_check(*arguments: str) -> tuple[int, str]:
    completed = subprocess.run(
        [sys.executable, "-m", "mcpbridge", "check", *arguments],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=CHECK_TIMEOUT,
        check=False,
    )
    return completed.returncode, completed.stdout.decode()


def test_check_counts_the_tools_before_and_after_the_filter() -> None:
    upstream = fixture_command("--many-tools", str(MANY_TOOLS), "--page-size", str(PAGE_SIZE))
    options = ("--allow-tool", "tool_*", "--deny-tool", "tool_1*", "--deny-tool", "tol_9")
    code, out = run_check("--json", *options, "--", *upstream)
    report = json.loads(out)
    before = report["counts"]["tools"]
    assert before > MANY_TOOLS
    assert report["toolFilter"] == {
        "allow": ["tool_*"],
        "deny": ["tool_1*", "tol_9"],
        "before": before,
        "after": 9,
        "appOnlyBefore": 0,
        "appOnlyAfter": 0,
        "unmatched": ["tol_9"],
    }
    # A deny pattern that matches nothing hides nothing, against the intent: a problem.
    assert code == 1
    [problem] = report["problems"]
    assert problem["fix"] == "Did you mean --deny-tool 'tool_9'? It matches the tool 'tool_9'."
    code, text = run_check(*options, "--", *upstream)
    assert code == 1
    lines = text.splitlines()
    assert f"Filter:     VS Code sees 9 of {before} tools (--allow-tool, --deny-tool)" in lines
    [at] = [index for index, line in enumerate(lines) if "tol_9" in line]
    assert lines[at : at + 2] == [
        "  - --deny-tool 'tol_9' matches no tool of the server, so it hides nothing "
        "(a pattern is case-sensitive and matches the whole name)",
        "    fix: Did you mean --deny-tool 'tool_9'? It matches the tool 'tool_9'.",
    ]


@pytest.mark.interop
def test_check_counts_the_tools_of_a_2025_era_server_after_the_filter() -> None:
    code, out = run_check("--json", "--deny-tool", "crash", "--", *legacy_command())
    assert code == 0
    report = json.loads(out)
    assert report["era"] == "2025-11-25"
    tool_filter = report["toolFilter"]
    assert tool_filter["before"] == report["counts"]["tools"] == tool_filter["after"] + 1
    assert tool_filter["unmatched"] == []


def test_check_without_a_filter_reports_none() -> None:
    code, out = run_check("--json", "--", *fixture_command())
    assert code == 0
    assert json.loads(out)["toolFilter"] is None
