"""The bridge as a process: exit codes, the loss of the upstream, the end of stdin, stderr."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess

import pytest

from harness import WAIT, Bridge, bridge_command, fixture_command, text_of

GRACE = 2.0
LINE = re.compile(r"^mcp-bridge-vscode: [a-z]+: (error|warning|info|debug): ")


def wait_gone(pid: int, timeout: float = WAIT) -> bool:
    """Wait until the process ``pid`` exits (a pidfd becomes readable); tell whether it did."""
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


def is_guardian(pid: int) -> bool:
    """The guardian of the upstream's process group (a ``/bin/sh`` named ``mcpbridge-guardian``)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"mcpbridge-guardian" in f.read().split(b"\0")
    except OSError:
        return False


def upstream_pid(bridge: Bridge) -> int:
    out = subprocess.run(
        ["pgrep", "-P", str(bridge.proc.pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    upstream = [pid for pid in out if not is_guardian(int(pid))]
    assert len(upstream) == 1, out
    return int(upstream[0])


def test_version_and_help_go_to_stdout_with_exit_0() -> None:
    version = subprocess.run(bridge_command("--version"), capture_output=True, text=True, timeout=WAIT)
    assert (version.returncode, version.stdout) == (0, "mcp-bridge-vscode 0.1.0\n")
    help_ = subprocess.run(bridge_command("--help"), capture_output=True, text=True, timeout=WAIT)
    assert help_.returncode == 0 and help_.stdout.lstrip().startswith("Usage: mcp-bridge-vscode ")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--bogus", "--", "x"],
        ["--name"],
        ["--name", "--", "x"],
        ["--log-level", "error", "--", "x"],
        ["--discover-timeout", "-1", "--", "x"],
        ["--max-line-bytes", "0", "--", "x"],
        ["--insecure", "--", "x"],
        ["--allow-http", "--", "x"],
        ["--"],
        ["not-a-url"],
        ["--header", "X-A:1", "--", "x"],
        ["--help=yes"],
        ["http://example.com/mcp"],
    ],
)
def test_invalid_arguments_exit_2_with_a_tagged_diagnostic_and_empty_stdout(argv: list[str]) -> None:
    done = subprocess.run(bridge_command(*argv), capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("mcp-bridge-vscode: vscode: error: ")


def test_the_end_of_stdin_during_a_slow_call_exits_0_in_bounded_time_and_stops_the_child() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        child = upstream_pid(bridge)
        slow = bridge.request_async("tools/call", {"name": "slow", "arguments": {"ms": 60000}})
        bridge.request("ping")
        bridge.close_stdin()
        assert bridge.wait_exit(2 * GRACE + 4) == 0
        bridge.drain()
        answers = [f for f in bridge.seen if f.get("id") == slow and "method" not in f]
        assert [answer["error"]["data"] for answer in answers] == [{"cause": "input_ended"}]
        assert wait_gone(child)


def test_an_upstream_crash_fails_requests_in_flight_and_exits_1_with_stdin_open() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        slow = bridge.request_async("tools/call", {"name": "slow", "arguments": {"ms": 60000}})
        bridge.request("tools/call", {"name": "crash", "arguments": {"after_ms": 100}})
        error = bridge.wait_response(slow, WAIT)["error"]
        assert error["code"] == -32603 and error["data"]["cause"] == "upstream_exited"
        assert bridge.wait_exit(WAIT) == 1
        assert (
            "mcp-bridge-vscode: bridge: error: the upstream server exited with code 3" in bridge.stderr_text
        )


def test_an_upstream_killed_by_a_signal_is_reported_with_the_signal() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        os.kill(upstream_pid(bridge), 9)
        assert bridge.wait_exit(WAIT) == 1
        assert "the upstream server exited with signal 9" in bridge.stderr_text


def test_an_upstream_that_closes_stdout_but_runs_fails_initialize_and_is_stopped() -> None:
    with Bridge(
        bridge_command("--discover-timeout", "1", upstream=fixture_command("--close-stdout"))
    ) as bridge:
        error = bridge.initialize()["error"]
        assert error["code"] == -32603
        bridge.close_stdin()
        assert bridge.wait_exit(2 * GRACE + 4) == 0


def test_debug_logs_are_tagged_and_carry_no_content() -> None:
    secret = "CONTENT-MARKER-41c9"
    with Bridge(bridge_command("--log-level", "debug", upstream=fixture_command())) as bridge:
        bridge.initialize()
        response = bridge.request("tools/call", {"name": "echo", "arguments": {"text": secret}})
        assert text_of(response) == secret
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
    for raw in bridge.raw_lines:
        assert json.loads(raw)["jsonrpc"] == "2.0"
    bridge_lines = [line for line in bridge.stderr_lines if line.startswith("mcp-bridge-vscode")]
    assert bridge_lines and all(LINE.match(line) for line in bridge_lines)
    assert secret not in bridge.stderr_text
    assert re.search(
        r"upstream request \d+ \(tools/call, round 1 of client request 2\): response after ",
        bridge.stderr_text,
    )


def test_sigterm_stops_the_bridge_and_its_child() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        child = upstream_pid(bridge)
        bridge.proc.terminate()
        assert bridge.wait_exit(2 * GRACE + 4) == 0
        assert wait_gone(child)


def test_sigkill_of_the_bridge_still_stops_its_child() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        bridge.initialize()
        child = upstream_pid(bridge)
        bridge.proc.kill()
        bridge.wait_exit()
        assert wait_gone(child)
