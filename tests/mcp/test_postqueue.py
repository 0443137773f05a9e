"""The queue of the posts of the 2025-era HTTP transports: in order, on its own thread, bounded."""

from __future__ import annotations

import logging
import threading

import pytest

from conftest import WAIT
from mcpbridge.mcp.jsonrpc import Message, Notification, Response
from mcpbridge.mcp.transports.postqueue import PostQueue


class StuckServer:
    """A post function whose server takes the first message, then nothing until it is released."""

    def __init__(self) -> None:
        self.posted: list[Message] = []
        self.first = threading.Event()
        self.release = threading.Event()

    def post(self, message: Message) -> None:
        self.first.set()
        assert self.release.wait(WAIT), "the test never released the server"
        self.posted.append(message)


def test_past_its_bound_the_queue_drops_a_message_and_says_so_once_without_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, stopped = StuckServer(), threading.Event()
    queue = PostQueue(server.post, stopped, "test-poster", max_waiting=3)
    queue.start()
    try:
        queue.put(Notification("notifications/progress", {"n": 0}))
        assert server.first.wait(WAIT)  # the poster holds the first one; three more may wait
        with caplog.at_level(logging.WARNING, logger="mcpbridge.http"):
            for n in range(1, 4):
                queue.put(Notification("notifications/progress", {"n": n}))
            queue.put(Notification("notifications/cancelled", {"requestId": 7, "reason": "secret words"}))
            queue.put(Response("srv-1", {"content": "secret result"}))
        server.release.set()
        assert queue.drain(WAIT)
    finally:
        stopped.set()
        queue.wake()
        queue.thread.join(WAIT)
    assert [m.params["n"] for m in server.posted if isinstance(m, Notification)] == [0, 1, 2, 3]
    assert len(server.posted) == 4
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "the upstream server takes the messages slower than they come: 3 wait to be posted, thus the "
        "bridge dropped the notification notifications/cancelled"
    ]
    assert "secret" not in caplog.text


def test_below_its_bound_every_message_is_posted_in_order() -> None:
    server, stopped = StuckServer(), threading.Event()
    server.release.set()
    queue = PostQueue(server.post, stopped, "test-poster", max_waiting=3)
    queue.start()
    try:
        for n in range(10):
            queue.put(Notification("notifications/progress", {"n": n}))
            assert queue.drain(WAIT)
    finally:
        stopped.set()
        queue.wake()
        queue.thread.join(WAIT)
    assert [m.params["n"] for m in server.posted if isinstance(m, Notification)] == list(range(10))
