"""The slots of the front end: admission, slot threads, and their retirement after a rest."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest

from conftest import WAIT
from mcpbridge.bridge.front import slots as slots_module
from mcpbridge.bridge.front.output import Output, Slot
from mcpbridge.bridge.front.slots import Slots
from mcpbridge.mcp.droplog import DropLog
from mcpbridge.mcp.jsonrpc import Request


def slot_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mcpbridge-slot")]


@pytest.fixture
def slots() -> Iterator[Slots]:
    made = Slots(Output(io.BytesIO()), limit=8, drops=DropLog(logging.getLogger("mcpbridge.bridge")))
    yield made
    made.close()


def run_burst(slots: Slots, count: int, first_id: int = 0) -> None:
    """Run ``count`` requests at once: each waits until all are on their threads."""
    barrier = threading.Barrier(count + 1)
    ended = threading.Semaphore(0)

    def work(slot: Slot, request: Request) -> None:
        barrier.wait(WAIT)
        ended.release()

    for n in range(count):
        request = Request(first_id + n, "tools/call", {})
        slot = slots.admit(request)
        assert slot is not None
        slots.submit(slot, request, work)
    barrier.wait(WAIT)
    for _ in range(count):
        assert ended.acquire(timeout=WAIT)


def test_the_slot_threads_of_a_burst_end_after_a_rest_and_a_new_request_starts_one(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = len(slot_threads())
    run_burst(slots, 6)
    assert slots.wait_empty(WAIT)
    assert len(slot_threads()) == before + 6
    # Not yet: the connection has not rested for RETIRE_AFTER seconds.
    assert slots.retire_idle() is False
    assert len(slot_threads()) == before + 6
    monkeypatch.setattr(slots_module, "RETIRE_AFTER", 0.0)
    assert slots.retire_idle() is True
    assert len(slot_threads()) == before  # joined, not only told to end
    assert slots.retire_idle() is False  # nothing ran since: nothing to retire
    run_burst(slots, 2, first_id=100)
    assert slots.wait_empty(WAIT)
    assert len(slot_threads()) == before + 2


def test_the_slot_threads_stay_while_a_request_is_in_flight(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slots_module, "RETIRE_AFTER", 0.0)
    started, finish = threading.Event(), threading.Event()

    def work(slot: Slot, request: Request) -> None:
        started.set()
        finish.wait(WAIT)

    request = Request(1, "tools/call", {})
    slot = slots.admit(request)
    assert slot is not None
    slots.submit(slot, request, work)
    assert started.wait(WAIT)
    assert slots.retire_idle() is False
    finish.set()
    assert slots.wait_empty(WAIT)
    assert slots.retire_idle() is True


def test_a_closed_front_end_retires_nothing_and_refuses_new_work(
    slots: Slots, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slots_module, "RETIRE_AFTER", 0.0)
    run_burst(slots, 1)
    assert slots.wait_empty(WAIT)
    slots.close()
    assert slots.retire_idle() is False
    request = Request(5, "tools/call", {})
    slot = slots.admit(request)
    assert slot is not None
    ran = threading.Event()
    slots.submit(slot, request, lambda s, r: ran.set())
    assert slots.get(5) is None  # released at once: the executor is shut down
    assert not ran.is_set()
