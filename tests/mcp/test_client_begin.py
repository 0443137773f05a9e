"""Client.begin: a request that goes out without waiting, and whose outcome comes to a callback.

The upstream is ``tests/peers/scripted_upstream.py`` over a real stdio child.
"""

from __future__ import annotations

import contextlib
import queue
import sys
import threading
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import harness
from conftest import WAIT
from mcpbridge.mcp.cancel import NO_WAIT, CancelToken, WouldBlock
from mcpbridge.mcp.client import Client
from mcpbridge.mcp.client.call import CALL_TRANSITIONS, Call, CallState
from mcpbridge.mcp.errors import Cancelled, Closed, RequestTimeout, RpcError
from mcpbridge.mcp.jsonrpc import Request
from mcpbridge.mcp.transports.stdio import StdioChildTransport

PEER = Path(__file__).parents[1] / "peers" / "scripted_upstream.py"
CLIENT_INFO = {"name": "mcpbridge-tests", "version": "0.0.0"}


class Done:
    """The calls given to ``on_done``, with the name of the thread that gave each."""

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[Call, str]] = queue.Queue()

    def __call__(self, call: Call) -> None:
        self.calls.put((call, threading.current_thread().name))

    def next(self) -> tuple[Call, str]:
        return self.calls.get(timeout=WAIT)


@pytest.fixture
def client() -> Iterator[Client]:
    made = Client(StdioChildTransport([sys.executable, str(PEER)]), client_info=CLIENT_INFO)
    made.start()
    yield made
    made.close(grace=1.0)


def begin(client: Client, method: str, params: dict[str, Any] | None = None, **options: Any) -> Done:
    done = Done()
    options.setdefault("timeout", WAIT)
    call = client.begin(method, params, on_done=done, **options)
    assert call is not None
    return done


def test_the_answer_comes_to_on_done_on_the_reader_thread_and_result_gives_it(client: Client) -> None:
    traced: list[tuple[Any, str]] = []
    done = begin(client, "test/echo", {"a": 1}, trace=lambda i, outcome, s: traced.append((i, outcome)))
    call, thread = done.next()
    assert thread == "mcpbridge-upstream-reader"
    result = call.result()
    assert result["method"] == "test/echo" and result["params"]["a"] == 1
    assert "io.modelcontextprotocol/clientInfo" in result["params"]["_meta"]
    assert traced == [(call.id, "complete")]
    with pytest.raises(RuntimeError):
        call.result()


def test_an_error_answer_raises_from_result(client: Client) -> None:
    done = begin(client, "test/error", {"error": {"code": -32001, "message": "no"}})
    call, _ = done.next()
    with pytest.raises(RpcError) as caught:
        call.result()
    assert caught.value.error.code == -32001


def test_a_cancellation_comes_on_the_canceling_thread_and_tells_the_upstream(client: Client) -> None:
    token = CancelToken()
    done = begin(client, "test/silent", cancel=token)
    token.cancel("the user stopped it")
    call, thread = done.next()
    assert thread == threading.current_thread().name
    assert call.cancelled and call.needs_thread
    with pytest.raises(Cancelled):
        call.result(wait=False)
    cancels = client.request("test/cancels", timeout=WAIT)["cancels"]
    assert cancels == [{"requestId": call.id, "reason": "the user stopped it"}]


def test_the_deadline_comes_on_the_timer_thread_as_a_timeout(client: Client) -> None:
    done = begin(client, "test/silent", timeout=0.2)
    call, thread = done.next()
    assert thread == "mcpbridge-upstream-timer"
    with pytest.raises(RequestTimeout):
        call.result()


def test_a_closed_connection_ends_the_calls_in_flight(client: Client) -> None:
    done = begin(client, "test/silent")
    client.close(grace=1.0)
    call, _ = done.next()
    with pytest.raises(Closed):
        call.result()


def reachable(start: CallState, end: CallState) -> bool:
    """Whether ``end`` follows ``start`` after zero or more steps of the transition table."""
    return end in harness.reachable(CALL_TRANSITIONS, start)


def test_the_transition_table_leads_from_new_to_taken_and_ends_there() -> None:
    assert set(CALL_TRANSITIONS) == set(CallState)
    assert all(reachable(CallState.NEW, state) for state in CallState)
    assert CALL_TRANSITIONS[CallState.TAKEN] == frozenset()
    assert not reachable(CallState.ANSWERED, CallState.INTERRUPTED)
    assert not reachable(CallState.INTERRUPTED, CallState.ANSWERED)


