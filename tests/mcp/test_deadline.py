"""The one deadline of every bounded wait: the time left, expiry, and waits that say if they ended in time."""

from __future__ import annotations

import threading

from mcpbridge.mcp.deadline import Deadline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_remaining_time_counts_down_and_never_goes_below_zero() -> None:
    clock = Clock()
    deadline = Deadline(5.0, clock=clock)
    assert deadline.remaining == 5.0 and not deadline.expired
    clock.now += 2.0
    assert deadline.remaining == 3.0
    assert deadline.at_most(1.0) == 1.0 and deadline.at_most(10.0) == 3.0
    clock.now += 4.0
    assert deadline.remaining == 0.0 and deadline.expired


def test_no_deadline_never_expires() -> None:
    deadline = Deadline(None)
    assert deadline.remaining == float("inf") and not deadline.expired


def test_a_wait_after_the_deadline_says_so_without_waiting() -> None:
    clock = Clock()
    deadline = Deadline(1.0, clock=clock)
    clock.now += 1.0
    condition = threading.Condition()
    with condition:
        assert deadline.wait(condition) is False
        assert deadline.wait_for(condition, lambda: False) is False
    assert deadline.wait_event(threading.Event()) is False


def test_a_wait_that_is_woken_in_time_says_so() -> None:
    deadline = Deadline(60.0)
    event = threading.Event()
    condition = threading.Condition()
    ready = [False]

    def wake() -> None:
        with condition:
            ready[0] = True
            condition.notify_all()
        event.set()

    waker = threading.Thread(target=wake, name="test-waker")
    with condition:
        waker.start()
        assert deadline.wait_for(condition, lambda: ready[0]) is True
    assert deadline.wait_event(event) is True
    assert deadline.join(waker) is True


def test_a_thread_that_outlives_the_deadline_is_reported() -> None:
    release = threading.Event()
    worker = threading.Thread(target=release.wait, name="test-worker")
    worker.start()
    try:
        assert Deadline(0.01).join(worker) is False
    finally:
        release.set()
        worker.join()


def test_a_time_of_the_caller_ends_the_deadline_when_it_comes_first() -> None:
    clock = Clock()
    sooner = Deadline(5.0, until=clock.now + 2.0, clock=clock)
    assert sooner.span == 2.0 and sooner.remaining == 2.0
    later = Deadline(5.0, until=clock.now + 9.0, clock=clock)
    assert later.span == 5.0 and later.remaining == 5.0
    alone = Deadline(None, until=clock.now + 3.0, clock=clock)
    assert alone.span == 3.0
    clock.now += 3.0
    assert alone.expired and sooner.expired and not later.expired
    assert sooner.span == 2.0  # the time limit it had, not the time left


def test_a_time_of_the_caller_already_past_leaves_no_time() -> None:
    clock = Clock()
    past = Deadline(5.0, until=clock.now - 1.0, clock=clock)
    assert past.span == 0.0 and past.remaining == 0.0 and past.expired


def test_no_deadline_has_an_infinite_span() -> None:
    assert Deadline(None).span == float("inf")
