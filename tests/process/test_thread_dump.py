"""SIGUSR1 makes the real bridge write a thread dump to stderr while a call is in flight.

The dump is one block: every thread by name with its stack, the request in flight
with its method and id, the bridge's requests to the client, the bytes that wait for
the client and the upstream's form and state. It holds no content of a message and
no secret, and the call then completes as if nothing happened.
"""

from __future__ import annotations

import signal
import sys
import threading

import pytest

from harness import WAIT, Bridge, bridge_command, fixture_command, text_of
from peers.scripted_http import Exchange, ScriptedServer, default_script

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGUSR1 is POSIX")

CONTENT_MARKER = "MCPB-SECRET-dump-content-6a2f"
PATH_SECRET = "MCPB-SECRET-dump-path-1c7d"
QUERY_SECRET = "MCPB-SECRET-dump-query-93e0"
HEADER_SECRET = "MCPB-SECRET-dump-header-5f48"
TAG = "mcp-bridge-vscode: dump: info: "
#: The threads of a front end that serves a call, in every form.
SERVING_THREADS = ("MainThread", "mcpbridge-dump", "mcpbridge-reader", "mcpbridge-watcher")


def dump_of(bridge: Bridge) -> list[str]:
    """Ask for a thread dump; its lines without the tag, once the whole block is there."""
    start = len(bridge.stderr_lines)
    bridge.proc.send_signal(signal.SIGUSR1)
    end = bridge.wait_stderr(f"{TAG}end of the thread dump")
    block = bridge.stderr_lines[start : end + 1]
    first = next(index for index, line in enumerate(block) if line.startswith(f"{TAG}thread dump of process"))
    lines = block[first:]
    assert all(line.startswith(TAG) for line in lines), "the dump is not one block"
    return [line[len(TAG) :].rstrip("\n") for line in lines]


def thread_names(lines: list[str]) -> set[str]:
    return {line.split('"')[1] for line in lines if line.startswith('thread "')}


def test_sigusr1_dumps_the_threads_and_the_call_waiting_for_the_client_which_then_completes() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        params = {"name": "ask_form", "arguments": {}, "_meta": {"progressToken": CONTENT_MARKER}}
        call = bridge.request_async("tools/call", params)
        asked = bridge.wait_frame(lambda frame: frame.get("method") == "elicitation/create")
        lines = dump_of(bridge)
        assert lines[0] == f"thread dump of process {bridge.proc.pid}: {len(thread_names(lines))} threads"
        assert "connection: ready" in lines
        assert any(line.startswith(f"  request {call} (tools/call) for ") for line in lines)
        assert any(line.endswith(": waits for the client") for line in lines)
        assert any(
            line.startswith(f"  {asked['id']}: asked ") and line.endswith("no answer yet") for line in lines
        )
        assert any(line.startswith("output: 0 frames, 0 bytes wait for the client") for line in lines)
        assert "upstream: command, MCP 2026-07-28, alive" in lines
        names = thread_names(lines)
        assert set(SERVING_THREADS) | {"mcpbridge-upstream-reader", "mcpbridge-upstream-timer"} <= names
        # No stack starts with the frames of threading that start every thread.
        assert not [line for line in lines if line.endswith((" in _bootstrap", " in _bootstrap_inner"))]
        assert sum(line.startswith("  File ") for line in lines) > len(names)
        assert any(name.startswith("mcpbridge-slot") for name in names)
        dumped = "\n".join(lines)
        assert CONTENT_MARKER not in dumped and "Tell us about you" not in dumped
        # The serving went on: the client answers the form and the call completes.
        answer = {"action": "accept", "content": {"name": "Ada", "age": 36}}
        bridge.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
        assert text_of(bridge.wait_response(call)) == 'form: accept {"name":"Ada","age":36}'
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    assert CONTENT_MARKER not in bridge.stderr_text


