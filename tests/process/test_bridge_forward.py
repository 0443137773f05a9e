"""Forwarded requests through the stdio bridge, on the real executable."""

from __future__ import annotations

import pytest

from harness import Bridge, bridge_command, fixture_command, text_of
from schema import validate_legacy_frame


@pytest.fixture
def bridge() -> Bridge:
    with Bridge(bridge_command(upstream=fixture_command("--many-tools", "9", "--page-size", "4"))) as b:
        b.initialize()
        yield b  # type: ignore[misc]


def test_tools_list_pages_with_string_cursors_only(bridge: Bridge) -> None:
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        response = bridge.request("tools/list", {"cursor": cursor} if cursor is not None else {})
        validate_legacy_frame(response)
        result = response["result"]
        pages += 1
        names += [tool["name"] for tool in result["tools"]]
        assert "resultType" not in result and "ttlMs" not in result and "cacheScope" not in result
        if "nextCursor" not in result:
            break
        assert isinstance(result["nextCursor"], str)
        cursor = result["nextCursor"]
    assert len(names) == len(set(names))
    assert {"echo", "add", "tool_0", "tool_8"} <= set(names)
    assert pages == -(-len(names) // 4)


def test_a_tool_call_returns_its_content(bridge: Bridge) -> None:
    response = bridge.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
    validate_legacy_frame(response)
    assert text_of(response) == "5"


def test_progress_reaches_the_client_token_before_the_result(bridge: Bridge) -> None:
    request_id = bridge.request_async(
        "tools/call",
        {
            "name": "progress",
            "arguments": {"count": 3, "ms": 1},
            "_meta": {"progressToken": "7f1c2b6e-uuid", "vscode.requestId": "r1", "traceparent": "00-a-b-01"},
        },
    )
    response = bridge.wait_response(request_id)
    progress = [f for f in bridge.seen if f.get("method") == "notifications/progress"]
    assert [p["params"]["progress"] for p in progress] == [1, 2, 3]
    for i, frame in enumerate(progress, start=1):
        validate_legacy_frame(frame)
        assert frame["params"]["progressToken"] == "7f1c2b6e-uuid"
        assert frame["params"]["total"] == 3
        assert frame["params"]["message"] == f"Step {i} of 3"
        assert "_meta" not in frame["params"]
    assert bridge.seen.index(progress[-1]) < bridge.seen.index(response)


def test_progress_token_zero_is_honoured(bridge: Bridge) -> None:
    request_id = bridge.request_async(
        "tools/call", {"name": "progress", "arguments": {"count": 2, "ms": 1}, "_meta": {"progressToken": 0}}
    )
    bridge.wait_response(request_id)
    tokens = [
        f["params"]["progressToken"] for f in bridge.seen if f.get("method") == "notifications/progress"
    ]
    assert tokens == [0, 0]


def test_without_a_token_no_progress_is_written(bridge: Bridge) -> None:
    request_id = bridge.request_async("tools/call", {"name": "progress", "arguments": {"count": 3, "ms": 1}})
    bridge.wait_response(request_id)
    assert not [f for f in bridge.seen if f.get("method") == "notifications/progress"]


def test_array_schemas_get_items_and_the_tool_still_works(bridge: Bridge) -> None:
    tools = {t["name"]: t for t in _all_tools(bridge)}
    schema = tools["bare_array"]["inputSchema"]
    assert schema["properties"]["values"]["items"] == {}
    pair = schema["properties"]["pair"]
    assert pair["items"] == {} and pair["maxItems"] == 2
    assert "outputSchema" not in tools["array_output"]
    assert tools["structured"]["outputSchema"]["type"] == "object"
    response = bridge.request("tools/call", {"name": "bare_array", "arguments": {"values": [1, 2, 3]}})
    assert text_of(response) == "3 values"
    bridge.close_stdin()
    assert bridge.wait_exit() == 0
    assert (
        "mcp-bridge-vscode: bridge: info: tool 'bare_array': added an items schema at '/properties/values'"
        " of the input schema" in bridge.stderr_text
    )


def test_structured_content_gets_a_mirror_text_only_when_it_has_none(bridge: Bridge) -> None:
    array = bridge.request("tools/call", {"name": "array_output", "arguments": {}})
    assert array["result"]["structuredContent"] == [1, 2, 3]
    assert any(b.get("text") == "[1,2,3]" for b in array["result"]["content"])
    structured = bridge.request("tools/call", {"name": "structured", "arguments": {"text": "abcd"}})
    texts = [b for b in structured["result"]["content"] if b["type"] == "text"]
    assert len(texts) == 1 and texts[0]["text"] == "4 bytes"


def test_cancel_of_a_slow_call_gets_no_response_and_the_bridge_goes_on(bridge: Bridge) -> None:
    slow = bridge.request_async("tools/call", {"name": "slow", "arguments": {"ms": 5000}})
    bridge.notify("notifications/cancelled", {"requestId": slow, "reason": "user"})
    bridge.notify("notifications/cancelled", {"requestId": 999999})
    assert text_of(bridge.request("tools/call", {"name": "echo", "arguments": {"text": "after"}})) == "after"
    assert bridge.request("ping")["result"] == {}
    assert not [f for f in bridge.seen if f.get("id") == slow]


def test_completion_prompts_and_resources_are_forwarded(bridge: Bridge) -> None:
    completion = bridge.request(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": ""}},
    )
    validate_legacy_frame(completion)
    assert completion["result"]["completion"]["values"] == ["alpha", "beta"]
    prompts = bridge.request("prompts/list")
    validate_legacy_frame(prompts)
    greet = bridge.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
    validate_legacy_frame(greet)
    assert greet["result"]["messages"][0]["content"]["text"] == "Hello, Ada."
    resources = bridge.request("resources/list")
    validate_legacy_frame(resources)
    assert any(r["uri"] == "file:///fixture/notes.txt" for r in resources["result"]["resources"])
    read = bridge.request("resources/read", {"uri": "file:///fixture/notes.txt"})
    validate_legacy_frame(read)
    content = read["result"]["contents"][0]
    assert content["text"] == "The notes of the fixture." and content["mimeType"] == "text/plain"
    validate_legacy_frame(bridge.request("resources/templates/list"))


def test_upstream_errors_pass_with_their_code_and_message(bridge: Bridge) -> None:
    error = bridge.request("tools/call", {"name": "no_such_tool", "arguments": {}})["error"]
    assert error["code"] == -32602 and "cause" not in error.get("data", {})


def test_a_missing_resource_gets_the_2025_code(bridge: Bridge) -> None:
    error = bridge.request("resources/read", {"uri": "file:///fixture/missing.txt"})["error"]
    assert error["code"] == -32002


def test_an_unknown_method_gets_method_not_found(bridge: Bridge) -> None:
    error = bridge.request("tasks/list", {})["error"]
    assert error["code"] == -32601 and error["data"]["cause"] == "method_not_found"


def test_large_results_pass_whole(bridge: Bridge) -> None:
    response = bridge.request(
        "tools/call", {"name": "big", "arguments": {"bytes": 5 * 1024 * 1024}}, timeout=60
    )
    assert len(text_of(response)) == 5 * 1024 * 1024


def test_upstream_log_messages_follow_the_client_level(bridge: Bridge) -> None:
    assert bridge.request("logging/setLevel", {"level": "warning"})["result"] == {}
    call = bridge.request_async("tools/call", {"name": "log", "arguments": {}})
    bridge.wait_response(call)
    logs = [f for f in bridge.seen if f.get("method") == "notifications/message"]
    assert [m["params"]["level"] for m in logs] == ["warning", "error"]
    for message in logs:
        validate_legacy_frame(message)
        assert set(message["params"]) <= {"level", "logger", "data"}
        assert message["params"]["logger"] == "fixture"


def _all_tools(bridge: Bridge) -> list[dict]:
    tools: list[dict] = []
    cursor = None
    while True:
        result = bridge.request("tools/list", {"cursor": cursor} if cursor else {})["result"]
        tools += result["tools"]
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools
