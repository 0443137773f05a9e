"""Tasks of the Tasks extension through the real bridge, on stdio and over HTTP.

The upstream is ``tests/peers/task_server.py``, a server of the extension built on the
project's own server. A client of 2025-11-25 that does not use tasks itself calls the
tools plainly; the bridge drives each task the server makes and answers the call with
the task's end. The tool ``events`` of the server waits for what the server saw (a
``tasks/cancel``, a ``tasks/get``), so no test sleeps to wait for the other side.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from harness import Bridge, bridge_command
from peers import running_task_http_server, task_server_command
from schema import validate_legacy_frame

PROGRESS = "notifications/progress"


@contextlib.contextmanager
def task_bridge(
    form: str,
    *server_options: str,
    bridge_options: tuple[str, ...] = (),
    capabilities: dict[str, Any] | None = None,
) -> Iterator[Bridge]:
    """A bridge before the task server (``form``: ``stdio`` or ``http``), initialized with
    ``capabilities`` (VS Code's by default)."""
    with contextlib.ExitStack() as stack:
        if form == "http":
            url = stack.enter_context(running_task_http_server(*server_options))
            command = bridge_command(*bridge_options, url)
        else:
            command = bridge_command(*bridge_options, upstream=task_server_command(*server_options))
        bridge = stack.enter_context(Bridge(command))
        assert "result" in bridge.initialize(capabilities)
        yield bridge
        check_frames(bridge)


def check_frames(bridge: Bridge) -> None:
    """Every frame the bridge wrote to the client is valid 2025-11-25."""
    for frame in bridge.seen:
        validate_legacy_frame(frame)


def call(bridge: Bridge, name: str, arguments: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    response = bridge.request("tools/call", params)
    if "result" in response:
        validate_legacy_frame(response, request_method="tools/call")
    return response


def call_async(bridge: Bridge, name: str, arguments: dict[str, Any] | None = None) -> Any:
    return bridge.request_async("tools/call", {"name": name, "arguments": arguments or {}})


def events(bridge: Bridge, name: str = "", count: int = 0) -> list[str]:
    """The events of the server, once it saw ``count`` events that start with ``name``."""
    response = call(bridge, "events", {"name": name, "count": count})
    seen: list[str] = response["result"]["structuredContent"]["events"]
    assert sum(event.startswith(name) for event in seen) >= count, seen
    return seen


def task_of(seen: list[str], tool: str) -> str:
    """The id of the last task that ``tool`` made."""
    return [event.split()[2] for event in seen if event.startswith(f"created {tool} ")][-1]


def text(response: dict[str, Any]) -> str:
    return str(response["result"]["content"][0]["text"])


def no_response(bridge: Bridge, request_id: Any) -> None:
    """The bridge writes no response to ``request_id``, to the end of its output: this ends the
    bridge (the end of its stdin), reads every frame it writes until it exits, and checks them all."""
    bridge.close_stdin()
    bridge.drain()
    assert bridge.wait_exit() == 0
    assert not [f for f in bridge.seen if f.get("id") == request_id and "method" not in f]


FORMS = pytest.mark.parametrize("form", ["stdio", "http"])


# ------------------------------------------------------------------------- results


@FORMS
def test_a_tool_that_only_runs_as_a_task_answers_the_plain_call_with_its_result(form: str) -> None:
    with task_bridge(form) as bridge:
        response = call(bridge, "report", {"steps": 2})
        assert response["result"] == {
            "content": [{"type": "text", "text": "reported 2 steps"}],
            "isError": False,
        }
        seen = events(bridge, "done ", 1)
        assert f"done {task_of(seen, 'report')} completed" in seen


@FORMS
def test_a_task_that_fails_answers_with_its_error_code_message_and_data(form: str) -> None:
    with task_bridge(form) as bridge:
        error = call(bridge, "fail")["error"]
        assert error == {"code": -32050, "message": "the job broke", "data": {"job": 7}}


@FORMS
def test_a_task_that_completes_with_a_tool_error_answers_with_that_result(form: str) -> None:
    with task_bridge(form) as bridge:
        result = call(bridge, "tool_error")["result"]
        assert result == {"content": [{"type": "text", "text": "the input was bad"}], "isError": True}


@FORMS
def test_the_status_messages_of_a_task_become_the_progress_of_the_call(form: str) -> None:
    with task_bridge(form, "--no-listen") as bridge:
        response = call(bridge, "report", {"steps": 3, "gate": True}, progressToken="p-1")
        assert text(response) == "reported 3 steps"
        progress = [f["params"] for f in bridge.seen if f.get("method") == PROGRESS]
        assert progress == [
            {"progressToken": "p-1", "progress": n, "message": f"step {n} of 3"} for n in (1, 2, 3)
        ]
        last = max(i for i, f in enumerate(bridge.seen) if f.get("method") == PROGRESS)
        assert last < bridge.seen.index(response)


def test_a_task_without_a_progress_token_sends_no_progress() -> None:
    with task_bridge("stdio", "--no-listen") as bridge:
        assert text(call(bridge, "report", {"steps": 2, "gate": True})) == "reported 2 steps"
        assert not [f for f in bridge.seen if f.get("method") == PROGRESS]


def test_the_client_of_plain_calls_sees_no_task_support_in_the_tool_list() -> None:
    with task_bridge("stdio") as bridge:
        response = bridge.request("tools/list", {})
        validate_legacy_frame(response, request_method="tools/list")
        tools = {tool["name"]: tool for tool in response["result"]["tools"]}
        assert "report" in tools and "ask" in tools
        assert [name for name, tool in tools.items() if "execution" in tool] == []


# ------------------------------------------------------------------------- input requests


@FORMS
@pytest.mark.parametrize(
    ("kind", "method", "answer"),
    [
        ("form", "elicitation/create", {"action": "accept", "content": {"name": "Ada"}}),
        ("url", "elicitation/create", {"action": "accept"}),
        (
            "sample",
            "sampling/createMessage",
            {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"},
        ),
        ("roots", "roots/list", {"roots": [{"uri": "file:///work", "name": "work"}]}),
    ],
)
def test_each_input_request_of_a_task_becomes_one_request_to_the_client(
    form: str, kind: str, method: str, answer: dict[str, Any]
) -> None:
    with task_bridge(form, "--no-listen") as bridge:
        request_id = call_async(bridge, "ask", {"kind": kind})
        request = bridge.wait_frame(lambda f: "method" in f and "id" in f)
        assert request["method"] == method and request["id"] == "b-1"
        assert "_meta" not in (request.get("params") or {})  # the client knows no task
        # The task stays input_required over more polls: the client is not asked again.
        seen = events(bridge, "get ", 3)
        task_id = task_of(seen, "ask")
        bridge.send({"jsonrpc": "2.0", "id": "b-1", "result": answer})
        result = bridge.wait_response(request_id)
        validate_legacy_frame(result, request_method="tools/call")
        assert text(result).startswith("answers: ")
        assert [f for f in bridge.seen if f.get("method") == method] == [request]
        assert events(bridge, f"update {task_id}", 1).count(f"update {task_id} {kind}-1") == 1


@FORMS
def test_a_task_that_asks_twice_gets_a_request_for_each_new_key(form: str) -> None:
    with task_bridge(form) as bridge:
        request_id = call_async(bridge, "ask", {"kind": "form", "times": 2})
        for number in (1, 2):
            request = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
            assert request["id"] == f"b-{number}"
            reply = {"action": "accept", "content": {"name": f"name {number}"}}
            bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": reply})
        assert text(bridge.wait_response(request_id)) == (
            'answers: {"action": "accept", "content": {"name": "name 1"}} | '
            '{"action": "accept", "content": {"name": "name 2"}}'
        )


def test_an_accepted_url_of_a_task_is_completed_once_the_task_no_longer_asks_for_it() -> None:
    with task_bridge("stdio") as bridge:
        request_id = call_async(bridge, "ask", {"kind": "url"})
        request = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        elicitation_id = request["params"]["elicitationId"]
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept"}})
        response = bridge.wait_response(request_id)
        complete = [f for f in bridge.seen if f.get("method") == "notifications/elicitation/complete"]
        assert [f["params"] for f in complete] == [{"elicitationId": elicitation_id}]
        assert bridge.seen.index(complete[0]) < bridge.seen.index(response)


@FORMS
def test_an_input_request_that_the_task_outlives_is_canceled_at_the_client(form: str) -> None:
    with task_bridge(form, "--no-listen") as bridge:
        request_id = call_async(bridge, "ask", {"kind": "form", "ttl_ms": 500})
        request = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        cancelled = bridge.wait_frame(lambda f: f.get("method") == "notifications/cancelled")
        assert cancelled["params"] == {"requestId": request["id"], "reason": "the answer is no longer needed"}
        error = bridge.wait_response(request_id)["error"]
        assert error["data"]["cause"] == "task_expired"


def test_an_input_request_the_client_did_not_declare_fails_the_call_and_cancels_the_task() -> None:
    with task_bridge("stdio", capabilities={"elicitation": {}}) as bridge:
        error = call(bridge, "ask", {"kind": "sample"})["error"]
        assert error["data"]["cause"] == "undeclared_input_request"
        seen = events(bridge, "cancel ", 1)
        assert f"cancel {task_of(seen, 'ask')}" in seen
        assert not [f for f in bridge.seen if f.get("method") == "sampling/createMessage"]


# ------------------------------------------------------------------------- cancellation


@FORMS
def test_a_canceled_call_cancels_its_task_and_gets_no_response(form: str) -> None:
    with task_bridge(form) as bridge:
        request_id = call_async(bridge, "until_cancelled")
        events(bridge, "listen ", 1)  # the bridge watches the task: it drives it
        bridge.notify("notifications/cancelled", {"requestId": request_id, "reason": "stop"})
        seen = events(bridge, "cancel ", 1)
        assert f"cancel {task_of(seen, 'until_cancelled')}" in seen
        assert text(call(bridge, "echo", {"text": "still here"})) == "still here"
        no_response(bridge, request_id)


@FORMS
def test_a_cancel_while_an_input_request_is_open_cancels_both(form: str) -> None:
    with task_bridge(form) as bridge:
        request_id = call_async(bridge, "ask", {"kind": "form"})
        request = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        bridge.notify("notifications/cancelled", {"requestId": request_id})
        cancelled = bridge.wait_frame(lambda f: f.get("method") == "notifications/cancelled")
        assert cancelled["params"]["requestId"] == request["id"]
        seen = events(bridge, "cancel ", 1)
        assert f"cancel {task_of(seen, 'ask')}" in seen
        # The answer comes too late: it is dropped, and the server never gets it.
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {}}})
        seen = events(bridge)
        assert not [event for event in seen if event.startswith("update ")]
        assert text(call(bridge, "echo", {"text": "on"})) == "on"
        no_response(bridge, request_id)


