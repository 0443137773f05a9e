"""The schema helper accepts what the official MCP schemas allow and rejects what they do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from schema import (
    CLIENT_REVISIONS,
    LEGACY,
    MODERN,
    SCHEMAS,
    ClientFrames,
    FrameInvalid,
    definition_for_method,
    methods,
    schema_path,
    strict_root,
    validate,
    validate_frame,
    validate_legacy,
    validate_legacy_frame,
    validate_modern,
    validate_modern_frame,
)

INITIALIZE_RESULT = {
    "protocolVersion": LEGACY,
    "capabilities": {"tools": {"listChanged": True}},
    "serverInfo": {"name": "example", "version": "1.0.0"},
}

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "mcpbridge", "version": "0.1.0"},
}


def response(result: object, id: int | str = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def test_a_valid_initialize_result_response_is_accepted() -> None:
    validate_legacy(INITIALIZE_RESULT, "InitializeResult")
    validate_legacy(response(INITIALIZE_RESULT), "JSONRPCResponse")
    validate_legacy(response(INITIALIZE_RESULT))
    assert validate_legacy_frame(response(INITIALIZE_RESULT), request_method="initialize") == [
        "JSONRPCResultResponse",
        "InitializeResult",
    ]


@pytest.mark.parametrize(
    "result",
    [
        {k: v for k, v in INITIALIZE_RESULT.items() if k != "serverInfo"},
        {**INITIALIZE_RESULT, "protocolVersion": 20251125},
        {**INITIALIZE_RESULT, "capabilities": []},
    ],
    ids=["no serverInfo", "numeric protocolVersion", "capabilities not an object"],
)
def test_an_invalid_initialize_result_is_rejected(result: dict[str, object]) -> None:
    with pytest.raises(FrameInvalid, match="InitializeResult"):
        validate_legacy(result, "InitializeResult")
    with pytest.raises(FrameInvalid, match="InitializeResult"):
        validate_legacy_frame(response(result), request_method="initialize")


def test_a_response_without_jsonrpc_version_is_rejected_with_its_location() -> None:
    frame = response(INITIALIZE_RESULT)
    frame["jsonrpc"] = "1.0"
    with pytest.raises(FrameInvalid, match=r"at /jsonrpc"):
        validate_legacy_frame(frame)


def test_a_request_is_checked_against_the_definition_of_its_method() -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "Visual Studio Code", "version": "1.108.0"},
        },
    }
    assert validate_legacy_frame(initialize) == ["JSONRPCRequest", "InitializeRequest"]
    call = {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"arguments": {}}}
    with pytest.raises(FrameInvalid, match="CallToolRequest"):
        validate_legacy_frame(call)


def test_a_notification_is_checked_against_the_definition_of_its_method() -> None:
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 7, "progress": 0.5, "total": 1},
    }
    assert validate_legacy_frame(progress) == ["JSONRPCNotification", "ProgressNotification"]
    del progress["params"]["progressToken"]  # type: ignore[attr-defined]
    with pytest.raises(FrameInvalid, match="ProgressNotification"):
        validate_legacy_frame(progress)


def test_an_error_response_needs_a_code_and_a_message() -> None:
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found"}}
    assert validate_legacy_frame(error) == ["JSONRPCErrorResponse"]
    del error["error"]["message"]  # type: ignore[attr-defined]
    with pytest.raises(FrameInvalid, match="JSONRPCErrorResponse"):
        validate_legacy_frame(error)


def test_a_method_the_revision_does_not_define_is_rejected() -> None:
    with pytest.raises(FrameInvalid, match="server/discover"):
        validate_legacy_frame({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})
    with pytest.raises(FrameInvalid, match="initialize"):
        validate_modern_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})


def test_a_frame_that_is_not_an_object_or_has_no_known_shape_is_rejected() -> None:
    with pytest.raises(FrameInvalid):
        validate_legacy_frame([{"jsonrpc": "2.0", "method": "ping", "id": 1}])
    with pytest.raises(FrameInvalid):
        validate_legacy_frame({"jsonrpc": "2.0", "id": 1})


def test_an_unknown_definition_name_is_an_error_of_the_test_not_of_the_frame() -> None:
    with pytest.raises(KeyError, match="NoSuchThing"):
        validate_legacy({}, "NoSuchThing")


def test_a_modern_tool_result_may_be_complete_or_ask_for_input() -> None:
    complete = {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}
    assert validate_modern_frame(response(complete), request_method="tools/call") == [
        "JSONRPCResultResponse",
        "CallToolResultResponse",
    ]
    validate_modern(complete, "CallToolResult")
    input_required = {"resultType": "input_required", "requestState": "opaque"}
    validate_modern_frame(response(input_required), request_method="tools/call")
    with pytest.raises(FrameInvalid, match="CallToolResult"):
        validate_modern({"content": []}, "CallToolResult")


def test_a_modern_request_carries_its_metadata_in_params() -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": MODERN_META},
    }
    assert validate_modern_frame(call) == ["JSONRPCRequest", "CallToolRequest"]
    del call["params"]["_meta"]  # type: ignore[attr-defined]
    with pytest.raises(FrameInvalid, match="CallToolRequest"):
        validate_modern_frame(call)


def test_every_method_maps_to_exactly_one_definition() -> None:
    legacy_requests, legacy_notifications = methods(LEGACY)
    modern_requests, modern_notifications = methods(MODERN)
    assert {"initialize", "ping", "tools/call", "elicitation/create"} <= legacy_requests
    assert {"notifications/initialized", "notifications/cancelled"} <= legacy_notifications
    assert {"server/discover", "subscriptions/listen", "tools/call"} <= modern_requests
    assert "initialize" not in modern_requests
    assert "notifications/subscriptions/acknowledged" in modern_notifications
    assert definition_for_method(MODERN, "notifications/cancelled", notification=True) == (
        "CancelledNotification"
    )


@pytest.mark.parametrize("revision", SCHEMAS)
def test_the_vendored_schema_is_the_shared_copy(repo_root: Path, revision: str) -> None:
    shared = repo_root.parent / "shared" / "spec" / schema_path(revision).name
    if not shared.is_file():
        pytest.skip("no shared/spec folder beside the repository")
    assert schema_path(revision).read_bytes() == shared.read_bytes()


def test_an_older_revision_classifies_its_requests_by_its_unions() -> None:
    requests, notifications = methods("2025-06-18")
    assert {"initialize", "tools/call", "elicitation/create", "sampling/createMessage"} <= requests
    assert "notifications/elicitation/complete" not in notifications
    assert "elicitation/create" not in methods("2025-03-26")[0]
    assert definition_for_method("2024-11-05", "roots/list") == "ListRootsRequest"


@pytest.mark.parametrize("revision", CLIENT_REVISIONS)
def test_each_client_revision_checks_responses_with_the_names_of_its_schema(revision: str) -> None:
    names = validate_frame(revision, response(INITIALIZE_RESULT), request_method="initialize")
    assert names[-1] == "InitializeResult"
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found"}}
    assert validate_frame(revision, error) == [
        "JSONRPCErrorResponse" if revision == LEGACY else "JSONRPCError"
    ]


@pytest.mark.parametrize(
    ("revision", "block"),
    [
        ("2025-03-26", {"type": "resource_link", "uri": "file:///a", "name": "a"}),
        ("2024-11-05", {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}),
    ],
)
def test_a_content_block_that_a_revision_does_not_define_is_rejected(
    revision: str, block: dict[str, object]
) -> None:
    result = {"content": [{"type": "text", "text": "a"}, block]}
    validate_frame(LEGACY, response(result), request_method="tools/call")
    with pytest.raises(FrameInvalid, match=f"{revision} CallToolResult"):
        validate_frame(revision, response(result), request_method="tools/call")


def test_an_older_request_frame_is_checked_with_its_id_and_a_method_it_lacks_is_rejected() -> None:
    form = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
    frame = {"jsonrpc": "2.0", "id": "b-1", "method": "elicitation/create", "params": form}
    assert validate_frame("2025-06-18", frame) == ["JSONRPCRequest", "ElicitRequest"]
    with pytest.raises(FrameInvalid, match="defines no request 'elicitation/create'"):
        validate_frame("2025-03-26", frame)
    with pytest.raises(FrameInvalid, match="JSONRPCRequest"):
        validate_frame("2025-06-18", {**frame, "id": None})


def test_client_frames_check_a_response_against_the_method_of_the_request_it_answers() -> None:
    frames = ClientFrames("2025-03-26")
    frames.sent({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a"}})
    frames.sent({"jsonrpc": "2.0", "method": "notifications/initialized"})
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    with pytest.raises(FrameInvalid, match="CallToolResult"):
        frames.received(response({"content": [link]}))
    frames.received(response({"content": []}))
    frames.received({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert frames.checked == {"CallToolResult": 1, "ToolListChangedNotification": 1}
    with pytest.raises(ValueError, match="no client speaks"):
        ClientFrames(MODERN)


@pytest.mark.parametrize("revision", CLIENT_REVISIONS)
def test_a_frame_check_refuses_a_member_that_the_revision_does_not_name(revision: str) -> None:
    result = {"content": [{"type": "text", "text": "a"}], "isError": False}
    validate_frame(revision, response(result), request_method="tools/call")
    # The plain check lets any member pass; the frame check is strict.
    validate(revision, {**result, "unknown": 1}, "CallToolResult")
    with pytest.raises(FrameInvalid, match=r"CallToolResult \(strict\).*'unknown'.*\(at /\)"):
        validate_frame(revision, response({**result, "unknown": 1}), request_method="tools/call")
    with pytest.raises(FrameInvalid, match=r"\(strict\).*'extra'.*\(at /content/0\)"):
        block = {"type": "text", "text": "a", "extra": True}
        validate_frame(revision, response({"content": [block]}), request_method="tools/call")
    with pytest.raises(FrameInvalid, match=r"\(strict\).*'extra'"):
        validate_frame(revision, {"jsonrpc": "2.0", "id": 1, "result": {}, "extra": 1})


@pytest.mark.parametrize("revision", CLIENT_REVISIONS)
def test_a_frame_check_lets_the_open_members_of_a_revision_pass(revision: str) -> None:
    meta = {"any.vendor/key": {"nested": [1]}}
    result = {"content": [{"type": "text", "text": "a"}], "_meta": meta}
    validate_frame(revision, response(result), request_method="tools/call")
    arguments = {"name": "a", "arguments": {"anything": {"goes": True}}, "_meta": {"progressToken": 1}}
    validate_frame(revision, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": arguments})
    validate_frame(revision, response({"anything": "goes"}), request_method="ping")


def test_the_parts_of_an_all_of_stay_open_in_the_strict_variant() -> None:
    # GetTaskResult is Result (with _meta) and Task: each part names only some of the members.
    task = {"taskId": "t", "status": "working", "createdAt": "2025-01-01T00:00:00Z", "ttl": None}
    task["lastUpdatedAt"] = "2025-01-01T00:00:00Z"
    validate_frame(LEGACY, response({**task, "_meta": {"k": 1}}), request_method="tasks/get")
    root = {"$defs": {"A": {"properties": {"a": {}}}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}}}
    strict = strict_root(root, "$defs")
    assert "additionalProperties" not in strict["$defs"]["A"]
    closed = strict_root({"$defs": {"A": {"properties": {"properties": {"properties": {}}}}}}, "$defs")
    assert closed["$defs"]["A"] == {
        "properties": {"properties": {"properties": {}, "additionalProperties": False}},
        "additionalProperties": False,
    }
