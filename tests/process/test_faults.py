"""Bad input from the upstream server, and faults of the upstream process.

The upstream here is ``tests/peers/bad_upstream.py``, a raw server that writes what a
correct server never would, or the fixture server when a real server is needed. Each
misbehavior either fails the one request it concerns with the error of the error table,
or is dropped with one log line (a warning, or a debug line for a late answer); after
each the bridge still serves (a ping and a good call), every stdout line is a valid
2025-11-25 frame, and the bridge exits 0 at the end of stdin with no traceback on stderr.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness import ROOT, WAIT, Bridge, bridge_command, fixture_command, text_of
from schema import validate_legacy_frame

BAD_UPSTREAM = Path(__file__).resolve().parents[1] / "peers" / "bad_upstream.py"
#: The line limit of the runs here: it also limits the upstream's lines.
MAX_LINE = 65536
#: The nesting limit of an upstream message (the root is level 1).
UPSTREAM_DEPTH = 200
GRACE = 2.0
#: The write timeout of the stdio transport: a send to a child that does not read fails after it.
WRITE_TIMEOUT = 10.0
#: What the line of a server that stopped during the start says to do.
ADVICE = "its own lines above say why; to see more, run its command in a terminal"


def bad_upstream(*args: str) -> list[str]:
    return [sys.executable, str(BAD_UPSTREAM), *args]


@contextmanager
def serving(*upstream_args: str, options: tuple[str, ...] = (), initialize: bool = True) -> Iterator[Bridge]:
    """A bridge in front of bad_upstream, at --log-level debug, initialized."""
    command = bridge_command(
        "--log-level",
        "debug",
        "--max-line-bytes",
        str(MAX_LINE),
        *options,
        upstream=bad_upstream(*upstream_args),
    )
    with Bridge(command) as bridge:
        if initialize:
            assert "result" in bridge.initialize()
        yield bridge


def call(
    bridge: Bridge, name: str, arguments: dict[str, Any] | None = None, timeout: float = WAIT
) -> dict[str, Any]:
    return bridge.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout=timeout)


def assert_serves(bridge: Bridge) -> None:
    assert bridge.request("ping")["result"] == {}
    assert text_of(call(bridge, "ok", {"text": "still here"})) == "still here"


def finish(bridge: Bridge, code: int = 0) -> str:
    """End stdin, check the exit code and every stdout line; return stderr."""
    bridge.close_stdin()
    assert bridge.wait_exit(2 * GRACE + 4) == code
    for raw in bridge.raw_lines:
        validate_legacy_frame(json.loads(raw))
    assert "Traceback" not in bridge.stderr_text
    return bridge.stderr_text


def error_of(response: dict[str, Any]) -> tuple[int, str]:
    assert "error" in response, response
    return response["error"]["code"], response["error"].get("data", {}).get("cause", "")


def children_of(pid: int) -> list[int]:
    """The child processes of ``pid`` (from every thread's ``children`` file), but the guardian
    of the upstream's process group (a ``/bin/sh`` named ``mcpbridge-guardian``)."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return [child for child in found if not _is_guardian(child)]


def _is_guardian(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"mcpbridge-guardian" in f.read().split(b"\0")
    except OSError:
        return False


def wait_gone(pid: int, timeout: float = WAIT) -> bool:
    """Wait until ``pid`` exits (its pidfd becomes readable)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- bad input of the upstream


def test_garbage_lines_of_the_upstream_get_one_warning_of_each_kind_and_a_count_and_the_call_completes() -> (
    None
):
    with serving() as bridge:
        assert text_of(call(bridge, "garbage")) == "garbage survived"
        assert_serves(bridge)
        stderr = finish(bridge)
    lines = stderr.splitlines()
    # "not json" first: 8 bytes; the three lines that are not JSON get one warning and a count.
    assert (
        "mcp-bridge-vscode: upstream: warning: the upstream server wrote a line of 8 bytes that is not "
        "valid JSON on stdout, and the bridge dropped it: the output of a server other than its messages "
        "belongs on stderr"
    ) in lines
    warning = "mcp-bridge-vscode: upstream: warning: "
    assert warning + "dropped lines that are not JSON since the last such line: 2 more" in lines
    # "[1,2,3]" first: 7 bytes; the four that are JSON but not messages likewise.
    assert (
        "mcp-bridge-vscode: upstream: warning: the upstream server wrote a message of 7 bytes that is not "
        "a valid JSON-RPC 2.0 message (the message is not an object), and the bridge dropped it"
    ) in lines
    assert warning + "dropped messages that are not valid since the last such line: 3 more" in lines
    assert len([line for line in lines if "that is not" in line or line.endswith(" more")]) == 4
    assert "not json" not in stderr and "a string" not in stderr


def test_answers_to_unknown_ids_are_dropped_with_one_warning_and_a_count() -> None:
    with serving() as bridge:
        assert text_of(call(bridge, "unknown_id")) == "unknown ids survived"
        assert_serves(bridge)
        stderr = finish(bridge)
    lines = stderr.splitlines()
    prefix = "mcp-bridge-vscode: upstream: warning: "
    assert prefix + "dropped a response with the id 424242: the bridge sent no request with that id" in lines
    assert "nobody" not in stderr  # the second one is counted
    assert prefix + "dropped responses to unknown ids since the last such line: 1 more" in lines
    assert (
        prefix + "dropped an error response without an id (error -32603): the upstream server could not "
        "tell which request it answers"
    ) in lines
    assert prefix + "dropped error responses without an id since the last such line: 1 more" in lines


@pytest.mark.parametrize(
    "value",
    [[], "a string", None, 5, {"resultType": "partial", "content": []}, {"resultType": 7}],
    ids=["array", "string", "null", "number", "unknown-result-type", "result-type-not-a-string"],
)
def test_a_result_of_the_wrong_shape_fails_only_its_request_with_invalid_response(value: Any) -> None:
    with serving() as bridge:
        response = call(bridge, "result", {"value": value})
        assert error_of(response) == (-32603, "invalid_response")
        assert response["error"]["data"]["detail"].startswith("tools/call: ")
        assert_serves(bridge)
        finish(bridge)


def test_an_input_required_result_that_is_not_valid_fails_with_invalid_input_request() -> None:
    with serving() as bridge:
        response = call(bridge, "result", {"value": {"resultType": "input_required", "inputRequests": [1]}})
        assert error_of(response) == (-32603, "invalid_input_request")
        assert_serves(bridge)
        finish(bridge)


def test_an_error_object_of_the_wrong_shape_fails_its_request_with_invalid_response() -> None:
    with serving() as bridge:
        assert error_of(call(bridge, "bad_error")) == (-32603, "invalid_response")
        assert_serves(bridge)
        finish(bridge)


@pytest.mark.parametrize("kind", ["nan", "surrogate", "utf8", "deep"])
def test_an_answer_that_is_not_valid_json_fails_its_request_with_invalid_response(kind: str) -> None:
    with serving() as bridge:
        # The wait of ``call`` (WAIT) is far below the time limit of the call: the answer
        # comes at once, not when the limit ends.
        response = call(bridge, "unparsable", {"kind": kind})
        assert error_of(response) == (-32603, "invalid_response")
        assert_serves(bridge)
        finish(bridge)


@pytest.mark.parametrize("id_last", [False, True])
def test_an_answer_over_the_line_limit_fails_its_request_with_response_too_large(id_last: bool) -> None:
    with serving() as bridge:
        response = call(bridge, "too_long", {"bytes": 2 * MAX_LINE, "id_last": id_last})
        assert error_of(response) == (-32603, "response_too_large")
        assert_serves(bridge)
        stderr = finish(bridge)
    assert "x" * 100 not in stderr


def test_a_line_over_the_limit_without_an_id_is_dropped_with_a_warning() -> None:
    with serving() as bridge:
        assert text_of(call(bridge, "too_long_anonymous", {"bytes": 3 * MAX_LINE})) == "long line survived"
        assert_serves(bridge)
        stderr = finish(bridge)
    assert "upstream: warning: dropped a line of " in stderr
    assert f"over the limit of {MAX_LINE} bytes from the upstream server" in stderr


def test_nesting_up_to_200_levels_passes_and_deeper_fails_its_request() -> None:
    # The message, its result and structuredContent: two levels before the nested value.
    with serving() as bridge:
        response = call(bridge, "deep", {"depth": UPSTREAM_DEPTH - 2})
        assert "result" in response
        depth, node = 0, response["result"]["structuredContent"]
        while isinstance(node, dict):
            depth, node = depth + 1, node["a"]
        assert depth == UPSTREAM_DEPTH - 2
        assert error_of(call(bridge, "deep", {"depth": UPSTREAM_DEPTH - 1})) == (-32603, "invalid_response")
        assert error_of(call(bridge, "deep", {"depth": 3000})) == (-32603, "invalid_response")
        assert_serves(bridge)
        finish(bridge)


def test_unknown_and_invalid_notifications_and_requests_of_the_upstream_never_reach_the_client() -> None:
    with serving() as bridge:
        bridge.request("logging/setLevel", {"level": "debug"})
        assert text_of(call(bridge, "notifications")) == "notifications survived"
        assert_serves(bridge)
        stderr = finish(bridge)
        assert not [frame for frame in bridge.seen + bridge.drain() if "method" in frame]
    lines = stderr.splitlines()
    warning = "mcp-bridge-vscode: upstream: warning: "
    assert (
        warning + "dropped the request sampling/createMessage of the upstream server: a server of "
        "revision 2026-07-28 sends none"
    ) in lines
    assert "upstream: debug: dropped a progress notification for no request in flight" in stderr
    # The two log messages that are not valid: one warning, one count.
    assert (
        "mcp-bridge-vscode: bridge: warning: dropped a notifications/message of the upstream server that "
        "is not valid (a level, the data and a string logger are needed)"
    ) in lines
    assert (
        "mcp-bridge-vscode: bridge: warning: dropped log messages that are not valid since the last such "
        "line: 1 more"
    ) in lines
    assert (
        warning
        + "the upstream server wrote a message of 86 bytes that is not a valid JSON-RPC 2.0 message "
        "(params is not an object), and the bridge dropped it"
    ) in lines
    assert "bridge: debug: dropped the notification notifications/unknown of the upstream server" in stderr
    assert "no level" not in stderr and "bad level" not in stderr


def test_a_second_answer_to_one_request_is_dropped_and_the_client_gets_the_first() -> None:
    with serving() as bridge:
        first = call(bridge, "double")
        assert text_of(first) == "first"
        assert_serves(bridge)
        stderr = finish(bridge)
        frames = bridge.seen + bridge.drain()
    assert [frame for frame in frames if frame.get("id") == first["id"]] == [first]
    assert "upstream: debug: dropped a response with the id " in stderr
    assert ": its request had ended (a time limit, a cancellation, an earlier answer)" in stderr


def test_a_canceled_call_gets_no_response_and_the_late_answer_of_the_upstream_is_dropped() -> None:
    with serving() as bridge:
        silent = bridge.request_async("tools/call", {"name": "silent", "arguments": {}})
        assert bridge.request("ping")["result"] == {}
        bridge.notify("notifications/cancelled", {"requestId": silent, "reason": "test"})
        assert_serves(bridge)  # the late answer came before the answers of these requests
        stderr = finish(bridge)
        frames = bridge.seen + bridge.drain()
    assert not [frame for frame in frames if frame.get("id") == silent]
    assert ": its request had ended (a time limit, a cancellation, an earlier answer)" in stderr


# --------------------------------------------------------------------------- faults of the upstream process


def test_an_upstream_command_that_does_not_exist_gives_spawn_failed_and_initialize_can_retry() -> None:
    command = bridge_command(upstream=["/nonexistent/mcp-server-7d2e", "--flag"])
    with Bridge(command) as bridge:
        for _ in range(2):
            response = bridge.initialize()
            assert error_of(response) == (-32603, "spawn_failed")
        assert bridge.request("ping")["result"] == {}
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    assert (
        "the upstream server did not start: mcp-server-7d2e: No such file or directory "
        f"(the path /nonexistent/mcp-server-7d2e; the working directory {ROOT})"
    ) in bridge.stderr_text
    assert "--flag" not in bridge.stderr_text


def test_an_upstream_that_exits_at_start_fails_initialize_and_the_bridge_goes_on() -> None:
    with serving("--exit-at-start", "3", initialize=False) as bridge:
        response = bridge.initialize()
        assert error_of(response) == (-32603, "stopped_at_start")
        assert response["error"]["data"]["detail"] == "initialize: the upstream server exited (code 3)"
        assert bridge.request("ping")["result"] == {}
        assert error_of(bridge.request("tools/list")) == (-32603, "not_connected")
        assert error_of(bridge.initialize()) == error_of(response)  # a new initialize tries again
        stderr = finish(bridge)
    # The client may try again and again: the second failure is counted, and told at the end.
    prefix = "mcp-bridge-vscode: bridge: error: "
    lines = stderr.splitlines()
    stopped = "the upstream server exited during initialize (code 3): " + ADVICE
    assert lines.count(prefix + stopped) == 1
    assert prefix + "failed starts of the upstream server since the last such line: 1 more" in lines


@pytest.mark.parametrize(
    ("upstream", "options", "line"),
    [
        (bad_upstream("--discover", "exit"), (), "exited during server/discover (code 4)"),
        (
            ["sh", "-c", "kill -9 $$"],
            ("--protocol", "2026-07-28"),
            "exited during server/discover (signal 9)",
        ),
        (["sh", "-c", "exit 3"], ("--protocol", "legacy"), "exited during initialize (code 3)"),
    ],
    ids=["exit-during-discover", "killed-during-discover", "exit-during-initialize"],
)
def test_an_upstream_that_stops_during_the_handshake_gets_one_error_line_with_its_exit(
    upstream: list[str], options: tuple[str, ...], line: str
) -> None:
    with Bridge(bridge_command(*options, upstream=upstream)) as bridge:
        response = bridge.initialize()
        assert error_of(response) == (-32603, "stopped_at_start")
        stderr = finish(bridge)
    errors = [text for text in stderr.splitlines() if ": error: " in text]
    assert errors == [f"mcp-bridge-vscode: bridge: error: the upstream server {line}: {ADVICE}"]


def test_an_upstream_that_never_answers_discover_gives_discover_failed_after_the_time_limit() -> None:
    options = ("--discover-timeout", "1", "--protocol", "2026-07-28")
    with serving("--discover", "silent", options=options, initialize=False) as bridge:
        started = time.monotonic()
        init = bridge.request_async(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
            },
        )
        # Meanwhile the reader answers what it answers itself.
        assert bridge.request("ping")["result"] == {}
        assert bridge.request("logging/setLevel", {"level": "info"})["result"] == {}
        held = bridge.request_async("tools/list")  # it waits for the answer to initialize
        assert error_of(bridge.request("server/discover")) == (-32601, "method_not_found")
        response = bridge.wait_response(init, WAIT)
        elapsed = time.monotonic() - started
        assert error_of(response) == (-32603, "discover_failed")
        assert response["error"]["data"]["detail"] == "no response in 1 s"
        assert elapsed >= 1.0  # the limit ran out; it did not fail before it
        assert error_of(bridge.wait_response(held)) == (-32603, "not_connected")
        finish(bridge)


#: The upstream command as is, and behind a shell that leaves a helper behind which holds the
#: server's stdout open (``sh -c 'helper & exec server'``): no end of the output comes then.
LAUNCHES = {
    "direct": fixture_command(),
    "helper-holds-stdout": ["/bin/sh", "-c", 'sleep 60 & exec "$0" "$@"', *fixture_command()],
}


@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_an_upstream_killed_with_sigkill_mid_call_fails_the_call_and_the_bridge_exits_1(launch: str) -> None:
    with Bridge(bridge_command(upstream=LAUNCHES[launch])) as bridge:
        bridge.initialize()
        (child,) = children_of(bridge.proc.pid)
        helpers = children_of(child)
        assert len(helpers) == (0 if launch == "direct" else 1)
        slow = bridge.request_async("tools/call", {"name": "slow", "arguments": {"ms": 60000}})
        assert bridge.request("ping")["result"] == {}
        os.kill(child, signal.SIGKILL)
        assert error_of(bridge.wait_response(slow)) == (-32603, "upstream_exited")
        assert bridge.wait_exit(2 * GRACE + 4) == 1  # with stdin still open
        assert wait_gone(child)
        assert all(wait_gone(helper) for helper in helpers), "the helper survived the bridge"
    assert "mcp-bridge-vscode: bridge: error: the upstream server exited with signal 9" in bridge.stderr_text
    for raw in bridge.raw_lines:
        validate_legacy_frame(json.loads(raw))


@pytest.mark.slow
def test_an_upstream_that_stops_reading_never_blocks_the_reader_and_requests_fail() -> None:
    """The pipe and the send queue fill; sends then fail after the write timeout, ping answers at once."""
    with serving(options=("--max-line-bytes", str(4 * 1024 * 1024))) as bridge:
        assert text_of(call(bridge, "stop_reading")) == "stopped reading"
        big = "z" * (1024 * 1024)
        ids = [
            bridge.request_async("tools/call", {"name": "ok", "arguments": {"text": big}}) for _ in range(24)
        ]
        started = time.monotonic()
        for _ in range(5):
            # A blocked reader would answer only after the whole write timeout.
            assert bridge.request("ping", timeout=WRITE_TIMEOUT / 2)["result"] == {}
        failed = [frame for frame in bridge.seen if frame.get("id") in ids]
        deadline = started + WRITE_TIMEOUT + WAIT
        while not failed and time.monotonic() < deadline:
            frame = bridge.next_frame(max(0.1, deadline - time.monotonic()))
            if frame.get("id") in ids:
                failed.append(frame)
        assert failed, "no request failed"
        assert error_of(failed[0]) == (-32603, "transport_failed")
        assert bridge.request("ping")["result"] == {}
        # The requests that wait in the queue end with a cancellation, and get no response.
        answered = {frame["id"] for frame in bridge.seen if frame.get("id") in ids}
        for request_id in ids:
            if request_id not in answered:
                bridge.notify("notifications/cancelled", {"requestId": request_id})
        assert bridge.request("ping")["result"] == {}
        bridge.close_stdin()
        assert bridge.wait_exit(2 * GRACE + WRITE_TIMEOUT) == 0
        frames = bridge.seen + bridge.drain()
    for frame in frames:
        if frame.get("id") in ids:
            assert error_of(frame) == (-32603, "transport_failed")
    assert big[:100] not in bridge.stderr_text


def test_sigterm_while_initialize_starts_the_upstream_stops_the_bridge_every_time() -> None:
    """The kernel may give SIGTERM to any thread; the main thread must still run its handler.

    A main thread that sleeps in a wait without a time limit never wakes to run it: about
    one SIGTERM in fifteen that comes while the child starts was lost that way, so twelve
    rounds find such a wait nearly every time.
    """
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "x", "version": "1"},
    }
    for _ in range(12):
        # A helper process of the child makes the start of the upstream as slow as a real one.
        with Bridge(bridge_command("--log-level", "debug", upstream=bad_upstream("--grandchild"))) as bridge:
            assert bridge.request("ping")["result"] == {}  # the SIGTERM handler is in place
            bridge.request_async("initialize", params)
            bridge.proc.send_signal(signal.SIGTERM)
            assert bridge.wait_exit(2 * GRACE + 2) == 0
            bridge.close_stdin()
