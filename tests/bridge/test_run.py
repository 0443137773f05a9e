"""The run of a forwarded request: its transition table, and the states a run goes through.

The runs are those of a real front end in this process before an in-process server over
the memory link (:class:`~harness.FrontendPair`); a recorder on the run's one step from
state to state sees the order that each path takes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import harness
from harness import WAIT, FrontendPair, text_of
from mcpbridge.bridge.sessions.run import RUN_TRANSITIONS, IllegalTransition, RequestRun, RunState
from mcpbridge.mcp.jsonrpc import Request
from mcpbridge.mcp.server import Server

ENDS = {RunState.RESPONDED, RunState.FAILED, RunState.CANCELLED}


def reachable(start: RunState) -> set[RunState]:
    """The states that follow ``start`` after zero or more steps of the transition table."""
    return harness.reachable(RUN_TRANSITIONS, start)


def test_the_table_names_every_state_and_its_ends_are_final() -> None:
    assert set(RUN_TRANSITIONS) == set(RunState)
    assert reachable(RunState.NEW) == set(RunState)
    for state in ENDS:
        assert RUN_TRANSITIONS[state] == frozenset()
    for state in set(RunState) - ENDS:
        assert ENDS <= reachable(state), f"{state} cannot reach every end"


def test_no_state_goes_back_and_only_the_list_cache_answers_a_new_run() -> None:
    for state in RunState:
        assert state not in RUN_TRANSITIONS[state]
        for following in RUN_TRANSITIONS[state]:
            assert state not in reachable(following), f"{following} leads back to {state}"
    assert RUN_TRANSITIONS[RunState.NEW] & ENDS == {RunState.RESPONDED}
    assert RunState.FIRST_ROUND not in reachable(RunState.ROUNDS)


class Recorder:
    """The steps of every run of the front end, in order, as their threads take them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.steps: dict[int, list[RunState]] = {}
        self.ended: dict[int, threading.Event] = {}

    def record(self, run: RequestRun, state: RunState) -> None:
        key = run.request.id
        assert isinstance(key, int)
        with self._lock:
            self.steps.setdefault(key, []).append(state)
            event = self.ended.setdefault(key, threading.Event())
        if state in ENDS:
            event.set()

    def wait_end(self, request_id: int) -> list[RunState]:
        with self._lock:
            event = self.ended.setdefault(request_id, threading.Event())
        assert event.wait(WAIT), f"run {request_id} did not end: {self.steps.get(request_id)}"
        with self._lock:
            return list(self.steps[request_id])


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    advance = RequestRun._advance

    def recorded(run: RequestRun, state: RunState) -> None:
        advance(run, state)
        recorder.record(run, state)

    monkeypatch.setattr(RequestRun, "_advance", recorded)
    return recorder


def make_server(release: threading.Event, started: threading.Event) -> Server:
    server = Server("in-process", "1.0.0", shutdown_grace=0.5)

    @server.tool("echo")
    def echo(ctx: Any, text: str) -> str:
        """Give ``text`` back."""
        return text

    @server.tool("held")
    def held(ctx: Any) -> str:
        """Wait until the test releases it, or until the request is canceled."""
        started.set()
        remove = ctx.cancel.add_callback(release.set)
        try:
            release.wait(WAIT)
        finally:
            remove()
        return "released"

    return server


@dataclass
class Case:
    """A front end before the in-process server, with the fast path or without it."""

    bridge: FrontendPair
    on_reader: bool
    #: Set once the server's ``held`` tool runs.
    started: threading.Event

    @property
    def first(self) -> RunState:
        """The first step of a run: the reader sends the first round, or a slot thread does."""
        return RunState.FIRST_ROUND if self.on_reader else RunState.ROUNDS


@pytest.fixture(params=[True, False], ids=["on-reader", "on-slot"])
def case(request: pytest.FixtureRequest, recorder: Recorder) -> Iterator[Case]:
    on_reader = bool(request.param)
    release, started = threading.Event(), threading.Event()
    bridge = FrontendPair(make_server(release, started), forward_on_reader=on_reader)
    try:
        bridge.initialize()
        yield Case(bridge, on_reader, started)
    finally:
        release.set()
        if bridge.ended is None:
            bridge.close()


def test_a_call_that_the_server_answers_responds_on_the_path_of_the_options(
    case: Case, recorder: Recorder
) -> None:
    case.bridge.request(1, "tools/call", {"name": "echo", "arguments": {"text": "hello"}})
    assert text_of(case.bridge.response(1)) == "hello"
    assert recorder.wait_end(1) == [case.first, RunState.RESPONDED]


def test_a_call_that_the_server_refuses_fails(case: Case, recorder: Recorder) -> None:
    case.bridge.request(1, "tools/call", {"name": "missing", "arguments": {}})
    assert "error" in case.bridge.response(1)
    assert recorder.wait_end(1) == [case.first, RunState.FAILED]


def test_a_call_that_the_client_cancels_ends_cancelled_without_an_answer(
    case: Case, recorder: Recorder
) -> None:
    bridge = case.bridge
    bridge.request(1, "tools/call", {"name": "held", "arguments": {}})
    assert case.started.wait(WAIT)
    bridge.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    steps = recorder.wait_end(1)
    assert steps[0] is case.first
    assert steps[-1] is RunState.CANCELLED
    bridge.request(2, "ping")
    assert bridge.response(2)["result"] == {}
    assert not [frame for frame in bridge.seen if frame.get("id") == 1]


def test_a_run_that_ended_refuses_every_further_step(case: Case) -> None:
    bridge = case.bridge
    session = bridge.frontend._init.session
    assert session is not None
    request = Request(7, "tools/list", None)
    slot = bridge.frontend.slots.admit(request)
    assert slot is not None
    run = session.request_run(slot, request)
    run.answer_from_cache({"tools": []})
    answer = bridge.response(7)
    assert answer["result"] == {"tools": []}
    assert run.state is RunState.RESPONDED
    with pytest.raises(IllegalTransition, match="from responded to rounds"):
        run.on_slot()
    with pytest.raises(IllegalTransition, match="from responded to first round"):
        run.send_first_round()
    with pytest.raises(IllegalTransition, match="from responded to responded"):
        run.answer_from_cache({"tools": []})
    assert run.state is RunState.RESPONDED
    bridge.request(8, "ping")
    assert bridge.response(8)["result"] == {}
    assert [frame for frame in bridge.seen if frame.get("id") == 7] == [answer]
