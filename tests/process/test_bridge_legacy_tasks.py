"""2025-11-25 tasks of a 2025-era server pass through the bridge unchanged, both ways.

The upstream is ``tests/peers/py_legacy_task_server.py`` (``mcp==1.30.0``, its own
task store); the client is a raw 2025-11-25 client that uses tasks, as VS Code 1.139.
"""

from __future__ import annotations

from typing import Any

from test_bridge_legacy import legacy_script

from conftest import WAIT
from harness import VSCODE_CAPABILITIES, Bridge, bridge_command
from peers import PEERS
from peers.legacy import legacy_python
from schema import validate_legacy

TASKS_CAPABILITIES = {
    **VSCODE_CAPABILITIES,
    "tasks": {"list": {}, "cancel": {}, "requests": {"elicitation": {"create": {}}}},
}
RELATED = "io.modelcontextprotocol/related-task"
#: The time limit of a list request in the run that tests the limits (120 s otherwise).
LIST_LIMIT = 1.0
#: ``mcp-bridge-vscode`` as the user runs it, with the list limit of the front end (``list`` of
#: :class:`mcpbridge.bridge.front.options.Timeouts`, which no option sets) from ``argv[1]``.
WITH_LIST_LIMIT = """
import dataclasses, runpy, sys
from mcpbridge.bridge.front.options import Timeouts
limits = {field.name: field.default for field in dataclasses.fields(Timeouts)}
limits["list"] = float(sys.argv.pop(1))
Timeouts.__init__.__defaults__ = tuple(limits.values())
sys.argv[0] = "mcp-bridge-vscode"
runpy.run_module("mcpbridge", run_name="__main__", alter_sys=True)
"""


def legacy_task_bridge() -> Bridge:
    return Bridge(bridge_command(upstream=[legacy_python(), str(PEERS / "py_legacy_task_server.py")]))


def with_list_limit(seconds: float, *arguments: str) -> list[str]:
    command = bridge_command(*arguments)
    assert command[1:3] == ["-m", "mcpbridge"]
    return [command[0], "-c", WITH_LIST_LIMIT, str(seconds), *command[3:]]


def result_of(bridge: Bridge, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = bridge.request(method, params)
    assert "result" in response, response
    result: dict[str, Any] = response["result"]
    return result


def test_the_tasks_of_a_2025_era_server_pass_through_both_ways() -> None:
    with legacy_task_bridge() as bridge:
        init = bridge.initialize(TASKS_CAPABILITIES)["result"]
        assert init["capabilities"]["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
        tools = {tool["name"]: tool for tool in result_of(bridge, "tools/list", {})["tools"]}
        assert tools["work"]["execution"] == {"taskSupport": "optional"}
        assert tools["confirm"]["execution"] == {"taskSupport": "required"}

        created = result_of(
            bridge, "tools/call", {"name": "work", "arguments": {"text": "x"}, "task": {"ttl": 60000}}
        )
        validate_legacy(created, "CreateTaskResult")
        task_id = created["task"]["taskId"]
        assert created["task"]["ttl"] == 60000
        result = result_of(bridge, "tasks/result", {"taskId": task_id})
        assert result["content"] == [{"type": "text", "text": "done: x"}]
        assert result["_meta"] == {RELATED: {"taskId": task_id}}
        got = result_of(bridge, "tasks/get", {"taskId": task_id})
        validate_legacy(got, "GetTaskResult")
        assert got["status"] == "completed" and got["statusMessage"] == "working on x"
        assert [task["taskId"] for task in result_of(bridge, "tasks/list", {})["tasks"]] == [task_id]
        status = [f["params"] for f in bridge.seen if f.get("method") == "notifications/tasks/status"]
        assert status and {params["taskId"] for params in status} == {task_id}


def test_the_request_of_a_task_of_a_2025_era_server_reaches_the_client_and_its_answer_the_server() -> None:
    with legacy_task_bridge() as bridge:
        bridge.initialize(TASKS_CAPABILITIES)
        task_id = result_of(bridge, "tools/call", {"name": "confirm", "task": {}})["task"]["taskId"]
        waiting = bridge.request_async("tasks/result", {"taskId": task_id})
        asked = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        assert asked["id"] == "u-1" and asked["params"]["_meta"] == {RELATED: {"taskId": task_id}}
        bridge.send(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"ok": True}}}
        )
        result = bridge.wait_response(waiting)["result"]
        assert result["content"] == [{"type": "text", "text": "confirmed: accept"}]


def test_tasks_result_of_a_2025_era_server_waits_as_long_as_a_call() -> None:
    # The server holds tasks/result until the task ends: a list's time limit would cut it off. The
    # command runs with a list limit of LIST_LIMIT s; a tasks/get that the server never answers,
    # sent after tasks/result, ends in that limit, so tasks/result has outlasted it once it has.
    held = legacy_script(
        """
elif m.get('method') == 'tasks/result':
    held = m['id']
    sys.stderr.write('scripted: holds tasks/result\\n'); sys.stderr.flush()
elif m.get('method') == 'tasks/get':
    sys.stderr.write('scripted: holds tasks/get\\n'); sys.stderr.flush()
elif m.get('method') == 'notifications/roots/list_changed':
    send({'jsonrpc': '2.0', 'id': held, 'result': {'content': [{'type': 'text', 'text': 'the end'}]}})
"""
    )
    with Bridge(with_list_limit(LIST_LIMIT, "--log-level", "debug", "--", *held)) as bridge:
        bridge.initialize(TASKS_CAPABILITIES)
        result = bridge.request_async("tasks/result", {"taskId": "t-1"})
        bridge.wait_stderr("scripted: holds tasks/result")
        got = bridge.request_async("tasks/get", {"taskId": "t-1"})
        bridge.wait_stderr("scripted: holds tasks/get")
        error = bridge.wait_response(got, LIST_LIMIT + WAIT)["error"]
        assert error["data"]["cause"] == "timeout", error
        bridge.notify("notifications/roots/list_changed")
        answer = bridge.wait_response(result)
        assert answer.get("result") == {"content": [{"type": "text", "text": "the end"}]}, answer
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
