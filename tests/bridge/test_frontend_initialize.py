"""A failed initialize, in this process over the memory link: whatever failed, initialize works again.

The upstream is broken for the first initialize and fixed for the next: a bug of the
bridge (an exception that no error of the bridge names, in the connect or in the
discover), a discover that never answers (its time limit) and a cancel of the
initialize. Each time the client gets an answer for the failed initialize (none for
the cancel), and then a new initialize succeeds and the upstream carries requests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness import VSCODE_CAPABILITIES, VSCODE_INFO, WAIT, FrontendPair, text_of
from mcpbridge.bridge.front.options import Timeouts
from mcpbridge.mcp.server import Server

DISCOVER_TIMEOUT = 0.5


class Upstream(Server):
    """A server whose discover hangs while ``hang`` is set (until canceled or released)."""

    def __init__(self) -> None:
        super().__init__("in-process", "1.0.0", shutdown_grace=0.5)
        self.hang = threading.Event()
        self.release = threading.Event()
        self.discovering = threading.Event()

        @self.tool("echo")
        def echo(ctx: Any, text: str) -> str:
            """Answer ``text``."""
            return text

    def _discover(self, ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        self.discovering.set()
        if self.hang.is_set():
            remove = ctx.cancel.add_callback(self.release.set)
            try:
                self.release.wait(WAIT)
            finally:
                remove()
        return super()._discover(ctx, params)


class Breaker:
    """Wrap the connect of the front end: break the next start of the upstream in one way."""

    def __init__(self) -> None:
        self.next: Callable[[Any], Any] | None = None

    def __call__(self, connect: Any) -> Any:
        def broken(client_info: dict[str, Any], on_notification: Any) -> Any:
            fault, self.next = self.next, None
            if fault is None:
                return connect(client_info, on_notification)
            return fault(lambda: connect(client_info, on_notification))

        return broken


def bug_in_connect(connect: Callable[[], Any]) -> Any:
    raise RuntimeError("a bug of the connect")


def bug_in_discover(connect: Callable[[], Any]) -> Any:
    client = connect()

    def discover(**kwargs: Any) -> Any:
        raise OverflowError("a number of the discover result that the parse cannot take")

    client.discover = discover
    return client


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.release.set()


@pytest.fixture
def breaker() -> Breaker:
    return Breaker()


@pytest.fixture
def pair(upstream: Upstream, breaker: Breaker) -> Iterator[FrontendPair]:
    frontend_pair = FrontendPair(upstream, wrap_connect=breaker, timeouts=Timeouts(discover=DISCOVER_TIMEOUT))
    try:
        yield frontend_pair
    finally:
        if frontend_pair.ended is None:
            frontend_pair.close()


def send_initialize(pair: FrontendPair, request_id: Any) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": VSCODE_CAPABILITIES, "clientInfo": VSCODE_INFO}
    pair.request(request_id, "initialize", params)


def works_after_the_fix(pair: FrontendPair) -> None:
    """A new initialize succeeds and the upstream answers a call."""
    send_initialize(pair, "again")
    result = pair.response("again")
    assert result.get("result", {}).get("serverInfo", {}).get("name") == "in-process", result
    pair.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    pair.request("call", "tools/call", {"name": "echo", "arguments": {"text": "fixed"}})
    assert text_of(pair.response("call")) == "fixed"


@pytest.mark.parametrize("fault", [bug_in_connect, bug_in_discover], ids=["connect", "discover"])
def test_a_bug_in_the_start_answers_an_internal_error_and_initialize_works_again(
    pair: FrontendPair, breaker: Breaker, fault: Callable[[Any], Any]
) -> None:
    breaker.next = fault
    send_initialize(pair, "first")
    error = pair.response("first")["error"]
    assert error["code"] == -32603 and error["data"]["cause"] == "internal"
    assert pair.frontend.slots.wait_empty(WAIT)
    works_after_the_fix(pair)


def test_a_discover_past_its_time_limit_answers_its_cause_and_initialize_works_again(
    pair: FrontendPair, upstream: Upstream
) -> None:
    upstream.hang.set()
    send_initialize(pair, "first")
    error = pair.response("first")["error"]
    assert error["data"] == {"cause": "discover_failed", "detail": "no response in 500 ms"}
    assert pair.frontend.slots.wait_empty(WAIT)
    upstream.hang.clear()
    works_after_the_fix(pair)


def test_a_canceled_initialize_gets_no_response_and_initialize_works_again(
    pair: FrontendPair, upstream: Upstream
) -> None:
    upstream.hang.set()
    send_initialize(pair, "first")
    assert upstream.discovering.wait(WAIT)
    pair.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "first"}})
    assert pair.frontend.slots.wait_empty(WAIT), "the canceled initialize did not end"
    upstream.hang.clear()
    works_after_the_fix(pair)
    assert not [frame for frame in pair.seen if frame.get("id") == "first"]


def slot_threads() -> int:
    return sum(thread.name.startswith("mcpbridge-slot") for thread in threading.enumerate())


def test_requests_before_the_initialize_answer_wait_for_it_and_are_forwarded_after_it(
    pair: FrontendPair, upstream: Upstream
) -> None:
    upstream.hang.set()
    send_initialize(pair, "init")
    assert upstream.discovering.wait(WAIT)
    pair.request("list", "tools/list")
    pair.request("call", "tools/call", {"name": "echo", "arguments": {"text": "held"}})
    pair.request("ping", "ping")
    assert pair.response("ping")["result"] == {}
    assert [frame.get("id") for frame in pair.seen] == ["ping"], "a held request was answered early"
    assert slot_threads() == 1, "a held request took a thread"
    upstream.release.set()
    assert "result" in pair.response("init")
    assert text_of(pair.response("call")) == "held"
    assert [tool["name"] for tool in pair.response("list")["result"]["tools"]] == ["echo"]
    order = [frame.get("id") for frame in pair.seen]
    assert order.index("init") < order.index("call") and order.index("init") < order.index("list")


def test_after_a_failed_initialize_the_held_and_later_requests_get_not_connected_with_the_cause(
    pair: FrontendPair, upstream: Upstream
) -> None:
    upstream.hang.set()
    send_initialize(pair, "init")
    assert upstream.discovering.wait(WAIT)
    pair.request("held", "tools/list")
    assert pair.response("init")["error"]["data"]["cause"] == "discover_failed"
    expected = {"cause": "not_connected", "detail": "the initialize failed: discover_failed"}
    assert pair.response("held")["error"]["data"] == expected
    pair.request("later", "tools/list")
    assert pair.response("later")["error"]["data"] == expected
    assert pair.frontend.slots.wait_empty(WAIT)
    upstream.hang.clear()
    works_after_the_fix(pair)


def test_a_canceled_held_request_gets_no_response(pair: FrontendPair, upstream: Upstream) -> None:
    upstream.hang.set()
    send_initialize(pair, "init")
    assert upstream.discovering.wait(WAIT)
    pair.request("dropped", "tools/call", {"name": "echo", "arguments": {"text": "x"}})
    pair.request("kept", "tools/call", {"name": "echo", "arguments": {"text": "kept"}})
    pair.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "dropped"}})
    pair.request("ping", "ping")
    assert pair.response("ping")["result"] == {}
    upstream.release.set()
    assert text_of(pair.response("kept")) == "kept"
    assert pair.frontend.slots.wait_empty(WAIT)
    assert not [frame for frame in pair.seen if frame.get("id") == "dropped"]


def test_the_held_requests_count_in_the_limit_of_requests_in_flight(upstream: Upstream) -> None:
    upstream.hang.set()
    pair = FrontendPair(upstream, max_in_flight=3)
    try:
        send_initialize(pair, "init")
        assert upstream.discovering.wait(WAIT)
        for n in range(3):
            pair.request(n, "tools/list")
        error = pair.response(2)["error"]
        assert error["data"]["cause"] == "too_many_requests"
        upstream.release.set()
        assert "result" in pair.response("init")
        assert "tools" in pair.response(0)["result"] and "tools" in pair.response(1)["result"]
    finally:
        pair.close()
