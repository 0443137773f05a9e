"""The HTTP client of the sign-in: one time limit for several requests, and for each request.

The servers are real, on 127.0.0.1: one that never answers, and one whose answer comes
one byte at a time (a read time limit alone never ends it).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import WAIT, bounded
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.errors import Cancelled
from mcpbridge.oauth.web import WATCHDOG_NAME, WebClient, WebError, WebTimeout
from tests.peers.scripted_http import Exchange, ScriptedServer


def test_a_request_after_the_deadline_is_never_sent() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        web = WebClient(ssl.create_default_context(), {}, deadline=time.monotonic())
        try:
            with pytest.raises(WebError, match="^no time left$"):
                web.get_json(f"http://127.0.0.1:{listener.getsockname()[1]}/metadata")
        finally:
            web.close()
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_a_request_waits_for_its_answer_at_most_half_the_time_left() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        # The connection waits in the backlog: nothing ever answers it.
        web = WebClient(ssl.create_default_context(), {}, deadline=time.monotonic() + 1.0)
        try:
            # The read time limit of the request is in milliseconds, not the 30 s of a request
            # without a deadline.
            with pytest.raises(WebError, match=r"^read: no data in \d{1,3} ms$"):
                web.get_json(f"http://127.0.0.1:{listener.getsockname()[1]}/metadata")
        finally:
            web.close()


# ------------------------------------------------------------------ answers that dribble


class Dribbler:
    """A loopback HTTP server whose answer comes one byte at a time, a pause between two.

    ``head``: the head dribbles too; else it comes at once and only the body dribbles.
    It stops when the client closes the connection or the test ends (:meth:`close`).
    """

    def __init__(self, *, head: bool = False, pause: float = 0.5) -> None:
        self.head = head
        self.pause = pause
        self.started = threading.Event()
        self.stop = threading.Event()
        self.ended = threading.Event()
        self.sent = 0
        self.server = ScriptedServer(self._handle)

    @property
    def url(self) -> str:
        return self.server.url(path="/.well-known/oauth-protected-resource")

    def _handle(self, ex: Exchange) -> None:
        ex.close()
        body = json.dumps({"resource": "x" * 200}).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        rest = head.encode() + body
        if not self.head:
            ex.send(rest[: len(head)])
            rest = rest[len(head) :]
        try:
            for byte in rest:
                ex.send(bytes([byte]))
                self.sent += 1
                self.started.set()
                if self.stop.wait(self.pause):
                    break
        except OSError:
            pass
        finally:
            self.ended.set()

    def close(self) -> None:
        self.stop.set()
        self.server.close()


@pytest.fixture
def dribbler() -> Iterator[Any]:
    made: list[Dribbler] = []

    def make(**options: Any) -> Dribbler:
        made.append(Dribbler(**options))
        return made[-1]

    yield make
    for server in made:
        server.close()


def client(**options: Any) -> WebClient:
    return WebClient(ssl.create_default_context(), {}, **options)


@pytest.mark.parametrize("head", [False, True], ids=["body", "head"])
def test_an_answer_that_dribbles_ends_at_the_time_limit_of_the_call(dribbler, head):
    server = dribbler(head=head)
    web = client(call_timeout=2.0)
    try:
        with pytest.raises(WebTimeout) as caught:
            # A hang detector, not a measure: the call has 2 s.
            bounded(lambda: web.get_json(server.url), "the call", timeout=3 * 2.0)
    finally:
        web.close()
    assert str(caught.value) == "no complete answer in 2 s" and caught.value.seconds == 2.0
    # The call closed its connection: the server's next byte found it closed.
    assert server.ended.wait(WAIT)
    assert 0 < server.sent < 200


def test_an_answer_that_dribbles_ends_at_the_deadline_of_the_request(dribbler):
    server = dribbler()
    web = client().within(deadline=time.monotonic() + 1.5, cancel=None)
    with pytest.raises(WebTimeout, match=r"^no complete answer in 2 s$"):
        bounded(lambda: web.get_json(server.url), "the call", timeout=3 * 1.5)
    web.close()
    assert server.ended.wait(WAIT)


@pytest.mark.parametrize("head", [False, True], ids=["body", "head"])
def test_a_cancel_stops_a_call_whose_answer_dribbles(dribbler, head):
    server = dribbler(head=head)
    shared = client()
    cancel = CancelToken()
    web = shared.within(deadline=None, cancel=cancel)
    threading.Thread(
        target=lambda: server.started.wait(WAIT) and cancel.cancel("the user canceled"), name="test-cancel"
    ).start()
    try:
        with pytest.raises(Cancelled) as caught:
            bounded(lambda: web.get_json(server.url), "the call")
    finally:
        shared.close()
    assert caught.value.detail == "the user canceled"
    assert server.ended.wait(WAIT)


def test_a_call_after_the_cancel_is_never_sent():
    with socket.create_server(("127.0.0.1", 0)) as listener:
        cancel = CancelToken()
        cancel.cancel()
        web = client().within(deadline=None, cancel=cancel)
        with pytest.raises(Cancelled):
            web.get_json(f"http://127.0.0.1:{listener.getsockname()[1]}/metadata")
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_the_shared_client_keeps_working_after_a_call_stopped_and_a_view_closes_nothing(dribbler):
    server = dribbler()
    shared = client(call_timeout=1.0)
    try:
        with pytest.raises(WebTimeout):
            bounded(lambda: shared.get_json(server.url), "the call")

        def whole(ex: Exchange) -> None:
            ex.close()
            ex.json({"ok": True})

        with ScriptedServer(whole) as plain:
            view = shared.within(deadline=time.monotonic() + WAIT, cancel=CancelToken())
            view.close()
            assert view.get_json(plain.url()).json == {"ok": True}
            assert shared.get_json(plain.url()).json == {"ok": True}
    finally:
        shared.close()
    assert not [t for t in threading.enumerate() if t.name == WATCHDOG_NAME]


@pytest.mark.parametrize(
    ("length", "answer"),
    [("9" * 5000, "too long"), ("\u00b2", {"ok": True}), (" 12 ", {"ok": True}), ("1048577", "too long")],
)
def test_a_content_length_of_a_peer_is_read_into_its_range(length, answer):
    body = b'{"ok": true}'

    def handle(ex: Exchange) -> None:
        ex.close()
        ex.head(200, [("Content-Type", "application/json"), ("Content-Length", length)])
        ex.send(body)

    with ScriptedServer(handle) as server:
        web = client()
        try:
            if answer == "too long":
                with pytest.raises(WebError, match=r"^an answer longer than 1048576 bytes$"):
                    web.get_json(server.url())
            else:
                assert web.get_json(server.url()).json == answer
        finally:
            web.close()