@pytest.mark.parametrize("ending", ["answer", "cancel", "deadline"])
def test_a_call_goes_through_its_states_in_the_order_of_the_table(client: Client, ending: str) -> None:
    token = CancelToken()
    states: queue.Queue[CallState] = queue.Queue()
    method = "test/echo" if ending == "answer" else "test/silent"
    timeout = 0.2 if ending == "deadline" else WAIT
    call = client.begin(method, on_done=lambda c: states.put(c.state), timeout=timeout, cancel=token)
    assert call is not None
    seen = [call.state]
    if ending == "cancel":
        assert seen == [CallState.SENT]
        token.cancel("the user stopped it")
    seen.append(states.get(timeout=WAIT))
    if ending == "answer":
        assert call.result()["method"] == "test/echo"
    else:
        with pytest.raises(Cancelled if ending == "cancel" else RequestTimeout):
            call.result()
    seen.append(call.state)
    assert seen[1:] == [CallState.NOTIFIED, CallState.TAKEN]
    assert all(reachable(before, after) for before, after in pairwise(seen))


def test_a_send_that_finds_no_room_sends_nothing_and_begin_returns_none() -> None:
    transport = StdioChildTransport([sys.executable, str(PEER)], max_queued_bytes=1024)
    client = Client(transport, client_info=CLIENT_INFO)
    client.start()
    try:
        assert client.request("test/stop-reading", timeout=WAIT)["method"] == "test/stop-reading"
        blob = "x" * (256 * 1024)
        with pytest.raises(WouldBlock):
            for n in range(64):  # the pipe fills, then the queue holds one frame
                transport.send(Request(1000 + n, "test/echo", {"blob": blob}), cancel=NO_WAIT)
        done = Done()
        assert client.begin("test/echo", {"blob": blob}, on_done=done, timeout=WAIT) is None
        assert done.calls.empty()
    finally:
        client.close(grace=0.5)


class Hook:
    """A request hook that records each scope and what happened inside it."""

    def __init__(self, extra: float = 0.0) -> None:
        self.extra = extra
        self.scopes: list[tuple[float, str]] = []

    @contextlib.contextmanager
    def scope(self, *, cancel: CancelToken | None, timeout: float) -> Iterator[object]:
        try:
            yield None
        except RpcError:
            self.scopes.append((timeout, "error"))
            raise
        self.scopes.append((timeout, "ok"))

    def discover_time(self) -> float:
        return self.extra


@pytest.fixture
def hooked() -> Iterator[tuple[Client, Hook]]:
    hook = Hook(extra=30.0)
    made = Client(StdioChildTransport([sys.executable, str(PEER)]), client_info=CLIENT_INFO, hook=hook)
    made.start()
    yield made, hook
    made.close(grace=1.0)


def test_every_request_of_a_client_with_a_hook_runs_inside_its_scope(hooked: tuple[Client, Hook]) -> None:
    client, hook = hooked
    assert client.request("test/echo", {"a": 1}, timeout=WAIT)["params"]["a"] == 1
    with pytest.raises(RpcError):
        client.request("test/error", {"error": {"code": -32000, "message": "no"}}, timeout=WAIT)
    assert hook.scopes == [(WAIT, "ok"), (WAIT, "error")]


def test_begin_sends_nothing_past_a_hook_so_the_caller_uses_request(hooked: tuple[Client, Hook]) -> None:
    client, hook = hooked
    done = Done()
    assert client.begin("test/echo", {"a": 1}, on_done=done, timeout=WAIT) is None
    assert hook.scopes == []
    # Nothing went out: the answer to a request sent after it comes, and none before it.
    assert client.request("test/echo", {"b": 2}, timeout=WAIT)["params"]["b"] == 2
    assert done.calls.empty()
    assert hook.scopes == [(WAIT, "ok")]


def test_discover_waits_the_time_of_the_hook_too(hooked: tuple[Client, Hook]) -> None:
    client, hook = hooked
    with contextlib.suppress(RpcError):
        client.discover(timeout=5.0)
    assert hook.scopes[0][0] == 35.0
