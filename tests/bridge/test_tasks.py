"""The mapping of tasks between 2025-11-25 and the Tasks extension, against both schemas."""

from __future__ import annotations

import ast
import copy
import inspect
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcpbridge.bridge.rules import tasks
from mcpbridge.bridge.rules.legacy import InvalidParams
from mcpbridge.bridge.rules.tasks import InvalidTask, Task
from mcpbridge.mcp.protocol import META_RELATED_TASK, TASKS_EXTENSION
from tests.schema import FrameInvalid, validate_legacy, validate_modern, validate_task

SAFE_INTEGER = 2**53 - 1
STAMPS = st.sampled_from(
    ["2026-08-21T10:30:00Z", "2026-08-21T10:30:00.123Z", "2026-08-21T12:30:05+02:00", "not a time"]
)
FORM = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
ROOTS = {"method": "roots/list"}
SAMPLE = {
    "method": "sampling/createMessage",
    "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5},
}
TOOL_RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}
TOOL_ERROR = {"content": [{"type": "text", "text": "bad input"}], "isError": True}


@st.composite
def extension_tasks(draw: st.DrawFn, status: str | None = None) -> dict[str, Any]:
    """A valid ``DetailedTask`` of the extension: the fields of every task and the payload of its status."""
    chosen = status or draw(st.sampled_from(tasks.STATUSES))
    task: dict[str, Any] = {
        "taskId": draw(st.text(min_size=1, max_size=20)),
        "status": chosen,
        "createdAt": draw(STAMPS),
        "lastUpdatedAt": draw(STAMPS),
        "ttlMs": draw(st.none() | st.integers(0, SAFE_INTEGER)),
    }
    if draw(st.booleans()):
        task["pollIntervalMs"] = draw(st.integers(0, 600_000))
    if draw(st.booleans()):
        task["statusMessage"] = draw(st.text(max_size=30))
    if chosen == "input_required":
        keys = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3, unique=True))
        task["inputRequests"] = {key: draw(st.sampled_from([FORM, ROOTS, SAMPLE])) for key in keys}
    elif chosen == "completed":
        task["result"] = draw(st.sampled_from([TOOL_RESULT, TOOL_ERROR]))
    elif chosen == "failed":
        error: dict[str, Any] = {
            "code": draw(st.integers(-32768, 32767)),
            "message": draw(st.text(max_size=20)),
        }
        if draw(st.booleans()):
            error["data"] = {"retryAfter": draw(st.integers(0, 100))}
        task["error"] = error
    return task


def legacy_shape_checks(task: Task, mapped: dict[str, Any]) -> None:
    """The 2025-11-25 task of ``task`` is valid in every place 2025-11-25 puts a task."""
    validate_legacy(mapped, "Task")
    validate_legacy(mapped, "GetTaskResult")
    validate_legacy(mapped, "CancelTaskResult")
    validate_legacy(mapped, "TaskStatusNotificationParams")
    validate_legacy(tasks.create_task_result(task), "CreateTaskResult")
    validate_legacy({"tasks": [mapped]}, "ListTasksResult")


# --------------------------------------------------------------------------- purity


def test_the_mapping_module_imports_no_io_thread_or_clock_module() -> None:
    tree = ast.parse(inspect.getsource(tasks))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    roots = {name.split(".")[0] for name in names}
    assert not roots & {"threading", "socket", "subprocess", "urllib3", "time", "os", "uuid", "secrets"}


# --------------------------------------------------------------------------- the field mapping


@settings(max_examples=300, deadline=None)
@given(value=extension_tasks())
def test_a_detailed_task_of_the_extension_maps_onto_a_2025_task_of_the_same_fields(
    value: dict[str, Any],
) -> None:
    validate_task({**value, "resultType": "complete"}, "GetTaskResult")
    validate_task(value, "TaskStatusNotificationParams")
    before = copy.deepcopy(value)
    task = tasks.parse_detailed(value)
    assert value == before
    mapped = tasks.legacy_task(task)
    legacy_shape_checks(task, mapped)
    assert mapped["taskId"] == value["taskId"] and mapped["status"] == value["status"]
    assert mapped["createdAt"] == value["createdAt"] and mapped["lastUpdatedAt"] == value["lastUpdatedAt"]
    assert mapped["ttl"] == value["ttlMs"]
    assert mapped.get("pollInterval") == value.get("pollIntervalMs")
    assert mapped.get("statusMessage") == value.get("statusMessage")
    assert not {"ttlMs", "pollIntervalMs", "result", "error", "inputRequests", "resultType"} & mapped.keys()
    assert dict(task.input_requests) == value.get("inputRequests", {})
    assert task.result == value.get("result")
    assert task.error == value.get("error")
    assert task.terminal == (value["status"] in ("completed", "failed", "cancelled"))


