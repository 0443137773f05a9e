"""``mcp-bridge-vscode check``: the real executable against working and broken servers."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from conftest import REPO_ROOT, WAIT, NodePeers
from harness import VSCODE_CAPABILITIES, Bridge, bridge_command, fixture_command, text_of
from mcpbridge.mcp.protocol import META_CLIENT_CAPABILITIES
from mcpbridge.oauth.config import TokenStoreMode
from peers import running_py_http_server
from peers.legacy import legacy_command, running_legacy_http_server

#: The 2026-07-28 server of the Python SDK ``mcp==2.3.0``: it speaks both eras on stdio.
DUAL_ERA_PEER = REPO_ROOT / "tests" / "peers" / "py_modern_stdio_server.py"
#: A raw server that writes what a correct server never would.
BAD_UPSTREAM = REPO_ROOT / "tests" / "peers" / "bad_upstream.py"
#: A TypeScript SDK server that offers tools by the client's capabilities, as server-everything does.
CAPABILITY_SERVER = REPO_ROOT / "tests" / "interop" / "capability_server.mjs"

#: The access token of the stored sign-in of the test.
TOKEN = "token-8d1f-secret"
#: A check starts Python servers; this bounds one run.
RUN_TIMEOUT = 6 * WAIT
"""A whole check run: it starts the bridge and its upstream, each step bounded by WAIT."""


class CheckOverran(AssertionError):
    """The check ran past the bound of its time limit."""


def run_check(
    *arguments: str, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT
) -> tuple[int, str, str]:
    """Run the check in its own process, waiting at most ``timeout`` seconds for its end.

    Raises:
        CheckOverran: it did not end in ``timeout`` seconds (then it is killed).
    """
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "mcpbridge", "check", *arguments],
            cwd=REPO_ROOT,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckOverran(f"the check did not end in {timeout} s") from exc
    return completed.returncode, completed.stdout.decode(), completed.stderr.decode()


def check_json(
    *arguments: str, env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT
) -> tuple[int, dict[str, Any]]:
    code, out, err = run_check("--json", *arguments, env=env, timeout=timeout)
    assert out.count("\n") == 1, (out, err[-2000:])
    report: dict[str, Any] = json.loads(out)
    return code, report


def step_names(report: dict[str, Any]) -> list[str]:
    return [step["step"] for step in report["steps"]]


def statuses(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(step["step"], step["status"]) for step in report["steps"]]


def block(lines: list[str], first: str, count: int) -> list[str]:
    """The ``count`` lines from the one that starts with ``first``."""
    [start] = [index for index, line in enumerate(lines) if line.startswith(first)]
    return lines[start : start + count]


def tool_count(lines: list[str]) -> int:
    """The number of tools of the server, from the one ``Tools:`` line of the report."""
    [tools] = [line for line in lines if line.startswith("Tools:")]
    return int(tools.split()[1].rstrip(":"))


def assert_matches_no_tool(
    lines: list[str], option: str, pattern: str, so: str, meant: tuple[str, str]
) -> None:
    """The problem of ``option`` with a ``pattern`` that matches no tool, which says what it does
    (``so``), and its fix, which suggests the pattern and the tool it matches (``meant``)."""
    assert block(lines, f"  - {option} '{pattern}'", 2) == [
        f"  - {option} '{pattern}' matches no tool of the server, so it {so} (a pattern is "
        "case-sensitive and matches the whole name)",
        f"    fix: Did you mean {option} '{meant[0]}'? It matches the tool '{meant[1]}'.",
    ]


# ------------------------------------------------------------------ commands


def test_check_finds_a_2025_era_command_and_counts_what_it_offers() -> None:
    code, report = check_json("--", *legacy_command())
    assert code == 0 and report["ok"] is True
    assert report["era"] == "2025-11-25" and report["protocolVersion"] == "2025-11-25"
    assert report["server"] == {"name": "py-legacy-peer", "version": "1.30.0"}
    assert step_names(report) == [
        "start",
        "server/discover",
        "initialize",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ]
    assert all(isinstance(step["ms"], int) and step["ok"] for step in report["steps"])
    assert report["counts"]["tools"] >= 10 and report["counts"]["prompts"] == 1
    assert report["counts"]["resources"] == 1 and report["counts"]["resourceTemplates"] == 0
    assert report["alsoSpeaks"] is None and report["notes"] == []
    assert report["signIn"]["state"] == "not used" and report["problems"] == []


def test_check_finds_a_2026_07_28_command() -> None:
    code, report = check_json("--", *fixture_command())
    assert code == 0
    assert report["era"] == "2026-07-28"
    assert report["server"] == {"name": "bridge-fixture-server", "version": "0.0.0"}
    assert step_names(report)[:2] == ["start", "server/discover"] and "initialize" not in step_names(report)
    assert report["counts"]["tools"] > 0


def test_check_names_the_host_profile_that_each_host_gets() -> None:
    code, report = check_json("--", *fixture_command())
    assert code == 0
    assert report["hostProfile"] == {"setting": "auto", "vscode": "vscode", "otherHosts": "generic"}
    code, out, _err = run_check("--host-profile", "generic", "--", *fixture_command(), env={"COLUMNS": "200"})
    assert code == 0
    assert "Profile:    generic for every host (--host-profile)" in out.splitlines()
    code, out, _err = run_check("--", *fixture_command(), env={"COLUMNS": "200"})
    assert (
        "Profile:    vscode for VS Code, generic for Codex CLI, Cursor, Claude Desktop, Zed and hosts of "
        "older revisions (--host-profile auto, chosen at the host's initialize)"
    ) in out.splitlines()


def test_check_of_a_command_that_does_not_exist_names_the_problem_and_exits_1() -> None:
    code, report = check_json("--", "/nonexistent/mcp-server")
    assert code == 1 and report["ok"] is False and report["era"] is None
    assert report["steps"] == [
        {
            "step": "start",
            "ms": report["steps"][0]["ms"],
            "status": "failed",
            "ok": False,
            "outcome": "mcp-server: No such file or directory (the path /nonexistent/mcp-server; "
            f"the working directory {REPO_ROOT})",
        }
    ]
    [problem] = report["problems"]
    assert problem["problem"].startswith("the command did not start")
    assert '"--"' in problem["fix"]


def test_check_of_a_command_that_stops_at_once_tells_to_run_it_in_a_terminal() -> None:
    code, report = check_json("--", sys.executable, "-c", "import sys; sys.exit(4)")
    assert code == 1
    [problem] = report["problems"]
    assert "stopped during server/discover" in problem["problem"] and "code 4" in problem["problem"]
    assert "terminal" in problem["fix"]


def test_check_with_protocol_2026_07_28_names_the_option_for_a_2025_era_server() -> None:
    code, report = check_json("--protocol", "2026-07-28", "--", *legacy_command())
    assert code == 1 and report["era"] is None
    assert report["steps"][-1]["ok"] is False
    assert "--protocol" in report["problems"][0]["fix"]


def test_check_declares_what_vs_code_declares_and_counts_what_vs_code_would_see(node: NodePeers) -> None:
    # The server registers a tool for each client capability at notifications/initialized.
    code, report = check_json("--", str(node.node22), str(CAPABILITY_SERVER))
    assert code == 0, report
    assert report["era"] == "2025-11-25"
    assert step_names(report) == [
        "start",
        "server/discover",
        "initialize",
        "tools/list",
        "resources/list",
        "resources/templates/list",
    ]
    # "always", and one for each of roots, sampling, form and URL elicitation.
    assert report["counts"] == {"tools": 5, "resources": 0, "resourceTemplates": 1}


def test_check_says_that_the_bridge_passes_a_server_of_both_eras_through_in_2025_11_25() -> None:
    code, report = check_json("--", sys.executable, str(DUAL_ERA_PEER))
    assert code == 0 and report["ok"] is True
    assert report["era"] == "2026-07-28" and report["alsoSpeaks"] == "2025-11-25"
    assert report["reachedIn"] == "2025-11-25"
    assert report["steps"][-1]["step"] == "initialize (2025 era)"
    assert report["counts"]["resourceTemplates"] == 0 and report["problems"] == []
    [note] = report["notes"]
    assert note["note"].startswith(
        "the server speaks both eras (2026-07-28 and 2025-11-25); the bridge reaches it in 2025-11-25, "
        "the revision of VS Code."
    )
    assert "ctx.elicit()" in note["note"] and "translates" not in note["note"]
    assert note["fix"].startswith("--protocol 2026-07-28 forces the translation.")

    code, out, _err = run_check("--", sys.executable, str(DUAL_ERA_PEER))
    assert code == 0
    assert (
        "Era:        MCP 2025-11-25 and 2026-07-28: the bridge reaches it in 2025-11-25, the revision of "
        "VS Code, and passes it through; --protocol 2026-07-28 forces the translation (see the notes)"
    ) in out
    assert "translates 2026-07-28 for VS Code" not in out


def test_check_of_a_server_of_both_eras_under_protocol_2026_07_28_says_that_the_bridge_translates() -> None:
    code, report = check_json("--protocol", "2026-07-28", "--", sys.executable, str(DUAL_ERA_PEER))
    assert code == 0 and report["reachedIn"] == "2026-07-28"
    [note] = report["notes"]
    assert "; the bridge translates." in note["note"]
    assert note["fix"].startswith("Remove --protocol 2026-07-28 to pass it through.")
    code, out, _err = run_check("--protocol", "2026-07-28", "--", sys.executable, str(DUAL_ERA_PEER))
    assert (
        "Era:        MCP 2026-07-28 and 2025-11-25: the bridge translates 2026-07-28 for VS Code, as "
        "--protocol 2026-07-28 forces (see the notes)"
    ) in out


def test_check_says_that_the_bridge_passes_a_url_of_both_eras_through_in_2025_11_25() -> None:
    with running_py_http_server() as url:
        code, report = check_json(url)
    assert code == 0 and report["era"] == "2026-07-28" and report["alsoSpeaks"] == "2025-11-25"
    assert report["reachedIn"] == "2025-11-25"
    assert report["notes"][0]["fix"].startswith("--protocol 2026-07-28 forces the translation.")


def test_check_of_a_server_of_2026_07_28_only_has_no_note() -> None:
    code, report = check_json("--", *fixture_command())
    assert code == 0
    assert report["alsoSpeaks"] is None and report["notes"] == []
    last = report["steps"][-1]
    assert last["step"] == "initialize (2025 era)" and last["ok"] is True
    assert last["outcome"].endswith(": 2026-07-28 only")


def test_check_calls_a_tool_that_needs_the_2025_era_and_names_what_protocol_2026_07_28_does() -> None:
    # By default the bridge passes the server through in 2025-11-25, where the tool works: a note.
    code, report = check_json("--call-tool", "ask_name_2025", "--", sys.executable, str(DUAL_ERA_PEER))
    assert code == 0 and report["ok"] is True and report["problems"] == []
    assert report["era"] == "2026-07-28" and report["alsoSpeaks"] == "2025-11-25"
    [call] = [step for step in report["steps"] if step["step"] == "tools/call"]
    assert call["status"] == "failed"
    assert call["outcome"].startswith("ask_name_2025: it needs a request of the 2025 era: ")
    [note] = report["notes"]
    assert note["note"].startswith(
        "the tool ask_name_2025 sends a request of the 2025 era in the middle of its call, "
        "which a 2026-07-28 connection does not carry (the server answered: "
    )
    assert note["fix"].startswith(
        "Nothing: with --protocol auto (the default) the bridge reaches the server in 2025-11-25"
    )

    # --protocol 2026-07-28 makes the bridge translate: a problem, which removing the option fixes.
    code, report = check_json(
        "--protocol", "2026-07-28", "--call-tool", "ask_name_2025", "--", sys.executable, str(DUAL_ERA_PEER)
    )
    assert code == 1 and report["ok"] is False
    [problem] = report["problems"]
    assert problem["problem"] == note["note"]
    assert "elicitation/create" in problem["problem"]
    assert problem["fix"].startswith("Remove --protocol 2026-07-28: the server speaks 2025-11-25 too")
    # The problem says it: no note that it might be so.
    assert report["notes"] == []

    # With --protocol legacy the call carries the request: the check declines it as a client
    # without a user, and the tool answers.
    code, report = check_json(
        "--protocol", "legacy", "--call-tool", "ask_name_2025", "--", sys.executable, str(DUAL_ERA_PEER)
    )
    assert code == 0 and report["era"] == "2025-11-25" and report["problems"] == []
    [call] = [step for step in report["steps"] if step["step"] == "tools/call"]
    assert call["status"] == "ok"
    assert call["outcome"] == (
        "ask_name_2025: a result (No name: decline.); in the middle of the call the server asked for "
        "elicitation/create, which the check answered as a client without a user"
    )


def test_check_tells_a_2026_07_28_only_server_to_ask_with_input_required() -> None:
    """A server that speaks no 2025 era: no --protocol can help, the tool must change."""
    message = (
        "Cannot send 'elicitation/create': this transport context has no back-channel for "
        "server-initiated requests."
    )
    arguments = json.dumps({"code": -32600, "message": message})
    code, report = check_json(
        "--call-tool", "error", "--call-arguments", arguments, "--", sys.executable, str(BAD_UPSTREAM)
    )
    assert code == 1 and report["alsoSpeaks"] is None
    [problem] = report["problems"]
    assert problem["problem"].endswith(f"(the server answered: {message})")
    assert "input_required" in problem["fix"] and "--protocol" not in problem["fix"]


def test_check_of_a_server_that_writes_other_lines_to_stdout_never_says_it_works() -> None:
    code, report = check_json("--", sys.executable, str(BAD_UPSTREAM), "--stray-lines", "1")
    assert code == 1 and report["ok"] is False and report["era"] == "2026-07-28"
    # Each start writes its line: the one of server/discover, and the one asked for the 2025 era.
    assert report["strayStdoutLines"] == 2
    [problem] = report["problems"]
    stray = "the server wrote 2 lines that are not JSON-RPC to stdout: log to stderr instead"
    assert problem["problem"] == stray and "stderr" in problem["fix"]

    code, out, _err = run_check("--", sys.executable, str(BAD_UPSTREAM), "--stray-lines", "1")
    assert code == 1 and "works" not in out
    lines = out.splitlines()
    assert f"  - {stray}" in lines
    assert lines[-1] == "Result:     the server answers, but the check found 1 problem (see Problems)"


@pytest.mark.parametrize("protocol", ["auto", "legacy", "2026-07-28"])
def test_a_tool_of_the_2025_era_on_a_server_of_both_eras_works_unless_the_bridge_translates(
    protocol: str,
) -> None:
    """``ctx.elicit()`` works on a connection opened with ``initialize``: the default and
    ``--protocol legacy`` pass a command of both eras through; ``--protocol 2026-07-28`` translates."""
    with Bridge(
        bridge_command("--protocol", protocol, upstream=[sys.executable, str(DUAL_ERA_PEER)])
    ) as bridge:
        assert "result" in bridge.initialize()
        call = bridge.request_async("tools/call", {"name": "ask_name_2025", "arguments": {}})
        if protocol != "2026-07-28":
            ask = bridge.wait_frame(lambda frame: frame.get("method") == "elicitation/create")
            assert str(ask["id"]).startswith("u-")
            bridge.send(
                {
                    "jsonrpc": "2.0",
                    "id": ask["id"],
                    "result": {"action": "accept", "content": {"name": "Ada"}},
                }
            )
        response = bridge.wait_response(call, timeout=30.0)
    if protocol != "2026-07-28":
        assert text_of(response) == "Hello, Ada."
    else:
        # The SDK refuses the request that 2026-07-28 has no channel for (FastMCP: "unavailable").
        assert response["error"]["code"] == -32600, response
        assert "elicitation/create" in response["error"]["message"]


def test_check_writes_a_report_for_a_person_without_json() -> None:
    code, out, _err = run_check("--", *legacy_command(), env={"COLUMNS": "60"})
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == 'Upstream:   the command "python" over stdio'
    assert "Era:        MCP 2025-11-25 (2025 era): the bridge passes it through" in lines
    assert "Server:     py-legacy-peer 1.30.0" in lines
    [initialize] = [line for line in lines if line.startswith("  initialize ")]
    assert initialize.endswith(" ms  ok         MCP 2025-11-25")
    # The names of each list, wrapped to the width of the terminal under the column of the values.
    assert block(lines, "Tools:", 4) == [
        "Tools:      12: add, echo, ask_name, toggle, progress, slow,",
        "            cancelled, log, touch, roots, image, crash",
        "Prompts:    1: greet",
        "Resources:  1: notes",
    ]
    assert "Templates:  0" in lines
    assert lines[-1] == "Result:     the server works"
    assert "\x1b[" not in out


def test_check_of_a_command_lists_the_names_and_states_each_step() -> None:
    code, report = check_json("--", sys.executable, str(DUAL_ERA_PEER))
    assert code == 0
    assert report["names"] == {
        "tools": ["add", "echo", "progress", "ask_name", "ask_name_2025", "toggle", "touch"],
        "prompts": ["greet"],
        "resources": ["notes"],
        "resourceTemplates": [],
    }
    assert report["counts"] == {"tools": 7, "prompts": 1, "resources": 1, "resourceTemplates": 0}
    assert {step["status"] for step in report["steps"]} == {"ok"}
    assert report["strayStdoutLines"] == 0

    code, out, _err = run_check("--", sys.executable, str(DUAL_ERA_PEER), env={"COLUMNS": "50"})
    assert code == 0
    assert block(out.splitlines(), "Tools:", 3) == [
        "Tools:      7: add, echo, progress, ask_name,",
        "            ask_name_2025, toggle, touch",
        "Prompts:    1: greet",
    ]


# ------------------------------------------------------------- time limit


def test_check_of_a_command_that_never_answers_ends_within_its_time_limit() -> None:
    """One time limit for the whole run: no second wait for initialize, no close grace after it."""
    seconds = 2
    code, report = check_json(
        "--discover-timeout",
        str(seconds),
        "--",
        sys.executable,
        str(BAD_UPSTREAM),
        "--mute",
        timeout=seconds + 1,
    )
    assert code == 1 and report["ok"] is False and report["era"] is None
    assert statuses(report) == [
        ("start", "ok"),
        ("server/discover", "timed out"),
        ("initialize", "skipped"),
    ]
    discover, initialize = report["steps"][1:]
    assert discover["outcome"] == "no answer before the end of the 2 s of --discover-timeout"
    assert initialize["outcome"] == "no time left (--discover-timeout 2 s bounds the whole check)"
    [problem] = report["problems"]
    assert problem["problem"] == (
        "the server did not answer server/discover within the 2 s of --discover-timeout"
    )
    assert "--discover-timeout" in problem["fix"] and "--protocol legacy" in problem["fix"]


def test_check_of_a_url_that_never_answers_ends_within_its_time_limit() -> None:
    seconds = 2
    with socket.create_server(("127.0.0.1", 0)) as listener:
        # The connections wait in the backlog: nothing ever answers them.
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        code, out, _err = run_check(
            "--discover-timeout", str(seconds), "--token-store", "memory", url, timeout=seconds + 1
        )
    assert code == 1
    lines = out.splitlines()
    [discover] = [line for line in lines if line.startswith("  server/discover ")]
    assert discover.endswith(" ms  timed out  no answer before the end of the 2 s of --discover-timeout")
    assert " ok " not in out
    assert lines[-1] == "Result:     the server does not work"


# ----------------------------------------------------------------------- URLs


def test_check_finds_a_2025_era_url_and_reports_the_connection(tmp_path: Path) -> None:
    # A URL without a stored sign-in (an empty token store of its own): the state is "none".
    empty = {"XDG_STATE_HOME": str(tmp_path / "empty-state"), "MCP_BRIDGE_TOKEN_KEY": "cd" * 32}
    with running_legacy_http_server() as url:
        code, report = check_json("--token-store", "file", url + "?tenant=secret-7", env=empty)
    assert code == 0
    assert report["era"] == "2025-11-25"
    # The URL with its path, without its query (which can carry a secret).
    assert report["upstream"]["kind"] == "url" and report["upstream"]["host"] == "127.0.0.1"
    assert report["upstream"]["url"] == url and report["upstream"]["queryHidden"] is True
    assert "secret-7" not in json.dumps(report)
    assert report["names"]["tools"][:3] == ["add", "echo", "ask_name"] and len(report["names"]["tools"]) == 12
    assert report["names"]["prompts"] == ["greet"] and report["names"]["resources"] == ["notes"]
    assert report["proxy"]["state"] == "none" and report["ca"] == {"state": "system"}
    assert report["signIn"]["state"] == "not needed" and "store" not in report["signIn"]
    assert report["signIn"]["resourceIndicator"]["sends"] == "metadata"
    assert report["signIn"]["flows"] == {"state": "not checked", "note": "the server did not ask for sign-in"}
    assert report["strayStdoutLines"] is None


@pytest.mark.parametrize(
    ("option", "row"),
    [
        ("off", "Resource:   not sent: --resource-indicator off"),
        ("api://mcp-7", "Resource:   sent: the URI of --resource-indicator"),
    ],
)
def test_the_text_report_says_what_the_sign_in_sends_as_resource(
    tmp_path: Path, option: str, row: str
) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "MCP_BRIDGE_TOKEN_KEY": "ab" * 32}
    with running_legacy_http_server() as url:
        code, out, _err = run_check("--token-store", "file", "--resource-indicator", option, url, env=env)
    assert code == 0 and row in out.splitlines()
    assert "mcp-7" not in out


def test_the_text_report_of_a_url_without_a_proxy_says_so(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "MCP_BRIDGE_TOKEN_KEY": "ab" * 32}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[name] = ""
    env["COLUMNS"] = "60"
    with running_legacy_http_server() as url:
        code, out, _err = run_check("--token-store", "file", url + "?tenant=secret-7", env=env)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"Upstream:   {url} over Streamable HTTP (its query is not shown)"
    assert "secret-7" not in out
    assert block(lines, "Tools:", 2) == [
        "Tools:      12: add, echo, ask_name, toggle, progress, slow,",
        "            cancelled, log, touch, roots, image, crash",
    ]
    assert "Proxy:      none: a direct connection" in lines
    # A server that never asked for a sign-in needs none: no word of flows or of a token store.
    sign_in, after = block(lines, "Sign-in:", 2)
    assert sign_in == "Sign-in:    not needed: the server did not ask for a sign-in"
    assert after.startswith("Resource:   ")


class _Tls:
    """A small 2026-07-28 server over https with a certificate of a test CA."""

    def __init__(self, tmp: Path) -> None:
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        self.ca_file = tmp / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert.configure_cert(context)
        #: Each request that the server got.
        self.seen: list[dict[str, Any]] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                seen.append(message)
                if self.path == "/locked" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._send(401, b"", {"WWW-Authenticate": 'Bearer realm="mcp"'})
                    return
                result: dict[str, Any] = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
                if message["method"] == "server/discover":
                    result.update(
                        supportedVersions=["2026-07-28"],
                        capabilities={"tools": {}},
                        _meta={"io.modelcontextprotocol/serverInfo": {"name": "tls-server", "version": "2"}},
                    )
                else:
                    result["tools"] = [{"name": "one", "inputSchema": {"type": "object"}}]
                body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
                self._send(200, body, {"Content-Type": "application/json"})

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, name="test-tls", daemon=True)
        self.thread.start()
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(WAIT)


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[_Tls]:
    server = _Tls(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def test_check_of_an_untrusted_certificate_names_ca_file_and_works_with_it(tls_server: _Tls) -> None:
    code, report = check_json(tls_server.url + "/mcp")
    assert code == 1
    [problem] = report["problems"]
    assert problem["problem"] == "the certificate of the server is not trusted"
    assert "--ca-file" in problem["fix"]

    code, report = check_json("--ca-file", str(tls_server.ca_file), tls_server.url + "/mcp")
    assert code == 0, report
    assert report["era"] == "2026-07-28" and report["server"] == {"name": "tls-server", "version": "2"}
    assert report["counts"] == {"tools": 1}
    assert report["ca"] == {"state": "system and file", "file": str(tls_server.ca_file)}
    # Each request of 2026-07-28 declares VS Code's capabilities, mapped to that revision.
    modern = [message for message in tls_server.seen if message["method"] != "initialize"]
    assert [message["method"] for message in modern][-2:] == ["server/discover", "tools/list"]
    for message in modern[-2:]:
        assert message["params"]["_meta"][META_CLIENT_CAPABILITIES] == {
            "roots": {},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
        }
    # The check asked whether the server speaks the 2025 era too, with VS Code's own capabilities.
    assert tls_server.seen[-1]["method"] == "initialize"
    assert tls_server.seen[-1]["params"]["capabilities"] == VSCODE_CAPABILITIES


def test_check_of_a_server_that_needs_a_sign_in_tells_how_to_sign_in(tls_server: _Tls) -> None:
    code, report = check_json("--ca-file", str(tls_server.ca_file), tls_server.url + "/locked")
    assert code == 1
    [problem] = report["problems"]
    # The server asked for a sign-in, thus the check looked for its flows, and says in words
    # why it found none: the sign-in cannot work, and the fix is that of its problem.
    assert problem["problem"] == (
        "the server needs a sign-in (HTTP status 401), and the sign-in cannot work: the server publishes "
        "no protected resource metadata"
    )
    assert problem["fix"] == "Check the URL, or send a token with --header-env Authorization=<variable>."
    assert report["signIn"]["flows"] == {
        "state": "not checked",
        "note": "the server publishes no protected resource metadata",
    }


def test_the_sign_in_row_names_the_token_store_only_for_a_server_that_asks_for_a_sign_in(
    tls_server: _Tls,
) -> None:
    options = ("--token-store", "memory", "--ca-file", str(tls_server.ca_file))
    code, out, _err = run_check(*options, tls_server.url + "/open", env={"COLUMNS": "200"})
    assert code == 0
    [sign_in] = [line for line in out.splitlines() if line.startswith("Sign-in:")]
    assert sign_in == "Sign-in:    not needed: the server did not ask for a sign-in"
    assert "token" not in out and "memory" not in out and "keychain" not in out
    code, report = check_json(*options, tls_server.url + "/locked")
    assert code == 1
    assert report["signIn"]["state"] == "none"
    assert report["signIn"]["store"].startswith("the tokens stay in memory (--token-store memory)")


def test_check_of_an_unusable_ca_file_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("no certificate\n")
    code, report = check_json("--ca-file", str(empty), "https://127.0.0.1:1/mcp")
    assert code == 2
    assert "--ca-file" in report["problems"][0]["fix"]
    # The check reached no server: it judges the option, and the file is not in use.
    assert report["notChecked"] == "the CA certificates of --ca-file cannot be used"
    assert report["ca"]["state"] == "not used" and "file" not in report["ca"]

    code, out, _err = run_check("--ca-file", str(tmp_path / "missing.pem"), "https://127.0.0.1:1/mcp")
    assert code == 2
    lines = out.splitlines()
    assert "Era:        not checked" in lines
    assert "CA:         not used: the --ca-file cannot be used (the file does not exist)" in lines
    assert block(lines, "  - the check did not contact the server", 2) == [
        "  - the check did not contact the server: the CA certificates of --ca-file cannot be used: "
        "the file does not exist",
        "    fix: Give a readable PEM file of CA certificates with --ca-file, or leave the option out (the "
        'bridge always trusts the CA certificates of the system); see "mcp-bridge-vscode check --help".',
    ]
    assert lines[-1] == (
        "Result:     not checked: the CA certificates of --ca-file cannot be used (see Problems)"
    )
    assert "does not work" not in out and "missing.pem" not in out


def test_check_uses_a_stored_sign_in_and_reports_when_it_expires_without_its_token(
    tls_server: _Tls, tmp_path: Path
) -> None:
    from mcpbridge.oauth.authorizer import OAuthConfig
    from mcpbridge.oauth.store import IndexedStore, open_store
    from mcpbridge.oauth.stored import ClientRegistration, Record, RecordKey
    from mcpbridge.vscode import cli
    from mcpbridge.vscode import settings as args

    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "MCP_BRIDGE_TOKEN_KEY": "ab" * 32}
    url = tls_server.url + "/locked"
    settings = cli.parse(["check", "--token-store", "file", url], env)
    assert isinstance(settings, args.CheckSettings) and isinstance(settings.upstream, args.UrlUpstream)
    upstream = settings.upstream
    assert upstream.sign_in is not None
    opened = open_store(TokenStoreMode.FILE, key=upstream.store.token_key, key_file=None, env=env)
    config = OAuthConfig(
        url, upstream.store.account, upstream.sign_in.redirect_port, upstream.sign_in.registration
    )
    record = Record(
        RecordKey("https://as.example", url, config.identity),
        ClientRegistration("client-1"),
        access_token=TOKEN,
        expires_at=2_000_000_000,
        without_resource=True,
    )
    IndexedStore(opened.store).save(record, url)

    code, out, err = run_check(
        "--json", "--token-store", "file", "--ca-file", str(tls_server.ca_file), url, env=env
    )
    report = json.loads(out)
    assert report["signIn"]["state"] == "stored"
    assert report["signIn"]["expires"] == "2033-05-18 03:33:20 UTC"
    assert report["signIn"]["resourceIndicator"] == {
        "sends": "none",
        "why": "the authorization server refused it, as the stored sign-in remembers",
    }
    assert TOKEN not in out + err
    # The check sends the stored token, as the bridge would.
    assert code == 0 and report["era"] == "2026-07-28"


def test_the_report_has_colors_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpbridge.vscode.check_report import colors

    monkeypatch.delenv("NO_COLOR", raising=False)
    leader, follower = os.openpty()
    read_end, write_end = os.pipe()
    with os.fdopen(follower, "w") as terminal, os.fdopen(write_end, "w") as pipe:
        color = colors(terminal)
        assert color is not None
        green = color("ok", "green")
        assert green.startswith("\x1b[32m") and green.endswith("ok\x1b[0m")
        assert colors(pipe) is None
        monkeypatch.setenv("NO_COLOR", "1")
        assert colors(terminal) is None
    os.close(leader)
    os.close(read_end)


def test_the_report_says_whether_the_sign_in_is_renewed_without_a_person() -> None:
    from mcpbridge.oauth import flow, stored
    from mcpbridge.vscode import cli
    from mcpbridge.vscode import settings as args
    from mcpbridge.vscode.check_advice import predicted_renewal, stored_renewal
    from mcpbridge.vscode.check_report import Report, render_text

    url = "https://mcp.example.com/mcp"
    parsed = cli.parse([url], {})
    assert isinstance(parsed, args.ServeSettings) and isinstance(parsed.upstream, args.UrlUpstream)
    browser = parsed.upstream.sign_in
    assert browser is not None

    def metadata(**changes: object) -> flow.ServerMetadata:
        doc: dict[str, object] = {
            "issuer": "https://as.example",
            "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": "https://as.example/token",
            "code_challenge_methods_supported": ["S256"],
            **changes,
        }
        return flow.check_server_metadata(doc, "https://as.example")

    openid = metadata(id_token_signing_alg_values_supported=["RS256"], scopes_supported=["offline_access"])
    assert predicted_renewal(browser, openid)["silent"] is True
    assert "prompt=consent" in predicted_renewal(browser, openid)["why"]
    assert predicted_renewal(browser, metadata(scopes_supported=["offline_access"]))["silent"] is None
    assert (
        predicted_renewal(browser, metadata(grant_types_supported=["authorization_code"]))["silent"] is False
    )
    assert predicted_renewal(browser, metadata())["silent"] is None
    key = stored.RecordKey("https://as.example", url, "c")
    with_refresh = stored.Record(key, stored.ClientRegistration("c"), "at", refresh_token="rt")
    assert stored_renewal(browser, with_refresh) == {
        "silent": True,
        "why": "the stored sign-in has a refresh token",
    }
    without_refresh = stored.Record(key, stored.ClientRegistration("c"), "at")
    assert stored_renewal(browser, without_refresh)["silent"] is False
    report = Report(upstream={"kind": "url", "scheme": "https", "host": "mcp.example.com"})
    report.sign_in = {"state": "none", "renewal": stored_renewal(browser, with_refresh)}
    assert "Renewal:    silent: the stored sign-in has a refresh token" in render_text(report).splitlines()


# ------------------------------------------------------------ names that match nothing


def test_an_allow_pattern_that_matches_no_tool_is_a_problem_with_the_pattern_that_would_match() -> None:
    options = ("--allow-tool", "bare-*", "--allow-tool", "Echo", "--allow-tool", "zzz*")
    code, out, _err = run_check(*options, "--", *fixture_command())
    assert code == 1
    lines = out.splitlines()
    assert_matches_no_tool(lines, "--allow-tool", "bare-*", "lets no tool through", ("bare_*", "bare_array"))
    assert block(lines, "  - --allow-tool 'Echo'", 2)[1] == (
        "    fix: Did you mean --allow-tool 'echo'? It matches the tool 'echo'."
    )
    assert block(lines, "  - --allow-tool 'zzz*'", 2)[1] == (
        "    fix: Give a pattern that matches the name of a tool (the Tools line lists them)."
    )
    count = tool_count(lines)
    assert block(lines, "  - VS Code sees none", 1) == [
        f"  - VS Code sees none of the {count} tools of the server: the tool filter hides each of them"
    ]
    assert lines[-1] == "Result:     the server answers, but the check found 4 problems (see Problems)"
    assert "the server works" not in out


def test_a_filter_that_shows_some_tools_with_each_pattern_matching_is_no_problem() -> None:
    code, report = check_json("--allow-tool", "ask_*", "--", *fixture_command())
    assert code == 0 and report["problems"] == []
    assert report["toolFilter"]["after"] > 0 and report["toolFilter"]["unmatched"] == []


def test_a_call_of_a_tool_that_the_server_does_not_list_names_the_closest_tools() -> None:
    code, out, _err = run_check("--call-tool", "ehco", "--", *fixture_command())
    assert code == 1
    lines = out.splitlines()
    [call] = [line for line in lines if line.startswith("  tools/call")]
    assert "failed     ehco: " in call
    assert block(lines, "  - the server has no tool", 2) == [
        "  - the server has no tool ehco: its tool list does not name it, and the call failed",
        "    fix: Did you mean 'echo'? Give --call-tool the name of a tool of the server.",
    ]
    assert "--call-arguments" not in out


#: A command that writes lines that are not messages to stdout as fast as it can, and never answers.
FLOOD = "import sys\nwhile True:\n    sys.stdout.write('y\\n' * 65536)\n"


def test_a_command_that_floods_stdout_is_closed_within_the_time_limit_without_its_backlog() -> None:
    """The close after the time limit does not parse the lines left in the pipe (up to 1 MiB):
    the reader of the child's stdout ends with the child, not 2 s after it."""
    code, report = check_json("--discover-timeout", "3", "--", sys.executable, "-c", FLOOD)
    assert code == 1
    assert statuses(report)[:2] == [("start", "ok"), ("server/discover", "timed out")]
    assert report["strayStdoutLines"] > 0
    code, _out, err = run_check("--discover-timeout", "3", "--", sys.executable, "-c", FLOOD)
    assert code == 1
    assert "threads still running after the close" not in err
    assert "mcpbridge-" not in err  # no thread name of the bridge reaches the user
