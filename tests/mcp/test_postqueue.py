"""The queue of the posts of the 2025-era HTTP transports: in order, on its own thread, bounded."""

from __future__ import annotations

import logging
import threading

import pytest

from conftest import WAIT
from mcpbridge.mcp.jsonrpc import Message, Notification, Response, serialize
from mcpbridge.mcp.transports.postqueue import MESSAGE_OVERHEAD, PostQueue


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


def counted(message: Message) -> int:
    return len(serialize(message)) + MESSAGE_OVERHEAD


def test_past_its_bound_in_bytes_the_queue_drops_a_message_and_says_so_once_without_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    progress = [Notification("notifications/progress", {"n": n}) for n in range(4)]
    # The bytes of the four: the one being posted counts until it is posted.
    bound = sum(counted(m) for m in progress)
    server, stopped = StuckServer(), threading.Event()
    queue = PostQueue(server.post, stopped, "test-poster", max_bytes=bound)
    queue.start()
    try:
        queue.put(progress[0])
        assert server.first.wait(WAIT)  # the poster holds the first one; three more fit
        with caplog.at_level(logging.WARNING, logger="mcpbridge.http"):
            for message in progress[1:]:
                queue.put(message)
            queue.put(Notification("notifications/cancelled", {"requestId": 7, "reason": "secret words"}))
            queue.put(Response("srv-1", {"content": "secret result"}))
        server.release.set()
        assert queue.drain(WAIT)
    finally:
        stopped.set()
        queue.wake()
        queue.thread.join(WAIT)
    assert server.posted == progress
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        f"the upstream server takes the messages slower than they come: {bound // 1024} KiB wait to be "
        "posted, thus the bridge dropped the notification notifications/cancelled"
    ]
    assert "secret" not in caplog.text


def test_a_message_larger_than_the_bound_joins_an_empty_queue() -> None:
    server, stopped = StuckServer(), threading.Event()
    server.release.set()
    queue = PostQueue(server.post, stopped, "test-poster", max_bytes=1)
    large = Response("srv-2", {"content": "x" * 4096})
    queue.start()
    try:
        queue.put(large)
        assert queue.drain(WAIT)
    finally:
        stopped.set()
        queue.wake()
        queue.thread.join(WAIT)
    assert server.posted == [large]


def test_below_its_bound_every_message_is_posted_in_order() -> None:
    server, stopped = StuckServer(), threading.Event()
    server.release.set()
    queue = PostQueue(server.post, stopped, "test-poster", max_bytes=1)
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
