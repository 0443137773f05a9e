"""A 2025-era upstream server behind the real executable: era detection and the passthrough.

The upstream is ``tests/peers/py_legacy_server.py``, written with ``mcp==1.30.0`` (its own
venv), over stdio and over Streamable HTTP; small scripted servers cover the edges. The
bridge is driven over its stdin and stdout as VS Code drives it.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import WAIT, Bridge, bridge_command, fixture_command, text_of
from mcpbridge.bridge.rules.errortable import error_object
from peers.legacy import legacy_command, running_legacy_http_server, running_legacy_sse_server
from schema import validate_legacy_frame
from tests.peers.scripted_http import LegacyScript, ScriptedServer

pytestmark = [pytest.mark.interop, pytest.mark.slow]

NOTES = "file:///legacy/notes.txt"
#: The icons of the peer's server and of its tool ``echo`` (tests/peers/py_legacy_server.py).
DATA_ICON = "data:image/png;base64,iVBORw0KGgo="
REMOTE_ICON = "https://icons.invalid/peer.png"


@pytest.fixture(scope="module")
def legacy_url() -> Iterator[str]:
    with running_legacy_http_server() as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def legacy_bridge(request: pytest.FixtureRequest) -> Iterator[Bridge]:
    """The bridge in front of the 2025-era peer, over each transport, initialized."""
    if request.param == "stdio":
        command = bridge_command(upstream=legacy_command())
    else:
        command = bridge_command(request.getfixturevalue("legacy_url"))
    with Bridge(command) as bridge:
        init = bridge.initialize()
        assert "result" in init, init
        yield bridge


def call(bridge: Bridge, name: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return bridge.request("tools/call", {"name": name, "arguments": arguments or {}, **extra})


def frame(bridge: Bridge, predicate: Any) -> dict[str, Any]:
    """The first frame that matches, among those seen already or the next ones."""
    return bridge.seen_or_next(predicate)


def script(body: str) -> list[str]:
    """A scripted stdio upstream in this interpreter; ``body`` handles each message ``m``."""
    prelude = (
        "import sys, json\n"
        "def send(o):\n"
        "    sys.stdout.write(json.dumps(o) + '\\n'); sys.stdout.flush()\n"
        "sys.stderr.write('scripted: started\\n'); sys.stderr.flush()\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
    )
    indented = "".join("    " + line + "\n" for line in body.strip("\n").splitlines())
    return [sys.executable, "-c", f"INIT = {INIT_RESULT}\n" + prelude + indented]


DISCOVER_RESULT = (
    "{'resultType': 'complete', 'supportedVersions': ['2026-07-28'], 'capabilities': {}, 'ttlMs': 0,"
    " 'cacheScope': 'public',"
    " '_meta': {'io.modelcontextprotocol/serverInfo': {'name': 'modern', 'version': '1'}}}"
)
INIT_RESULT = (
    "{'protocolVersion': '2025-06-18', 'capabilities': {'tools': {}},"
    " 'serverInfo': {'name': 'scripted', 'version': '1'}}"
)
#: A 2025-era server's start: -32601 for server/discover, :data:`INIT_RESULT` for initialize.
LEGACY_HANDSHAKE = """
if m.get('method') == 'server/discover':
    send({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': -32601, 'message': 'Method not found'}})
elif m.get('method') == 'initialize':
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': INIT})
"""


def legacy_script(body: str) -> list[str]:
    """A scripted 2025-era upstream: :data:`LEGACY_HANDSHAKE`, then ``body`` (``elif`` branches)."""
    return script(LEGACY_HANDSHAKE + body.strip("\n"))


# ------------------------------------------------------------------------- era


def test_a_2025_era_server_gets_initialize_and_its_own_result_reaches_the_client() -> None:
    # At the debug level every stderr line of the child passes, its start among them.
    with Bridge(bridge_command("--log-level", "debug", upstream=legacy_command())) as bridge:
        response = bridge.initialize()
        validate_legacy_frame(response)
        result = response["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["serverInfo"]["name"] == "py-legacy-peer"
        assert result["serverInfo"]["version"] == "1.30.0"
        assert result["instructions"] == "A 2025-era peer server written with the MCP Python SDK 1.30.0."
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert "the upstream server speaks MCP 2025-11-25" in bridge.stderr_text
        assert bridge.stderr_text.count("py-legacy-peer: started") == 1
        # The client's initialize went first: the SDK saw no request of 2026-07-28, thus
        # wrote no page about a method that it does not know.
        assert "Failed to validate request: " not in bridge.stderr_text


def test_a_2026_07_28_server_is_named_in_the_log_too() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        assert "result" in bridge.initialize()
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert "the upstream server speaks MCP 2026-07-28" in bridge.stderr_text


def test_protocol_2026_07_28_refuses_a_2025_era_server_with_discover_failed() -> None:
    with Bridge(bridge_command("--protocol", "2026-07-28", upstream=legacy_command())) as bridge:
        error = bridge.initialize()["error"]
        assert error["code"] == -32602
        assert error["data"]["cause"] == "discover_failed"


def test_protocol_legacy_sends_no_discover() -> None:
    with Bridge(bridge_command("--protocol", "legacy", upstream=legacy_command())) as bridge:
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "py-legacy-peer"
        assert text_of(call(bridge, "add", {"a": 1, "b": 2})) == "3"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert "server/discover" not in bridge.stderr_text


def test_a_2025_era_child_that_would_close_at_server_discover_never_gets_it() -> None:
    upstream = script(
        """
if m.get('method') == 'server/discover':
    send({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': -32601, 'message': 'Method not found'}})
    sys.exit(0)
if m.get('method') == 'initialize':
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': INIT})
"""
    )
    with Bridge(bridge_command(upstream=upstream)) as bridge:
        result = bridge.initialize()["result"]
        assert result["protocolVersion"] == "2025-06-18"
        assert result["serverInfo"] == {"name": "scripted", "version": "1"}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert bridge.stderr_text.count("scripted: started") == 1


def test_a_server_silent_on_discover_that_answers_initialize_is_passed_through() -> None:
    upstream = script(
        """
if m.get('method') == 'initialize':
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': INIT})
elif m.get('method') == 'tools/list':
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': {'tools': []}})
"""
    )
    with Bridge(bridge_command("--discover-timeout", "1", upstream=upstream)) as bridge:
        assert bridge.initialize()["result"]["serverInfo"]["name"] == "scripted"
        assert bridge.request("tools/list")["result"] == {"tools": []}
        assert bridge.stderr_text.count("scripted: started") == 1


def test_the_requests_and_the_cancellations_of_the_server_reach_the_client_with_bridge_ids() -> None:
    upstream = legacy_script(
        """
elif m.get('method') == 'notifications/initialized':
    send({'jsonrpc': '2.0', 'id': 77, 'method': 'roots/list'})
    send({'jsonrpc': '2.0', 'method': 'notifications/cancelled', 'params': {'requestId': 77, 'reason': 'r'}})
    send({'jsonrpc': '2.0', 'id': 'x', 'method': 'ping'})
elif m.get('id') == 'x':
    send({'jsonrpc': '2.0', 'method': 'notifications/message',
          'params': {'level': 'info', 'data': 'pong ' + json.dumps(m)}})
"""
    )
    with Bridge(bridge_command(upstream=upstream)) as bridge:
        bridge.initialize()
        roots = bridge.wait_frame(lambda f: f.get("method") == "roots/list")
        cancelled = bridge.wait_frame(lambda f: f.get("method") == "notifications/cancelled")
        assert cancelled["params"] == {"requestId": roots["id"], "reason": "r"}
        ping = bridge.wait_frame(lambda f: f.get("method") == "ping")
        assert isinstance(ping["id"], str) and ping["id"].startswith("u-") and ping["id"] != roots["id"]
        # A late answer to the canceled request goes nowhere; the answer to ping goes back with id "x".
        bridge.send({"jsonrpc": "2.0", "id": roots["id"], "result": {"roots": []}})
        bridge.send({"jsonrpc": "2.0", "id": ping["id"], "result": {}})
        log = bridge.wait_frame(lambda f: f.get("method") == "notifications/message")
        assert log["params"]["data"] == 'pong {"jsonrpc": "2.0", "id": "x", "result": {}}'


def test_progress_of_a_2025_era_server_is_rate_limited_and_only_for_requests_in_flight() -> None:
    upstream = legacy_script(
        """
elif m.get('method') == 'tools/call':
    token = m['params']['_meta']['progressToken']
    def progress(token, value):
        send({'jsonrpc': '2.0', 'method': 'notifications/progress',
              'params': {'progressToken': token, 'progress': value}})
    progress('other', 1)
    for i in range(200):
        progress(token, i)
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': {'content': [{'type': 'text', 'text': 'done'}]}})
    progress(token, 999)
    send({'jsonrpc': '2.0', 'method': 'notifications/message', 'params': {'level': 'info', 'data': 'end'}})
"""
    )
    with Bridge(bridge_command(upstream=upstream)) as bridge:
        bridge.initialize()
        answer = call(bridge, "work", _meta={"progressToken": 7})
        assert text_of(answer) == "done"
        frame(bridge, lambda f: f.get("method") == "notifications/message")
        progress = [f["params"] for f in bridge.seen if f.get("method") == "notifications/progress"]
        # 200 in a burst: 50 a second pass; none for a token that no request in flight
        # asked for, none after the response.
        assert [p["progress"] for p in progress][:50] == list(range(50))
        assert len(progress) < 200
        assert {p["progressToken"] for p in progress} == {7}


def test_the_schema_quirks_of_tools_list_are_fixed_for_a_2025_era_server() -> None:
    upstream = legacy_script(
        """
elif m.get('method') == 'tools/list':
    tool = {'name': 'bare', 'inputSchema': {'type': 'object', 'properties': {'values': {'type': 'array'}}},
            'outputSchema': {'type': 'array'}}
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': {'tools': [tool], 'nextCursor': None}})
"""
    )
    with Bridge(bridge_command(upstream=upstream)) as bridge:
        bridge.initialize()
        result = bridge.request("tools/list")["result"]
        validate_legacy_frame({"jsonrpc": "2.0", "id": 1, "result": result})
        assert result == {
            "tools": [
                {
                    "name": "bare",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"values": {"type": "array", "items": {}}},
                    },
                }
            ]
        }
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert "tool 'bare': added an items schema at '/properties/values'" in bridge.stderr_text


#: A 2025-era server that asks the client for its roots (id 5) after ``notifications/initialized``
#: and logs back what it gets for that request.
ASK_ROOTS = """
elif m.get('method') == 'notifications/initialized':
    send({'jsonrpc': '2.0', 'id': 5, 'method': 'roots/list'})
elif m.get('id') == 5:
    send({'jsonrpc': '2.0', 'method': 'notifications/message', 'params': {'level': 'info', 'data': m}})
"""


def test_an_unreadable_answer_to_a_request_of_the_server_answers_it_with_an_error() -> None:
    with Bridge(bridge_command(upstream=legacy_script(ASK_ROOTS))) as bridge:
        bridge.initialize()
        roots = bridge.wait_frame(lambda f: f.get("method") == "roots/list")
        bridge.send(b'{"jsonrpc": "2.0", "id": "' + roots["id"].encode() + b'", "result": {"roots": [}\n')
        log = bridge.wait_frame(lambda f: f.get("method") == "notifications/message")
        answer = log["params"]["data"]
        assert answer["id"] == 5
        assert answer["error"] == {"code": -32603, "message": "The answer of the client could not be read."}
        # The bad line was an answer: the client gets no parse error for it.
        assert not [f for f in bridge.seen if f.get("error", {}).get("code") == -32700]


def test_a_request_of_the_client_with_the_id_of_a_request_of_the_server_answers_nothing() -> None:
    with Bridge(bridge_command(upstream=legacy_script(ASK_ROOTS))) as bridge:
        bridge.initialize()
        roots = bridge.wait_frame(lambda f: f.get("method") == "roots/list")
        bridge.send({"jsonrpc": "2.0", "id": roots["id"], "method": 5})
        assert bridge.wait_response(roots["id"])["error"]["data"]["cause"] == "invalid_request_shape"
        bridge.send({"jsonrpc": "2.0", "id": roots["id"], "result": {"roots": []}})
        log = bridge.wait_frame(lambda f: f.get("method") == "notifications/message")
        assert log["params"]["data"] == {"jsonrpc": "2.0", "id": 5, "result": {"roots": []}}


def test_a_bad_request_of_the_server_with_the_id_of_a_request_of_the_bridge_gets_its_error() -> None:
    upstream = legacy_script(
        """
elif m.get('method') == 'tools/call':
    send({'jsonrpc': '2.0', 'id': m['id'], 'method': 5})
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': {'content': [{'type': 'text', 'text': 'done'}]}})
elif 'error' in m:
    send({'jsonrpc': '2.0', 'method': 'notifications/message', 'params': {'level': 'info', 'data': m}})
"""
    )
    with Bridge(bridge_command(upstream=upstream)) as bridge:
        bridge.initialize()
        assert text_of(call(bridge, "any")) == "done"
        # The server logs the error it got back on its own time: before or after the result.
        logs = [f for f in bridge.seen if f.get("method") == "notifications/message"]
        log = logs[0] if logs else bridge.wait_frame(lambda f: f.get("method") == "notifications/message")
        assert log["params"]["data"]["error"] == {"code": -32600, "message": "Invalid Request"}


def test_the_loss_of_a_2025_era_child_ends_the_bridge_with_exit_1() -> None:
    with Bridge(bridge_command(upstream=legacy_command())) as bridge:
        bridge.initialize()
        pending = bridge.request_async("tools/call", {"name": "slow", "arguments": {"seconds": 60}})
        error = call(bridge, "crash", {"code": 3})["error"]
        assert error["code"] == -32603 and error["data"]["cause"] == "upstream_exited"
        assert bridge.wait_response(pending)["error"]["data"]["cause"] == "upstream_exited"
        assert bridge.wait_exit() == 1
        assert "the upstream server exited with code 3" in bridge.stderr_text


# --------------------------------------------------- what a server must not send

#: Results that no MCP revision allows, and VS Code refuses: each fails its own request.
NOT_OBJECTS = [5, "not-an-object-7f3", [1, 2], None, True]
#: ``tools/call`` of a scripted stdio server as :class:`~peers.scripted_http.LegacyScript` answers it.
RESULT_TOOLS = """
elif m.get('method') == 'tools/call' and m['params']['name'] == 'result':
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': m['params']['arguments']['value']})
elif m.get('method') == 'tools/call':
    send({'jsonrpc': '2.0', 'id': m['id'], 'result': {'content': [{'type': 'text', 'text': 'ok'}]}})
"""


@pytest.mark.parametrize("over", ["stdio", "http"])
def test_a_result_that_is_not_an_object_fails_its_request_and_the_bridge_serves_on(over: str) -> None:
    with contextlib.ExitStack() as stack:
        if over == "http":
            server = stack.enter_context(ScriptedServer(LegacyScript()))
            command = bridge_command("--protocol", "legacy", server.url())
        else:
            command = bridge_command("--protocol", "legacy", upstream=legacy_script(RESULT_TOOLS))
        bridge = stack.enter_context(Bridge(command))
        assert "result" in bridge.initialize()
        for value in NOT_OBJECTS:
            response = call(bridge, "result", {"value": value})
            validate_legacy_frame(response)
            assert response["error"]["code"] == -32603
            assert response["error"]["data"] == {
                "cause": "invalid_response",
                "detail": "tools/call: the result is not an object",
            }
        assert text_of(call(bridge, "ok")) == "ok"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    warnings = [line.rstrip("\n") for line in bridge.stderr_lines if "not an object" in line]
    assert warnings == [
        "mcp-bridge-vscode: bridge: warning: tools/call: the upstream server sent a result that is not an "
        "object, thus the client gets an error"
    ]
    assert "not-an-object-7f3" not in bridge.stderr_text


def test_an_answer_over_the_limit_on_the_old_sse_transport_names_the_limit_and_its_option() -> None:
    # The answers of an HTTP+SSE server (2024-11-05) all come on its one event stream: an
    # event over --max-response-bytes ends the stream, and with it the session.
    with (
        running_legacy_sse_server() as url,
        Bridge(bridge_command("--transport", "sse", "--max-response-bytes", "2000", url)) as bridge,
    ):
        assert "result" in bridge.initialize()
        assert text_of(call(bridge, "echo", {"text": "y" * 100})) == "y" * 100
        response = call(bridge, "echo", {"text": "y" * 5000})
        validate_legacy_frame(response)
        detail = "an event longer than 2000 bytes"
        assert response["error"] == error_object("response_too_large", detail)
        assert "--max-response-bytes" in response["error"]["message"]
        # The session ended with its stream: the bridge ends, as when a command exits.
        assert bridge.wait_exit() == 1
    line = f"mcp-bridge-vscode: bridge: warning: {detail}; to take such answers, raise --max-response-bytes"
    assert line in bridge.stderr_text.splitlines()


def test_a_server_that_forgets_every_session_gets_one_new_session_then_each_request_fails_named() -> None:
    with (
        ScriptedServer(LegacyScript(forget_sessions=True)) as server,
        Bridge(bridge_command("--protocol", "legacy", server.url())) as bridge,
    ):
        assert "result" in bridge.initialize()
        for _ in range(3):
            response = call(bridge, "ok")
            validate_legacy_frame(response)
            assert response["error"]["data"]["cause"] == "session_expired"
            assert "starts no more sessions" in response["error"]["message"]
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        posts = [(r.rpc_method, r.header("Mcp-Session-Id")) for r in server.received if r.method == "POST"]
    # notifications/initialized of the client expired its session, and that of the one new session too;
    # no request went out after that.
    assert posts == [
        ("initialize", None),
        ("notifications/initialized", "s1"),
        ("initialize", None),
        ("notifications/initialized", "s2"),
    ]
    warning = "mcp-bridge-vscode: http: warning: "
    assert [line.rstrip("\n") for line in bridge.stderr_lines if "no more sessions" in line] == [
        warning + "the upstream server ended a new session at once too, thus the bridge starts no more "
        "sessions: restart the server",
        warning + "notifications/initialized was not sent to the upstream server: the bridge starts no "
        "more sessions",
    ]
    assert "failed inside the bridge" not in bridge.stderr_text


# ------------------------------------------------------------ the quiet probe

PREFIX = "mcp-bridge-vscode: "
START = (
    PREFIX + "vscode: info: version 0.1.0; pid <pid>; upstream: the command {name} over stdio; "
    "era: found at the "
    "first initialize (--protocol auto, the default); log level: info (the default; --log-level sets it); "
    "host profile: picked at the first initialize (--host-profile auto, the default)\n"
)
ERA_2025 = (
    PREFIX + "bridge: info: the upstream server speaks MCP {version}, the client's revision: "
    "the bridge passes it through; --protocol 2026-07-28 translates instead\n"
)
#: The start line with ``--protocol 2026-07-28``: server/discover goes first.
START_MODERN = START.replace(
    "found at the first initialize (--protocol auto, the default)", "2026-07-28 (--protocol)"
)
REFUSED = re.compile(
    re.escape(PREFIX) + r"bridge: info: the upstream server wrote (\d+) lines on stderr as it refused "
    r"server/discover, a request of MCP 2026-07-28; --log-level debug shows them\n"
)


def stderr_of_a_start(command: list[str], *, answered: bool = True) -> list[str]:
    """The stderr lines of a bridge that answers initialize (with a result when ``answered``),
    then ends at the end of stdin."""
    with Bridge(command) as bridge:
        response = bridge.initialize()
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        assert ("result" in response) is answered, (response, bridge.stderr_text)
        return [line.replace(f"; pid {bridge.proc.pid};", "; pid <pid>;") for line in bridge.stderr_lines]


def test_the_pages_that_the_python_sdk_writes_for_server_discover_become_one_line_with_their_count() -> None:
    # Only --protocol 2026-07-28 sends server/discover to a command first.
    command = bridge_command("--protocol", "2026-07-28", upstream=legacy_command())
    first, refused, failed = stderr_of_a_start(command, answered=False)
    assert first == START_MODERN.format(name="python")
    found = REFUSED.fullmatch(refused)
    assert found is not None, refused
    # The start of the peer and the validation error of each request type of mcp 1.30.0.
    assert int(found.group(1)) > 50
    assert "server/discover failed" in failed


def test_a_few_stderr_lines_of_a_2025_era_server_pass_as_they_are() -> None:
    lines = stderr_of_a_start(bridge_command(upstream=script(LEGACY_HANDSHAKE)))
    assert lines[0] == START.format(name=Path(sys.executable).name)
    assert sorted(lines[1:]) == sorted(["scripted: started\n", ERA_2025.format(version="2025-06-18")])


def test_the_stderr_lines_of_a_2026_07_28_server_pass_unchanged_once_it_answers_server_discover() -> None:
    upstream = script(
        f"""
if m.get('method') == 'server/discover':
    for n in range(40):
        sys.stderr.write(f'modern: line {{n}}\\n')
    sys.stderr.flush()
    send({{'jsonrpc': '2.0', 'id': m['id'], 'result': {DISCOVER_RESULT}}})
"""
    )
    lines = stderr_of_a_start(bridge_command("--protocol", "2026-07-28", upstream=upstream))
    # The lines of the child in their order; the bridge's own lines come from other threads.
    assert [line for line in lines if not line.startswith(PREFIX)] == [
        "scripted: started\n",
        *(f"modern: line {n}\n" for n in range(40)),
    ]
    assert [line for line in lines if line.startswith(PREFIX)] == [
        START_MODERN.format(name=Path(sys.executable).name),
        PREFIX + "bridge: info: the upstream server speaks MCP 2026-07-28; the client MCP 2025-11-25, "
        "with the host profile vscode\n",
    ]


def test_what_a_server_writes_as_it_stops_during_server_discover_passes_unchanged() -> None:
    upstream = script(
        """
if m.get('method') == 'server/discover':
    for n in range(40):
        sys.stderr.write(f'crash: line {n}\\n')
    sys.exit(3)
"""
    )
    with Bridge(bridge_command("--protocol", "2026-07-28", upstream=upstream)) as bridge:
        assert "error" in bridge.initialize()
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    assert [line for line in bridge.stderr_lines if line.startswith("crash: ")] == [
        f"crash: line {n}\n" for n in range(40)
    ]
    assert "lines on stderr as it refused" not in bridge.stderr_text


def test_more_stderr_than_the_probe_holds_passes_and_the_rest_follows() -> None:
    upstream = script(
        """
if m.get('method') == 'server/discover':
    for n in range(1000):
        sys.stderr.write(f'{n:04d} ' + 'x' * 95 + '\\n')
    sys.stderr.flush()
    send({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': -32601, 'message': 'Method not found'}})
"""
    )
    lines = stderr_of_a_start(bridge_command("--protocol", "2026-07-28", upstream=upstream), answered=False)
    # 1000 lines of 100 bytes: more than the 64 KiB that wait, thus no line is counted away.
    assert [line[:4] for line in lines if line.endswith("x\n")] == [f"{n:04d}" for n in range(1000)]
    assert not any(REFUSED.fullmatch(line) for line in lines)


# ------------------------------------------------------------ the passthrough


def test_tools_prompts_and_resources_pass_unchanged(legacy_bridge: Bridge) -> None:
    names = {tool["name"] for tool in legacy_bridge.request("tools/list")["result"]["tools"]}
    assert {"add", "echo", "ask_name", "toggle", "progress", "slow", "cancelled"} <= names
    assert text_of(call(legacy_bridge, "add", {"a": 2, "b": 3})) == "5"
    assert text_of(call(legacy_bridge, "echo", {"text": "héllo ✓"})) == "héllo ✓"
    prompt = legacy_bridge.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
    assert prompt["result"]["messages"][0]["content"]["text"] == "Hello, Ada."
    contents = legacy_bridge.request("resources/read", {"uri": NOTES})["result"]["contents"]
    assert contents == [{"uri": NOTES, "mimeType": "text/plain", "text": "The notes of the legacy peer."}]
    assert legacy_bridge.request("ping")["result"] == {}
    unknown = legacy_bridge.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert unknown["result"]["isError"] is True


def _icon_sources(item: dict[str, Any]) -> list[str]:
    return [icon["src"] for icon in item.get("icons", [])]


def test_a_stdio_server_keeps_its_icons_and_a_url_server_keeps_only_data_icons(legacy_url: str) -> None:
    expected = {"stdio": [DATA_ICON, REMOTE_ICON], "url": [DATA_ICON]}
    for form, command in (
        ("stdio", bridge_command(upstream=legacy_command())),
        ("url", bridge_command(legacy_url)),
    ):
        with Bridge(command) as bridge:
            info = bridge.initialize()["result"]["serverInfo"]
            tools = bridge.request("tools/list")["result"]["tools"]
            echo = next(tool for tool in tools if tool["name"] == "echo")
            assert _icon_sources(info) == expected[form], form
            assert _icon_sources(echo) == expected[form], form


def test_an_elicitation_of_the_server_is_answered_by_the_client(legacy_bridge: Bridge) -> None:
    pending = legacy_bridge.request_async("tools/call", {"name": "ask_name", "arguments": {}})
    ask = legacy_bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    assert ask["id"].startswith("u-")
    assert ask["params"]["message"] == "Your name?"
    legacy_bridge.send(
        {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
    )
    assert text_of(legacy_bridge.wait_response(pending)) == "Hello, Ada."

    pending = legacy_bridge.request_async("tools/call", {"name": "ask_name", "arguments": {}})
    ask = legacy_bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
    legacy_bridge.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}})
    assert text_of(legacy_bridge.wait_response(pending)) == "No name: decline."


def test_a_roots_request_of_the_server_is_answered_by_the_client(legacy_bridge: Bridge) -> None:
    pending = legacy_bridge.request_async("tools/call", {"name": "roots", "arguments": {}})
    ask = legacy_bridge.wait_frame(lambda f: f.get("method") == "roots/list")
    legacy_bridge.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///w"}]}})
    assert text_of(legacy_bridge.wait_response(pending)) == "roots: file:///w"


def test_a_tool_list_change_reaches_the_client(legacy_bridge: Bridge) -> None:
    # Once the client asked for the list: a change of a list not asked for is dropped.
    assert "toggled" not in {tool["name"] for tool in legacy_bridge.request("tools/list")["result"]["tools"]}
    assert text_of(call(legacy_bridge, "toggle", {"enabled": True})) == "toggled: enabled"
    frame(legacy_bridge, lambda f: f.get("method") == "notifications/tools/list_changed")
    names = {tool["name"] for tool in legacy_bridge.request("tools/list")["result"]["tools"]}
    assert "toggled" in names


def test_progress_reaches_the_client_with_its_own_token(legacy_bridge: Bridge) -> None:
    response = call(legacy_bridge, "progress", {"count": 3}, _meta={"progressToken": "tok"})
    assert text_of(response) == "sent 3 progress notifications"
    progress = [f["params"] for f in legacy_bridge.seen if f.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert all(p["progressToken"] == "tok" for p in progress)
    assert progress[-1]["message"] == "Step 3 of 3"


def test_a_cancellation_of_the_client_reaches_the_server_and_gets_no_response(legacy_bridge: Bridge) -> None:
    params = {"name": "slow", "arguments": {"seconds": 60}, "_meta": {"progressToken": "slow"}}
    pending = legacy_bridge.request_async("tools/call", params)
    legacy_bridge.wait_frame(
        lambda f: f.get("method") == "notifications/progress" and f["params"]["progressToken"] == "slow"
    )
    legacy_bridge.notify("notifications/cancelled", {"requestId": pending, "reason": "the user stopped it"})
    assert text_of(call(legacy_bridge, "cancelled", {"at_least": 1})) == "1"
    assert not [f for f in legacy_bridge.seen if f.get("id") == pending and "method" not in f]


def test_subscriptions_and_log_levels_go_to_the_server(legacy_bridge: Bridge) -> None:
    assert legacy_bridge.request("resources/subscribe", {"uri": NOTES})["result"] == {}
    assert text_of(call(legacy_bridge, "touch", {"uri": NOTES})) == f"touched {NOTES}"
    updated = frame(legacy_bridge, lambda f: f.get("method") == "notifications/resources/updated")
    assert updated["params"] == {"uri": NOTES}
    assert legacy_bridge.request("logging/setLevel", {"level": "info"})["result"] == {}
    assert text_of(call(legacy_bridge, "log", {"text": "hello log"})) == "logged at info"
    message = frame(legacy_bridge, lambda f: f.get("method") == "notifications/message")
    assert message["params"]["level"] == "info" and message["params"]["data"] == "hello log"
    assert legacy_bridge.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602


def test_the_end_of_stdin_ends_a_passthrough_with_exit_0(legacy_bridge: Bridge) -> None:
    legacy_bridge.request_async("tools/call", {"name": "slow", "arguments": {"seconds": 60}})
    legacy_bridge.close_stdin()
    assert legacy_bridge.wait_exit(WAIT) == 0