@settings(max_examples=200, deadline=None)
@given(value=extension_tasks(), status=st.sampled_from(tasks.STATUSES))
def test_a_create_task_result_maps_onto_a_nested_2025_create_task_result(
    value: dict[str, Any], status: str
) -> None:
    created = {
        key: item for key, item in value.items() if key not in ("inputRequests", "result", "error", "status")
    }
    created.update(status=status, resultType="task")
    validate_task(created, "CreateTaskResult")
    task = tasks.parse_created(created)
    result = tasks.create_task_result(task)
    validate_legacy(result, "CreateTaskResult")
    assert result == {"task": tasks.legacy_task(task)}
    assert result["task"]["ttl"] == created["ttlMs"]


@pytest.mark.parametrize(
    "change",
    [
        {"taskId": 7},
        {"status": "done"},
        {"createdAt": None},
        {"lastUpdatedAt": 1},
        {"ttlMs": "60000"},
        {"ttlMs": True},
        {"pollIntervalMs": 1.5},
        {"pollIntervalMs": None},
        {"statusMessage": 3},
    ],
    ids=lambda change: next(iter(change)),
)
def test_a_task_with_a_field_of_the_wrong_type_is_refused_as_the_schema_refuses_it(
    change: dict[str, Any],
) -> None:
    value = {
        "taskId": "t-1",
        "status": "working",
        "createdAt": "2026-08-21T10:30:00Z",
        "lastUpdatedAt": "2026-08-21T10:30:00Z",
        "ttlMs": 60000,
        **change,
    }
    with pytest.raises(FrameInvalid):
        validate_task(value, "WorkingTask")
    with pytest.raises(InvalidTask):
        tasks.parse_detailed(value)


@settings(max_examples=200, deadline=None)
@given(
    value=extension_tasks(), drop=st.sampled_from(["taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"])
)
def test_a_task_without_a_required_field_is_refused_as_the_schema_refuses_it(
    value: dict[str, Any], drop: str
) -> None:
    del value[drop]
    with pytest.raises(FrameInvalid):
        validate_task(value, "DetailedTask")
    with pytest.raises(InvalidTask):
        tasks.parse_detailed(value)


@pytest.mark.parametrize(
    ("status", "payload"),
    [
        ("input_required", {}),
        ("input_required", {"inputRequests": ["not", "a", "map"]}),
        ("completed", {}),
        ("completed", {"result": "text"}),
        ("failed", {}),
        ("failed", {"error": {"code": "x", "message": "m"}}),
        ("failed", {"error": {"code": 1}}),
    ],
)
def test_a_task_without_the_payload_of_its_status_is_refused_as_the_schema_refuses_it(
    status: str, payload: dict[str, Any]
) -> None:
    value = {
        "taskId": "t-1",
        "status": status,
        "createdAt": "2026-08-21T10:30:00Z",
        "lastUpdatedAt": "2026-08-21T10:30:00Z",
        "ttlMs": None,
        **payload,
    }
    with pytest.raises(FrameInvalid):
        validate_task(value, "DetailedTask")
    with pytest.raises(InvalidTask):
        tasks.parse_detailed(value)


def test_a_result_that_is_not_a_task_is_not_a_create_task_result() -> None:
    with pytest.raises(InvalidTask, match="not a CreateTaskResult"):
        tasks.parse_created({"resultType": "complete", "content": []})
    with pytest.raises(InvalidTask):
        tasks.parse_created([])


