"""One sign-in or refresh at a time: the turn, the bounded wait for it, and its named timeout."""

from __future__ import annotations

import threading
import time

import pytest

from conftest import WAIT, bounded
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.errors import Cancelled
from mcpbridge.oauth.busy import OneAtATime
from mcpbridge.oauth.errors import SignInFailed


def test_a_listen_stream_does_not_wait_for_the_turn() -> None:
    turn = OneAtATime()
    assert turn.acquire(None, None) is True
    assert turn.acquire(None, None) is False
    turn.release()
    assert turn.try_acquire() is True


def test_a_turn_not_given_back_by_the_deadline_ends_the_wait_with_a_named_error() -> None:
    turn = OneAtATime()
    assert turn.try_acquire()
    with pytest.raises(SignInFailed) as caught:
        bounded(lambda: turn.acquire(None, time.monotonic() + 0.05), "the end of the wait for the turn")
    assert caught.value.detail == "another sign-in did not end in time"
    with pytest.raises(SignInFailed):
        turn.acquire(None, time.monotonic() - 1.0)  # a deadline already past: no wait at all


def test_the_turn_given_back_wakes_the_one_that_waits() -> None:
    turn = OneAtATime()
    assert turn.try_acquire()
    waiting = threading.Event()
    taken: list[bool] = []

    def wait_for_turn() -> None:
        waiting.set()
        taken.append(turn.acquire(None, time.monotonic() + 6 * WAIT))

    waiter = threading.Thread(target=wait_for_turn, name="test-turn-waiter")
    waiter.start()
    assert waiting.wait(WAIT)
    turn.release()
    waiter.join(WAIT)
    assert not waiter.is_alive() and taken == [True]
    assert turn.try_acquire() is False  # the waiter holds the turn now


def test_a_cancel_ends_the_wait_for_the_turn() -> None:
    turn = OneAtATime()
    assert turn.try_acquire()
    cancel = CancelToken()
    waiting = threading.Event()
    ended: list[BaseException] = []

    def wait_for_turn() -> None:
        waiting.set()
        try:
            turn.acquire(cancel, time.monotonic() + 6 * WAIT)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            ended.append(exc)

    waiter = threading.Thread(target=wait_for_turn, name="test-turn-waiter")
    waiter.start()
    assert waiting.wait(WAIT)
    cancel.cancel("the client canceled")
    waiter.join(WAIT)
    assert not waiter.is_alive()
    assert len(ended) == 1 and isinstance(ended[0], Cancelled)
