"""The TypeScript SDK client in front of the bridge, and a server that answers with tasks.

The client (``legacy_client.mjs``, TypeScript SDK 1.32.2) speaks 2025-11-25 without
tasks, as VS Code does for a plain tool call; the upstream (``tests/peers/task_server.py``)
makes a task of each call of its task tools, on stdio and over HTTP. The bridge carries
each task to its end: the client sees only ordinary results, errors, progress and
requests for input.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_interop_ts import run_legacy_client, step

from conftest import NodePeers
from peers import running_task_http_server, task_server_command

pytestmark = [pytest.mark.interop, pytest.mark.slow]


STEPS: list[dict[str, Any]] = [
    {
        "id": "report",
        "kind": "call",
        "name": "report",
        "arguments": {"steps": 3, "gate": True},
        "progress": True,
    },
    {"id": "form", "kind": "call", "name": "ask", "arguments": {"kind": "form"}},
    {"id": "url", "kind": "call", "name": "ask", "arguments": {"kind": "url"}},
    {"id": "sample", "kind": "call", "name": "ask", "arguments": {"kind": "sample"}},
    {"id": "roots", "kind": "call", "name": "ask", "arguments": {"kind": "roots"}},
    {"id": "fail", "kind": "call", "name": "fail"},
    {"id": "tool_error", "kind": "call", "name": "tool_error"},
    {"id": "lose", "kind": "call", "name": "lose"},
    {"id": "echo", "kind": "call", "name": "echo", "arguments": {"text": "plain"}},
]


@pytest.fixture(scope="module", params=["stdio", "http"])
def summary(request: pytest.FixtureRequest, node: NodePeers) -> dict[str, Any]:
    """One run of the TypeScript client through the bridge to the task server (without
    listen streams: the polls carry the tasks), on stdio or over HTTP."""
    if request.param == "http":
        with running_task_http_server("--no-listen") as url:
            return run_legacy_client(node, [], STEPS, url=url)
    return run_legacy_client(node, task_server_command("--no-listen"), STEPS)


def test_the_sdk_client_sees_neither_tasks_nor_task_support(summary: dict[str, Any]) -> None:
    assert "tasks" not in summary["capabilities"]
    assert "report" in summary["tools"]["names"]
    assert summary["tools"]["invalidSchemas"] == []


def test_a_tool_that_only_runs_as_a_task_gives_the_sdk_client_its_result_and_progress(
    summary: dict[str, Any],
) -> None:
    record = step(summary, "report")
    assert record["text"] == "reported 3 steps" and record["isError"] is False
    token = record["requestIds"][-1]
    assert record["progress"] == [
        {"progressToken": token, "progress": n, "message": f"step {n} of 3"} for n in (1, 2, 3)
    ]


def test_the_input_requests_of_tasks_are_answered_by_the_sdk_client(summary: dict[str, Any]) -> None:
    assert step(summary, "form")["text"] == 'answers: {"action": "accept", "content": {"name": "Ada"}}'
    assert step(summary, "url")["text"] == 'answers: {"action": "accept"}'
    assert step(summary, "sample")["text"].startswith('answers: {"content": {"text": "hello"')
    assert step(summary, "roots")["text"].startswith(
        'answers: {"roots": [{"name": "workspace", "uri": "file://'
    )
    methods = [request["method"] for request in summary["requests"]]
    assert methods == ["elicitation/create", "elicitation/create", "sampling/createMessage", "roots/list"]


def test_a_failed_task_gives_the_sdk_client_the_error_of_the_server(summary: dict[str, Any]) -> None:
    error = summary["steps"]["fail"]["error"]
    assert error["code"] == -32050 and error["data"] == {"job": 7}
    assert "the job broke" in error["message"]


def test_a_tool_error_of_a_task_is_a_result_with_is_error(summary: dict[str, Any]) -> None:
    record = step(summary, "tool_error")
    assert record["isError"] is True and record["text"] == "the input was bad"


def test_a_lost_task_gives_the_sdk_client_a_named_error(summary: dict[str, Any]) -> None:
    error = summary["steps"]["lose"]["error"]
    assert error["code"] == -32603 and error["data"]["cause"] == "task_lost"


def test_a_plain_call_beside_the_tasks_is_unchanged(summary: dict[str, Any]) -> None:
    assert step(summary, "echo")["text"] == "plain"
    assert summary["exit"]["code"] == 0
