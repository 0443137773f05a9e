"""The thread dump in this process: the stacks of the threads, the one block on a stream,
and the state that a front end gives of itself while a call waits for the client."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator

import pytest

from fixtures.fixture_server import build
from harness import WAIT, FrontendPair, text_of
from mcpbridge import log
from mcpbridge.bridge.front import dump
from mcpbridge.bridge.front.dumptext import FrontendState, ThreadStack

NAME_SECRET = "MCPB-SECRET-thread-4b1e"


def parked_in_a_known_function(started: threading.Event, release: threading.Event) -> None:
    started.set()
    release.wait(WAIT)


@pytest.fixture
def parked() -> Iterator[threading.Thread]:
    """A thread of the test that waits in :func:`parked_in_a_known_function` until the end."""
    started, release = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=parked_in_a_known_function, args=(started, release), name="test-parked", daemon=True
    )
    thread.start()
    assert started.wait(WAIT)
    yield thread
    release.set()
    thread.join(WAIT)


def test_the_stacks_name_every_thread_and_show_where_it_waits(parked: threading.Thread) -> None:
    stacks = {stack.name: stack for stack in dump.thread_stacks()}
    assert stacks["test-parked"].native_id == parked.native_id
    assert stacks["test-parked"].daemon and not stacks["test-parked"].main
    functions = [frame.function for frame in stacks["test-parked"].frames]
    assert "parked_in_a_known_function" in functions
    assert stacks["MainThread"].main
    here = stacks["MainThread"].frames[-1]
    assert here.function == "thread_stacks" and "extract_stack" in here.source


def test_the_outer_frames_over_the_limit_are_counted_not_shown() -> None:
    def deeper(levels: int) -> list[ThreadStack]:
        return deeper(levels - 1) if levels else dump.thread_stacks(limit=5)

    (main,) = [stack for stack in deeper(30) if stack.main]
    assert [frame.function for frame in main.frames] == ["deeper"] * 4 + ["thread_stacks"]
    assert main.skipped >= 27  # the other calls of deeper, and the test's callers


class Writes(io.BytesIO):
    """A stream that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        return super().write(data)


def test_a_dump_is_one_write_of_tagged_lines_with_the_secrets_replaced(parked: threading.Thread) -> None:
    log.add_secret(NAME_SECRET)
    parked.name = f"test-parked {NAME_SECRET}"
    stream = Writes()
    dump.write_dump(lambda _wait: None, stream)
    assert stream.writes == 1
    lines = stream.getvalue().decode().splitlines()
    assert all(line.startswith("mcp-bridge-vscode: dump: info: ") for line in lines)
    assert lines[0].endswith(" threads")
    assert lines[-1] == "mcp-bridge-vscode: dump: info: end of the thread dump"
    assert 'mcp-bridge-vscode: dump: info: thread "test-parked [secret]" (tid ' in "\n".join(lines)
    assert NAME_SECRET not in stream.getvalue().decode()


def test_a_front_end_describes_a_call_that_waits_for_the_client_and_a_lock_that_stays_held() -> None:
    pair = FrontendPair(build())
    try:
        pair.initialize()
        pair.request(5, "tools/call", {"name": "ask_form", "arguments": {}})
        asked = pair.next_frame()
        while "id" not in asked:  # a notification of the listen stream may come first
            asked = pair.next_frame()
        assert asked["method"] == "elicitation/create"
        state = pair.frontend.describe(WAIT)
        assert isinstance(state, FrontendState)
        assert state.state == "ready"
        assert state.slots is not None and state.slots.limit == pair.frontend.options.max_in_flight
        ((request_id, method, waiting_for),) = [
            (request.id, request.method, request.waiting_for) for request in state.slots.requests
        ]
        assert (request_id, method, waiting_for) == (5, "tools/call", "client")
        assert state.pending is not None
        assert [(entry[0], entry[2]) for entry in state.pending.entries] == [(asked["id"], False)]
        assert state.output is not None and not state.output.closed
        assert state.upstream is not None
        assert (state.upstream.form, state.upstream.era) == ("in-process", "MCP 2026-07-28")
        assert not state.upstream.gone and not state.upstream.closed
        with pair.frontend.slots._lock:  # a thread stuck with the lock of the slots
            held = pair.frontend.describe(0.05)
        assert held.slots is None and held.pending is not None and held.output is not None
        answer = {"action": "accept", "content": {"name": "Ada", "age": 36}}
        pair.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
        assert text_of(pair.response(5)).startswith("form: accept")
        assert pair.frontend.slots.wait_empty(WAIT)
        after = pair.frontend.describe(WAIT)
        assert after.slots is not None and after.slots.requests == ()
        assert after.pending is not None and after.pending.entries == ()
    finally:
        pair.close()