@settings(max_examples=100, deadline=None)
@given(value=extension_tasks("failed"))
def test_the_error_of_a_failed_task_reaches_the_client_with_its_code_message_and_data(
    value: dict[str, Any],
) -> None:
    error = tasks.failure_error(tasks.parse_detailed(value))
    assert error == value["error"]
    validate_legacy({"jsonrpc": "2.0", "id": 1, "error": error}, "JSONRPCErrorResponse")


@settings(max_examples=100, deadline=None)
@given(value=extension_tasks("input_required"))
def test_the_input_requests_of_a_task_are_an_input_required_result_for_the_input_rounds(
    value: dict[str, Any],
) -> None:
    task = tasks.parse_detailed(value)
    shaped = tasks.as_input_required(task.input_requests)
    validate_modern(shaped, "InputRequiredResult")
    assert shaped["inputRequests"] == value["inputRequests"]


# --------------------------------------------------------------------------- time


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4_000_000_000_000))
def test_a_timestamp_of_the_bridge_reads_back_to_its_millisecond(ms: int) -> None:
    text = tasks.timestamp(ms / 1000)
    assert text.endswith("Z")
    assert tasks.parse_timestamp(text) == pytest.approx(ms / 1000, abs=1e-6)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("1970-01-01T01:00:00+01:00", 0.0),
        ("1970-01-01t00:00:01.5z", 1.5),
        ("1969-12-31T23:00:00-01:00", 0.0),
    ],
)
def test_a_timestamp_of_the_server_is_read_with_its_offset(text: str, seconds: float) -> None:
    assert tasks.parse_timestamp(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "yesterday", "2026-02-30T00:00:00Z", "2026-08-21T10:30:00", "2026-08-21"]
)
def test_a_text_that_is_no_timestamp_has_no_time(text: str) -> None:
    assert tasks.parse_timestamp(text) is None


def test_the_age_of_a_task_is_measured_on_the_clock_of_the_server() -> None:
    task = Task("t", "working", "2026-08-21T10:30:00Z", "2026-08-21T12:30:02.5+02:00", 60000)
    assert tasks.age_seconds(task) == 2.5
    assert tasks.age_seconds(Task("t", "working", "now", "2026-08-21T10:30:00Z", 1)) == 0.0
    assert tasks.age_seconds(Task("t", "working", "2026-08-21T10:30:01Z", "2026-08-21T10:30:00Z", 1)) == 0.0


@pytest.mark.parametrize(
    ("interval", "watched", "seconds"),
    [
        (None, False, 1.0),
        (2500, False, 2.5),
        (0, False, 0.1),
        (-5, False, 0.1),
        (2500, True, 30.0),
        (60000, True, 60.0),
    ],
)
def test_a_task_is_polled_no_faster_than_its_poll_interval(
    interval: int | None, watched: bool, seconds: float
) -> None:
    task = Task("t", "working", "a", "b", None, poll_interval_ms=interval)
    assert tasks.poll_seconds(task, watched=watched) == seconds


# --------------------------------------------------------------------------- capabilities


def test_the_extension_joins_the_client_capabilities_of_an_upstream_request() -> None:
    caps = {"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/ui": {"a": 1}}}
    before = copy.deepcopy(caps)
    out = tasks.with_extension(caps)
    assert caps == before
    assert out == {
        "elicitation": {"form": {}},
        "extensions": {"io.modelcontextprotocol/ui": {"a": 1}, TASKS_EXTENSION: {}},
    }
    validate_modern(out, "ClientCapabilities")
    assert tasks.with_extension({}) == {"extensions": {TASKS_EXTENSION: {}}}


def test_the_extension_is_offered_only_as_an_object_in_the_discover_result() -> None:
    assert tasks.offers_extension({"capabilities": {"extensions": {TASKS_EXTENSION: {}}}})
    assert not tasks.offers_extension({"capabilities": {"extensions": {TASKS_EXTENSION: True}}})
    assert not tasks.offers_extension({"capabilities": {"extensions": {}}})
    assert not tasks.offers_extension({"capabilities": {}})
    assert not tasks.offers_extension(None)


