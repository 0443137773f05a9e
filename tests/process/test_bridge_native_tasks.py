"""Native tasks through the real bridge: a client of 2025-11-25 tasks before a server of the extension.

A raw client plays VS Code 1.139, which declares ``capabilities.tasks`` in its
``initialize``. The bridge declares tasks to it, answers a task-augmented
``tools/call`` with a ``CreateTaskResult`` at once, and maps ``tasks/get``,
``tasks/result``, ``tasks/cancel``, ``tasks/list`` and ``notifications/tasks/status``
onto the Tasks extension of ``tests/peers/task_server.py``. Every frame the bridge
writes is checked against the 2025-11-25 schema.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from harness import VSCODE_CAPABILITIES, Bridge, bridge_command, fixture_command
from peers import running_task_http_server, task_server, task_server_command
from schema import validate_legacy, validate_legacy_frame

TASKS_CAPABILITIES = {
    **VSCODE_CAPABILITIES,
    "tasks": {
        "list": {},
        "cancel": {},
        "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
    },
}
RELATED = "io.modelcontextprotocol/related-task"
STATUS = "notifications/tasks/status"
FORMS = pytest.mark.parametrize("form", ["stdio", "http"])


@contextlib.contextmanager
def native_bridge(form: str = "stdio", *server_options: str) -> Iterator[Bridge]:
    """A bridge before the task server, initialized by a client that uses tasks itself."""
    with contextlib.ExitStack() as stack:
        if form == "http":
            url = stack.enter_context(running_task_http_server(*server_options))
            command = bridge_command(url)
        else:
            command = bridge_command(upstream=task_server_command(*server_options))
        bridge = stack.enter_context(Bridge(command))
        init = bridge.initialize(TASKS_CAPABILITIES)
        validate_legacy_frame(init, request_method="initialize")
        yield bridge
        for frame in bridge.seen:
            validate_legacy_frame(frame)


def request(bridge: Bridge, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request of the client; a result is checked against the result type of the method."""
    response = bridge.request(method, params)
    if "result" in response:
        validate_legacy_frame(response, request_method=method)
    return response


