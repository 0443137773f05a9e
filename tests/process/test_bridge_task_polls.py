"""The bridge reads a task no more often than its ``pollIntervalMs`` asks, also around the
acknowledgment of the listen stream that carries it.

The server (``tests/peers/task_server.py``) records the moment each ``tasks/get`` arrives.
The task ``until_cancelled`` changes nothing after its start. The first read comes at the
poll interval; the listen stream of the task is acknowledged meanwhile, and the bridge reads
the task once more to catch up with what no stream carried. That read, too, waits the
interval; then the stream carries the task, and the bridge reads it only rarely.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness import Bridge, bridge_command
from peers import running_task_http_server, task_server_command

pytestmark = pytest.mark.slow

POLL_MS = 300
#: A client that uses tasks itself (the native mode); without it, the bridge answers a plain
#: call with the result of the task (the transparent mode).
TASKS_CAPABILITIES = {"tasks": {"list": {}, "cancel": {}, "requests": {}}}
#: The gaps are measured on the server: the delivery of two requests may differ by this much.
TOLERANCE = 0.05


#: How long the server waits for the second read: when the listen stream of the task is
#: acknowledged before the first read, the stream carries the task and the next read comes only
#: after the bridge's long poll of a watched task (30 s).
READS_WAIT = 40.0


def server_events(bridge: Bridge, name: str, count: int) -> list[str]:
    arguments = {"name": name, "count": count, "wait": READS_WAIT}
    params = {"name": "events", "arguments": arguments}
    response = bridge.request("tools/call", params, timeout=READS_WAIT + 10)
    seen: list[str] = response["result"]["structuredContent"]["events"]
    return seen


@pytest.mark.parametrize("mode", ["transparent", "native"])
@pytest.mark.parametrize("form", ["stdio", "http"])
def test_no_two_reads_of_a_task_are_closer_than_its_poll_interval(form: str, mode: str) -> None:
    native = mode == "native"
    if form == "http":
        with running_task_http_server() as url:
            gaps = run(bridge_command(url), native=native)
    else:
        gaps = run(bridge_command(upstream=task_server_command()), native=native)
    assert gaps, "the server saw fewer than two reads of the task"
    assert min(gaps) >= POLL_MS / 1000 - TOLERANCE, gaps


def run(command: list[str], *, native: bool) -> list[float]:
    """Start the task through the bridge; the gaps between its first reads, in seconds."""
    with Bridge(command) as bridge:
        assert "result" in bridge.initialize(TASKS_CAPABILITIES if native else None)
        params: dict[str, Any] = {"name": "until_cancelled", "arguments": {"poll_ms": POLL_MS}}
        if native:
            params["task"] = {"ttl": 60000}
        bridge.request_async("tools/call", params)
        seen = server_events(bridge, "polled ", 2)
        task_id = [event.split()[2] for event in seen if event.startswith("created until_cancelled ")][-1]
        assert [event for event in seen if event.startswith("listen ") and task_id in event], (
            "the bridge opened no listen stream for the task"
        )
        moments = [float(event.split()[2]) for event in seen if event.startswith(f"polled {task_id} ")]
    return [later - earlier for earlier, later in zip(moments, moments[1:], strict=False)]