def test_a_refusal_for_the_missing_extension_is_told_from_other_missing_capabilities() -> None:
    refusal = {
        "code": -32021,
        "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    }
    assert tasks.requires_extension(refusal)
    assert not tasks.requires_extension({**refusal, "code": -32602})
    assert not tasks.requires_extension({**refusal, "data": {"requiredCapabilities": {"sampling": {}}}})
    assert not tasks.requires_extension({"code": -32021, "message": "m"})


def test_a_client_declares_tasks_with_an_object() -> None:
    assert tasks.declares_tasks({"tasks": {"list": {}}})
    assert tasks.declares_tasks({"tasks": {}})
    assert not tasks.declares_tasks({"tasks": True})
    assert not tasks.declares_tasks({})
    initialize = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tasks": tasks.server_capability()},
        "serverInfo": {"name": "n", "version": "1"},
    }
    validate_legacy(initialize, "InitializeResult")
    assert initialize["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }


TOOLS = [
    {"name": "plain", "inputSchema": {"type": "object"}},
    {"name": "needs", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
    {"name": "never", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "forbidden"}},
    {"name": "odd", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "sometimes", "x": 1}},
]


def test_a_client_of_native_tasks_may_call_each_tool_as_a_task_the_server_does_not_forbid() -> None:
    before = copy.deepcopy(TOOLS)
    marked = tasks.mark_tools(TOOLS, native=True)
    assert TOOLS == before
    assert [tool["execution"]["taskSupport"] for tool in marked] == [
        "optional",
        "required",
        "forbidden",
        "optional",
    ]
    assert marked[1] is TOOLS[1] and marked[2] is TOOLS[2]
    validate_legacy({"tools": marked}, "ListToolsResult")


def test_a_client_whose_tasks_the_bridge_carries_calls_every_tool_plainly() -> None:
    marked = tasks.mark_tools(TOOLS, native=False)
    assert marked[0] is TOOLS[0]
    assert [tool.get("execution") for tool in marked] == [None, None, None, {"x": 1}]
    validate_legacy({"tools": marked}, "ListToolsResult")
    plain = [TOOLS[0]]
    assert tasks.mark_tools(plain, native=False) is plain


# --------------------------------------------------------------------------- 2025-11-25 requests


def test_an_input_request_of_a_task_names_its_task_in_meta() -> None:
    params = {"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}}
    tagged = tasks.related({**params, "_meta": {"vscode.x": 1}}, "t-1")
    assert tagged["_meta"] == {"vscode.x": 1, META_RELATED_TASK: {"taskId": "t-1"}}
    validate_legacy({"jsonrpc": "2.0", "id": "b-1", "method": "elicitation/create", "params": tagged})
    validate_legacy(tagged["_meta"][META_RELATED_TASK], "RelatedTaskMetadata")
    assert tasks.related(None, "t-2") == {"_meta": {META_RELATED_TASK: {"taskId": "t-2"}}}


def test_the_task_id_of_a_task_request_must_be_a_string() -> None:
    assert tasks.task_id_of({"taskId": "t-1"}) == "t-1"
    for params in (None, {}, {"taskId": 1}, []):
        with pytest.raises(InvalidParams):
            tasks.task_id_of(params)


@settings(max_examples=100, deadline=None)
@given(count=st.integers(0, 250), size=st.integers(1, 40))
def test_the_pages_of_tasks_list_give_every_task_once_in_order(count: int, size: int) -> None:
    records = [{"taskId": f"t-{i}"} for i in range(count)]
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    for _ in range(count + 2):
        page = tasks.list_page(records, params, size)
        assert len(page["tasks"]) <= size
        seen += page["tasks"]
        if "nextCursor" not in page:
            break
        assert isinstance(page["nextCursor"], str)
        params = {"cursor": page["nextCursor"]}
    assert seen == records


@settings(max_examples=200, deadline=None)
@given(cursor=st.text(max_size=20) | st.integers())
def test_a_cursor_that_tasks_list_did_not_make_is_invalid_params(cursor: Any) -> None:
    records = [{"taskId": "t"}] * 3
    assume(cursor not in (tasks._cursor(n) for n in range(4)))
    with pytest.raises(InvalidParams):
        tasks.list_page(records, {"cursor": cursor}, 2)