def start(bridge: Bridge, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A task-augmented call: the task of its ``CreateTaskResult``."""
    response = bridge.request(
        "tools/call", {"name": name, "arguments": arguments or {}, "task": {"ttl": 60000}}
    )
    validate_legacy(response["result"], "CreateTaskResult")
    task: dict[str, Any] = response["result"]["task"]
    return task


def events(bridge: Bridge, name: str = "", count: int = 0) -> list[str]:
    """The events of the task server, once it saw ``count`` that start with ``name``."""
    params = {"name": "events", "arguments": {"name": name, "count": count}}
    seen: list[str] = bridge.request("tools/call", params)["result"]["structuredContent"]["events"]
    assert sum(event.startswith(name) for event in seen) >= count, seen
    return seen


def statuses(bridge: Bridge, task_id: str) -> list[str]:
    return [
        f["params"]["status"]
        for f in bridge.seen
        if f.get("method") == STATUS and f["params"]["taskId"] == task_id
    ]


# ------------------------------------------------------------------------- what the bridge declares


def test_the_bridge_declares_tasks_to_a_client_of_tasks_before_a_server_of_the_extension() -> None:
    with native_bridge() as bridge:
        init = bridge.seen[0]["result"]
        assert init["capabilities"]["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
        tools = {tool["name"]: tool for tool in request(bridge, "tools/list", {})["result"]["tools"]}
        required = {name for name, tool in tools.items() if tool["execution"]["taskSupport"] == "required"}
        assert required == task_server.REQUIRED_TASK_TOOLS
        assert {tool["execution"]["taskSupport"] for name, tool in tools.items() if name not in required} == {
            "optional"
        }


def test_a_server_without_the_extension_gets_the_client_no_tasks() -> None:
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        init = bridge.initialize(TASKS_CAPABILITIES)["result"]
        assert "tasks" not in init["capabilities"]
        error = bridge.request("tasks/get", {"taskId": "t"})["error"]
        assert error["code"] == -32601
        tools = bridge.request("tools/list", {})["result"]["tools"]
        assert not [tool for tool in tools if "execution" in tool]


def test_tasks_off_declares_no_tasks_to_a_client_of_tasks() -> None:
    with Bridge(bridge_command("--tasks", "off", upstream=task_server_command())) as bridge:
        assert "tasks" not in bridge.initialize(TASKS_CAPABILITIES)["result"]["capabilities"]
        assert bridge.request("tasks/list", {})["error"]["code"] == -32601


# ------------------------------------------------------------------------- the life of a task


@FORMS
def test_a_task_augmented_call_gets_its_task_at_once_and_its_result_from_tasks_result(form: str) -> None:
    with native_bridge(form) as bridge:
        task = start(bridge, "report", {"steps": 2})
        assert task["status"] == "working" and task["ttl"] == 600000 and task["pollInterval"] == 100
        assert not {"ttlMs", "pollIntervalMs", "resultType"} & task.keys()
        result = request(bridge, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result == {
            "content": [{"type": "text", "text": "reported 2 steps"}],
            "isError": False,
            "_meta": {RELATED: {"taskId": task["taskId"]}},
        }
        got = request(bridge, "tasks/get", {"taskId": task["taskId"]})["result"]
        assert got["status"] == "completed" and got["taskId"] == task["taskId"]
        assert statuses(bridge, task["taskId"])[-1] == "completed"


@FORMS
def test_a_failed_task_answers_tasks_result_with_its_error(form: str) -> None:
    with native_bridge(form) as bridge:
        task = start(bridge, "fail")
        error = bridge.request("tasks/result", {"taskId": task["taskId"]})["error"]
        assert error == {"code": -32050, "message": "the job broke", "data": {"job": 7}}
        got = request(bridge, "tasks/get", {"taskId": task["taskId"]})["result"]
        assert got["status"] == "failed" and got["statusMessage"] == "the job broke"


def test_a_tool_error_completes_the_task_with_its_result() -> None:
    with native_bridge() as bridge:
        task = start(bridge, "tool_error")
        result = request(bridge, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result["isError"] is True and result["content"][0]["text"] == "the input was bad"


def test_a_call_that_the_server_answers_at_once_gets_a_completed_task() -> None:
    with native_bridge() as bridge:
        task = start(bridge, "quick")
        assert task["status"] == "completed" and task["ttl"] is None
        result = request(bridge, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result["content"] == [{"type": "text", "text": "quick answer"}]
        assert not [event for event in events(bridge) if event.startswith("created")]


@FORMS
def test_the_input_requests_of_a_task_reach_the_client_tagged_with_the_task(form: str) -> None:
    with native_bridge(form) as bridge:
        task = start(bridge, "ask", {"kind": "form"})
        asked = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        assert asked["params"]["_meta"] == {RELATED: {"taskId": task["taskId"]}}
        assert asked["params"]["message"] == "Your name?"
        bridge.send(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
        )
        result = request(bridge, "tasks/result", {"taskId": task["taskId"]})["result"]
        assert result["content"][0]["text"] == 'answers: {"action": "accept", "content": {"name": "Ada"}}'
        seen = statuses(bridge, task["taskId"])  # "working" between them when a poll sees it
        assert seen[0] == "input_required" and seen[-1] == "completed"
        assert set(seen) <= {"input_required", "working", "completed"}


def test_a_plain_call_of_a_client_of_tasks_is_carried_as_before() -> None:
    with native_bridge() as bridge:
        response = request(bridge, "tools/call", {"name": "report", "arguments": {"steps": 1}})
        assert response["result"]["content"][0]["text"] == "reported 1 steps"


# ------------------------------------------------------------------------- cancellation


@FORMS
def test_tasks_cancel_ends_the_task_and_tells_the_server(form: str) -> None:
    with native_bridge(form) as bridge:
        task = start(bridge, "until_cancelled")
        waiting = bridge.request_async("tasks/result", {"taskId": task["taskId"]})
        cancelled = request(bridge, "tasks/cancel", {"taskId": task["taskId"]})["result"]
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task["taskId"]
        assert bridge.wait_response(waiting)["error"]["data"]["cause"] == "canceled"
        assert f"cancel {task['taskId']}" in events(bridge, "cancel ", 1)
        again = bridge.request("tasks/cancel", {"taskId": task["taskId"]})["error"]
        assert again["code"] == -32602 and again["data"]["detail"] == "the task has ended already"
        assert statuses(bridge, task["taskId"])[-1] == "cancelled"


def test_a_cancel_of_the_call_that_made_the_task_cancels_the_task() -> None:
    with native_bridge() as bridge:
        call = bridge.request_async("tools/call", {"name": "until_cancelled", "task": {}})
        task = bridge.wait_response(call)["result"]["task"]
        events(bridge, "listen ", 1)
        bridge.notify("notifications/cancelled", {"requestId": call})
        assert f"cancel {task['taskId']}" in events(bridge, "cancel ", 1)
        assert request(bridge, "tasks/get", {"taskId": task["taskId"]})["result"]["status"] == "cancelled"


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
def test_a_task_id_the_bridge_did_not_make_is_invalid_params(method: str) -> None:
    with native_bridge() as bridge:
        for params in ({"taskId": "no-such-task"}, {"taskId": 7}, {}):
            error = bridge.request(method, params)["error"]
            assert error["code"] == -32602


# ------------------------------------------------------------------------- tasks/list


def test_tasks_list_gives_the_tasks_of_the_session_page_by_page() -> None:
    with native_bridge() as bridge:
        made = [start(bridge, "quick")["taskId"] for _ in range(60)]
        first = request(bridge, "tasks/list", {})["result"]
        assert [task["taskId"] for task in first["tasks"]] == made[:50]
        second = request(bridge, "tasks/list", {"cursor": first["nextCursor"]})["result"]
        assert [task["taskId"] for task in second["tasks"]] == made[50:] and "nextCursor" not in second
        error = bridge.request("tasks/list", {"cursor": "not-a-cursor"})["error"]
        assert error["code"] == -32602
