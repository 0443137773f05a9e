"""The front end in this process over the memory link, with forced thread interleavings.

Each handler of the server waits on an Event of the test, so a request is held
at a known point while the test acts: what the bridge does then is not left to
the timing of the threads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from harness import WAIT, FrontendPair, text_of
from mcpbridge.mcp.server import Server


class Gates:
    """One started/release pair of Events for each tag of the gated tool."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[str, threading.Event] = {}
        self._release: dict[str, threading.Event] = {}
        self.saw_cancel: dict[str, threading.Event] = {}

    def _get(self, table: dict[str, threading.Event], tag: str) -> threading.Event:
        with self._lock:
            return table.setdefault(tag, threading.Event())

    def started(self, tag: str) -> threading.Event:
        return self._get(self._started, tag)

    def release(self, tag: str) -> threading.Event:
        return self._get(self._release, tag)

    def cancelled(self, tag: str) -> threading.Event:
        return self._get(self.saw_cancel, tag)


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture
def pair(gates: Gates) -> Iterator[FrontendPair]:
    server = Server("in-process", "1.0.0", shutdown_grace=0.5)

    @server.tool("gated")
    def gated(ctx: Any, tag: str) -> str:
        """Wait until the test releases ``tag``, or until the request is canceled."""
        gates.started(tag).set()
        release = gates.release(tag)
        if ctx.cancel.wait(0) or not release.wait(0):
            remove = ctx.cancel.add_callback(release.set)
            try:
                release.wait(WAIT)
            finally:
                remove()
        if ctx.cancel.cancelled:
            gates.cancelled(tag).set()
        return f"released {tag}"

    frontend_pair = FrontendPair(server)
    try:
        yield frontend_pair
    finally:
        if frontend_pair.ended is None:
            frontend_pair.close()


def call(pair: FrontendPair, request_id: int, tag: str) -> None:
    pair.request(request_id, "tools/call", {"name": "gated", "arguments": {"tag": tag}})


def test_the_later_call_answers_first_when_its_upstream_work_ends_first(
    pair: FrontendPair, gates: Gates
) -> None:
    pair.initialize()
    call(pair, 1, "slow")
    call(pair, 2, "fast")
    assert gates.started("slow").wait(WAIT)
    assert gates.started("fast").wait(WAIT)
    gates.release("fast").set()
    assert text_of(pair.response(2)) == "released fast"
    assert not any(frame.get("id") == 1 for frame in pair.seen)
    gates.release("slow").set()
    assert text_of(pair.response(1)) == "released slow"


def test_a_cancellation_while_the_upstream_works_reaches_it_and_gets_no_response(
    pair: FrontendPair, gates: Gates
) -> None:
    pair.initialize()
    call(pair, 1, "held")
    assert gates.started("held").wait(WAIT)
    pair.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert gates.cancelled("held").wait(WAIT), "the upstream handler never saw the cancellation"
    pair.request(2, "ping")
    assert pair.response(2)["result"] == {}
    frames = pair.close()
    assert not [frame for frame in frames if frame.get("id") == 1 and "method" not in frame]