def test_a_cancel_after_the_response_changes_nothing() -> None:
    with task_bridge("stdio") as bridge:
        response = call(bridge, "report", {"steps": 1})
        assert text(response) == "reported 1 steps"
        bridge.notify("notifications/cancelled", {"requestId": response["id"]})
        assert text(call(bridge, "echo", {"text": "after"})) == "after"
        assert not [event for event in events(bridge) if event.startswith("cancel")]


def test_a_cancel_that_crosses_the_end_of_the_task_gets_no_response() -> None:
    # No listen stream and a long poll interval: the bridge has not seen the end yet.
    with task_bridge("stdio", "--no-listen") as bridge:
        request_id = call_async(bridge, "report", {"steps": 1, "poll_ms": 60000})
        events(bridge, "created report", 1)  # on stdio: the bridge read the task before this answer
        seen = events(bridge, "done ", 1)
        task_id = task_of(seen, "report")
        bridge.notify("notifications/cancelled", {"requestId": request_id})
        assert f"cancel-terminal {task_id}" in events(bridge, "cancel-terminal", 1)
        assert text(call(bridge, "echo", {"text": "after"})) == "after"
        no_response(bridge, request_id)


# ------------------------------------------------------------------------- lost tasks


@FORMS
def test_a_task_that_the_server_loses_fails_the_call_as_task_lost(form: str) -> None:
    with task_bridge(form) as bridge:
        error = call(bridge, "lose")["error"]
        assert error["code"] == -32603 and error["data"]["cause"] == "task_lost"
        assert error["message"].startswith("The upstream server no longer knows the task of the request.")
        seen = events(bridge)
        assert not [event for event in seen if event.startswith("cancel")]


