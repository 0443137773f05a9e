"""The text of a thread dump: a pure function of the threads, the state and ``now``."""

from __future__ import annotations

import dataclasses
from typing import Any

from mcpbridge.bridge.front.dumptext import (
    HELD,
    FrontendState,
    OutputState,
    PendingState,
    RequestState,
    SlotsState,
    StackFrame,
    ThreadStack,
    UpstreamState,
    format_dump,
)

NOW = 1000.0

READER = ThreadStack(
    name="mcpbridge-reader",
    native_id=41,
    main=False,
    daemon=True,
    frames=(
        StackFrame("/lib/threading.py", 1002, "_bootstrap", "self._bootstrap_inner()"),
        StackFrame("/pkg/framing.py", 93, "_read_line", "first = self._piece(limit)"),
    ),
)
MAIN = ThreadStack(
    name="MainThread",
    native_id=40,
    main=True,
    daemon=False,
    frames=(StackFrame("<frozen runpy>", 88, "_run_code", ""),),
    skipped=3,
)
UPSTREAM = UpstreamState("command", "MCP 2026-07-28", gone=False, exit_status=None, closed=False)


STATE = FrontendState(
    state="ready",
    slots=SlotsState(16, (RequestState(7, "tools/call", NOW - 2.5, "client"),)),
    output=OutputState(2, 1234, NOW - 1.25, closed=False),
    pending=PendingState((("b-2", NOW - 0.5, True), ("b-1", NOW - 2.0, False))),
    upstream=UPSTREAM,
)


def state(**parts: Any) -> FrontendState:
    return dataclasses.replace(STATE, **parts)


def test_a_dump_lists_the_connection_then_every_thread_main_first_with_its_stack() -> None:
    lines = format_dump([READER, MAIN], state(), now=NOW, pid=4321)
    assert lines == [
        "thread dump of process 4321: 2 threads",
        "connection: ready",
        "requests in flight: 1 of 16 slots busy, 15 free",
        "  request 7 (tools/call) for 2.5 s: waits for the client",
        "requests of the bridge to the client: 2",
        "  b-1: asked 2.0 s ago, no answer yet",
        "  b-2: asked 0.5 s ago, answered",
        "output: 2 frames, 1234 bytes wait for the client; nothing written for 1.2 s",
        "upstream: command, MCP 2026-07-28, alive",
        'thread "MainThread" (tid 40, main), most recent call last:',
        "  ... 3 outer frames left out",
        '  File "<frozen runpy>", line 88, in _run_code',
        'thread "mcpbridge-reader" (tid 41, daemon), most recent call last:',
        '  File "/pkg/framing.py", line 93, in _read_line',
        "    first = self._piece(limit)",
        "end of the thread dump",
    ]


def test_the_frames_that_start_a_thread_are_left_out_and_the_waits_of_threading_kept() -> None:
    frames = (
        StackFrame("/lib/threading.py", 1002, "_bootstrap", "self._bootstrap_inner()"),
        StackFrame("C:\\Python\\Lib\\threading.py", 1045, "_bootstrap_inner", "self.run()"),
        StackFrame("/lib/threading.py", 982, "run", "self._target(*self._args, **self._kwargs)"),
        StackFrame("/pkg/notify.py", 170, "_run", "command = self._commands.get(timeout=timeout)"),
        StackFrame("/lib/threading.py", 331, "wait", "gotit = waiter.acquire(True, timeout)"),
    )
    owner = dataclasses.replace(READER, name="mcpbridge-listen-owner", frames=frames)
    lines = format_dump([owner], None, now=NOW, pid=1)
    head = lines.index('thread "mcpbridge-listen-owner" (tid 41, daemon), most recent call last:')
    assert lines[head + 1 :] == [
        '  File "/pkg/notify.py", line 170, in _run',
        "    command = self._commands.get(timeout=timeout)",
        '  File "/lib/threading.py", line 331, in wait',
        "    gotit = waiter.acquire(True, timeout)",
        "end of the thread dump",
    ]


def test_the_ages_come_from_the_now_given() -> None:
    later = format_dump([], state(), now=NOW + 60, pid=1)
    assert "  request 7 (tools/call) for 62.5 s: waits for the client" in later
    assert "  b-1: asked 62.0 s ago, no answer yet" in later


def test_the_requests_in_flight_come_oldest_first_with_an_id_of_any_type() -> None:
    requests = (
        RequestState("late-one", "prompts/get", NOW - 1, "upstream"),
        RequestState(3, "resources/read", NOW - 9, "upstream"),
    )
    lines = format_dump([], state(slots=SlotsState(4, requests)), now=NOW, pid=1)
    start = lines.index("requests in flight: 2 of 4 slots busy, 2 free")
    assert lines[start + 1 : start + 3] == [
        "  request 3 (resources/read) for 9.0 s: waits for the upstream",
        "  request late-one (prompts/get) for 1.0 s: waits for the upstream",
    ]


def test_a_part_whose_lock_stayed_held_says_so() -> None:
    lines = format_dump([], state(slots=None, output=None, pending=None), now=NOW, pid=1)
    assert f"requests in flight: {HELD}" in lines
    assert f"requests of the bridge to the client: {HELD}" in lines
    assert f"output: {HELD}" in lines


def test_the_output_when_idle_and_when_closed() -> None:
    idle = format_dump([], state(output=OutputState(0, 0, None, closed=False)), now=NOW, pid=1)
    assert "output: 0 frames, 0 bytes wait for the client" in idle
    closed = format_dump([], state(output=OutputState(0, 0, None, closed=True)), now=NOW, pid=1)
    assert "output: closed" in closed


def test_the_upstream_is_not_connected_alive_closed_or_lost() -> None:
    def upstream_line(upstream: UpstreamState | None) -> str:
        lines = format_dump([], state(upstream=upstream), now=NOW, pid=1)
        return next(line for line in lines if line.startswith("upstream:"))

    assert upstream_line(None) == "upstream: not connected"
    assert upstream_line(UPSTREAM) == "upstream: command, MCP 2026-07-28, alive"
    url = UpstreamState("url", "MCP 2025-06-18, passed through", gone=False, exit_status=None, closed=True)
    assert upstream_line(url) == "upstream: url, MCP 2025-06-18, passed through, closed"
    lost = UpstreamState("command", "MCP 2026-07-28", gone=True, exit_status="code 3", closed=True)
    assert upstream_line(lost) == "upstream: command, MCP 2026-07-28, lost (code 3)"


def test_without_a_connection_the_dump_has_the_threads_only() -> None:
    unnamed = ThreadStack("thread 0x7f", native_id=None, main=False, daemon=False, frames=())
    assert format_dump([unnamed], None, now=NOW, pid=9) == [
        "thread dump of process 9: 1 threads",
        'thread "thread 0x7f" (tid unknown), most recent call last:',
        "end of the thread dump",
    ]


def test_a_long_id_or_method_is_cut() -> None:
    request = RequestState("x" * 500, "m" * 500, NOW, "upstream")
    lines = format_dump([], state(slots=SlotsState(1, (request,))), now=NOW, pid=1)
    (line,) = [line for line in lines if line.startswith("  request ")]
    assert len(line) < 200