def test_the_dump_of_the_url_form_shows_no_secret_of_the_url_or_its_headers() -> None:
    arrived = threading.Event()

    def handler(ex: Exchange) -> None:
        if ex.request.rpc_method == "tools/call" and ex.request.params.get("name") == "hold":
            arrived.set()
            ex.wait_released()
            ex.text_result("held, then done")
            return
        default_script(ex)

    with ScriptedServer(handler) as server:
        url = server.url(path=f"/mcp/{PATH_SECRET}?key={QUERY_SECRET}")
        command = bridge_command("--header-env", "X-Api-Key=MCPB_TEST_DUMP_KEY", url)
        with Bridge(command, env={"MCPB_TEST_DUMP_KEY": HEADER_SECRET}) as bridge:
            bridge.initialize()
            call = bridge.request_async("tools/call", {"name": "hold", "arguments": {"text": CONTENT_MARKER}})
            assert arrived.wait(WAIT)
            lines = dump_of(bridge)
            assert any(line.startswith(f"  request {call} (tools/call) for ") for line in lines)
            assert any(line.endswith(": waits for the upstream") for line in lines)
            assert "upstream: url, MCP 2026-07-28, alive" in lines
            assert set(SERVING_THREADS) <= thread_names(lines)
            server.release.set()
            assert text_of(bridge.wait_response(call)) == "held, then done"
            bridge.close_stdin()
            assert bridge.wait_exit() == 0
        assert server.received[-1].target.endswith(f"/mcp/{PATH_SECRET}?key={QUERY_SECRET}")
        assert server.received[-1].header("X-Api-Key") == HEADER_SECRET
    for secret in (PATH_SECRET, QUERY_SECRET, HEADER_SECRET, CONTENT_MARKER, str(server.port)):
        assert secret not in "\n".join(lines), secret
    for secret in (PATH_SECRET, QUERY_SECRET, HEADER_SECRET, CONTENT_MARKER):
        assert secret not in bridge.stderr_text, secret


def test_the_embedded_bridge_dumps_its_front_end_too() -> None:
    command = [sys.executable, "-m", "mcpbridge.examples.notes_server"]
    with Bridge(command) as bridge:
        bridge.initialize()
        arguments = {"text": CONTENT_MARKER, "seconds": 3600}
        params = {"name": "remind", "arguments": arguments, "_meta": {"progressToken": "reminder"}}
        call = bridge.request_async("tools/call", params)
        bridge.wait_frame(lambda frame: frame.get("method") == "notifications/progress")  # in flight
        lines = dump_of(bridge)
        assert any(line.startswith(f"  request {call} (tools/call) for ") for line in lines)
        assert "upstream: in-process, MCP 2026-07-28, alive" in lines
        assert {"MainThread", "mcpbridge-dump", "mcpbridge-reader"} <= thread_names(lines)
        assert CONTENT_MARKER not in "\n".join(lines)
        bridge.notify("notifications/cancelled", {"requestId": call})
        assert bridge.request("ping")["result"] == {}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0


def test_the_dump_of_a_2025_era_server_shows_its_request_to_the_client_and_the_call_waiting_for_it() -> None:
    """A passed-through server asks the client in the middle of a call (``u-`` ids): the call waits
    for the client, and the server's request counts among the requests to the client."""
    from conftest import REPO_ROOT

    peer = [sys.executable, str(REPO_ROOT / "tests" / "peers" / "py_modern_stdio_server.py")]
    with Bridge(bridge_command("--protocol", "legacy", upstream=peer)) as bridge:
        bridge.initialize()
        call = bridge.request_async("tools/call", {"name": "ask_name_2025", "arguments": {}})
        asked = bridge.wait_frame(lambda frame: frame.get("method") == "elicitation/create")
        assert asked["id"] == "u-1"
        lines = dump_of(bridge)
        [request] = [line for line in lines if line.startswith(f"  request {call} (tools/call) for ")]
        assert request.endswith(": waits for the client")
        assert "requests of the bridge to the client: 1" in lines
        assert any(line.startswith("  u-1: asked ") and line.endswith("no answer yet") for line in lines)
        assert any(line.startswith("upstream: command, MCP 2025-") for line in lines)
        # Once the client answers, the call waits for the server again, and completes.
        bridge.send({"jsonrpc": "2.0", "id": "u-1", "result": {"action": "decline"}})
        assert "decline" in text_of(bridge.wait_response(call))
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