@FORMS
def test_a_task_that_outlives_its_time_to_live_fails_the_call_as_task_expired(form: str) -> None:
    with task_bridge(form) as bridge:
        error = call(bridge, "never", {"ttl_ms": 300})["error"]
        assert error["code"] == -32603 and error["data"]["cause"] == "task_expired"
        assert error["data"]["detail"].endswith("no end 300 ms after its creation")
        seen = events(bridge, "cancel ", 1)
        assert f"cancel {task_of(seen, 'never')}" in seen


def test_the_requests_of_a_task_over_http_carry_its_id_in_mcp_name() -> None:
    with task_bridge("http", "--no-listen") as bridge:
        request_id = call_async(bridge, "ask", {"kind": "form"})
        request = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}})
        assert text(bridge.wait_response(request_id)).startswith("answers: ")
        waiting = call_async(bridge, "until_cancelled")
        events(bridge, "get ", len([e for e in events(bridge) if e.startswith("get ")]) + 1)
        bridge.notify("notifications/cancelled", {"requestId": waiting})
        seen = events(bridge, "cancel ", 1)
        headers = [event for event in seen if event.startswith("header ")]
        ask, wait = task_of(seen, "ask"), task_of(seen, "until_cancelled")
        assert f"header tasks/get {ask}" in headers
        assert f"header tasks/update {ask}" in headers
        assert f"header tasks/cancel {wait}" in headers
        # The server refuses a request whose Mcp-Name is not its task: each one passed.
        assert len(headers) == len([e for e in seen if e.split()[0] in ("get", "update", "cancel")])


