"""The HTTP client of the sign-in with a deadline: one time limit for several requests."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from mcpbridge.oauth.web import WebClient, WebError


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