# ------------------------------------------------------------------------- load


def test_256_tasks_at_once_each_get_their_result() -> None:
    with task_bridge("stdio") as bridge:
        ids = [
            call_async(bridge, "hold", {"group": "flood", "size": 256, "poll_ms": 1000}) for _ in range(256)
        ]
        for request_id in ids:
            response = bridge.wait_response(request_id, timeout=60.0)
            assert response.get("result") == {
                "content": [{"type": "text", "text": "held flood"}],
                "isError": False,
            }
        assert text(call(bridge, "echo", {"text": "after the flood"})) == "after the flood"
        seen = events(bridge)
        assert len([event for event in seen if event.startswith("done ")]) == 256
        assert not [event for event in seen if event.startswith("cancel")]


# ------------------------------------------------------------------------- --tasks off


@FORMS
def test_with_tasks_off_the_bridge_declares_no_tasks_and_passes_the_refusal(form: str) -> None:
    with task_bridge(form, bridge_options=("--tasks", "off")) as bridge:
        error = call(bridge, "report")["error"]
        assert error == {
            "code": -32021,
            "message": "Missing required client capability",
            "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
        }
        assert text(call(bridge, "ask")) == "ask needs the tasks extension to run"
        tools = {tool["name"]: tool for tool in bridge.request("tools/list", {})["result"]["tools"]}
        assert tools["report"]["execution"] == {"taskSupport": "required"}
        assert not [e for e in events(bridge) if e.startswith(("created", "listen", "get"))]
