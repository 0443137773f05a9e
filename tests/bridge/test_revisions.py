"""The revisions of the client and the host profiles: the pure rules, each frame checked by its schema."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpbridge.bridge.rules import revisions, translate
from mcpbridge.bridge.rules.input import ClientKinds, InputError, Session
from mcpbridge.bridge.rules.revisions import (
    GENERIC,
    LATEST,
    REVISIONS,
    VSCODE,
    NotCarried,
    adapt_input_request,
    choose_profile,
    client_capabilities,
    negotiate,
    shape_result,
)
from mcpbridge.bridge.sessions.rounds import ProgressForwarder
from schema import CLIENT_REVISIONS, methods, validate, validate_frame

OLDER = CLIENT_REVISIONS[1:]
EVERY_KIND: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {"tools": {}, "context": {}},
    "elicitation": {"form": {}, "url": {}},
    "tasks": {"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}}},
}
TEXT = {"type": "text", "text": "hi"}
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
LINK = {"type": "resource_link", "uri": "file:///notes.txt", "name": "notes"}
EMBEDDED = {"type": "resource", "resource": {"uri": "file:///notes.txt", "text": "notes"}}
ALL_BLOCKS = [TEXT, IMAGE, AUDIO, LINK, EMBEDDED]
#: The kinds of content block that each revision defines.
BLOCKS_OF = {
    "2025-11-25": ["text", "image", "audio", "resource_link", "resource"],
    "2025-06-18": ["text", "image", "audio", "resource_link", "resource"],
    "2025-03-26": ["text", "image", "audio", "resource"],
    "2024-11-05": ["text", "image", "resource"],
}
CHOICE_FORM: dict[str, Any] = {
    "mode": "form",
    "message": "Pick a size.",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "size": {
                "type": "string",
                "title": "Size",
                "default": "s",
                "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
            },
            "name": {"type": "string", "minLength": 1},
        },
        "required": ["size"],
    },
}
MULTI_SELECT = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}


def request_frame(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": "b-1", "method": method}
    if params is not None:
        frame["params"] = params
    return frame


def result_frame(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def sampling(*contents: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": c} for c in contents], "maxTokens": 10}


# --------------------------------------------------------------------------- negotiation


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_revision_that_the_bridge_serves_is_the_answer(version: str) -> None:
    assert negotiate(version).version == version
    assert str(negotiate(version)) == version


@pytest.mark.parametrize("asked", ["2026-07-28", "2024-10-07", "2025-11-26", "", "latest"])
def test_any_other_revision_gets_the_latest(asked: str) -> None:
    assert negotiate(asked) is LATEST
    assert LATEST.version == "2025-11-25"


def test_the_table_has_the_four_revisions_of_the_schemas_newest_first() -> None:
    assert tuple(REVISIONS) == CLIENT_REVISIONS


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_revision_has_elicitation_and_its_modes_exactly_when_its_schema_defines_them(version: str) -> None:
    revision = REVISIONS[version]
    requests, notifications = methods(version)
    assert revision.form_elicitation is ("elicitation/create" in requests)
    assert revision.url_elicitation is ("notifications/elicitation/complete" in notifications)
    assert revision.tasks is ("tasks/get" in requests)


# --------------------------------------------------------------------------- capabilities


def test_the_latest_revision_keeps_every_capability_as_the_client_sent_it() -> None:
    assert client_capabilities(LATEST, EVERY_KIND) is EVERY_KIND


def test_a_2025_06_18_client_declares_the_form_and_sampling_without_tools_and_no_tasks() -> None:
    before = copy.deepcopy(EVERY_KIND)
    caps = client_capabilities(REVISIONS["2025-06-18"], EVERY_KIND)
    assert EVERY_KIND == before
    assert caps == {"roots": {"listChanged": True}, "sampling": {"context": {}}, "elicitation": {"form": {}}}
    kinds = ClientKinds.from_capabilities(caps)
    assert (kinds.form, kinds.url, kinds.sampling, kinds.sampling_tools) == (True, False, True, False)
    # ``elicitation: {"url": {}}`` means elicitation, whose one mode in 2025-06-18 is the form.
    only_url = client_capabilities(REVISIONS["2025-06-18"], {"elicitation": {"url": {}}})
    assert ClientKinds.from_capabilities(only_url).form


@pytest.mark.parametrize("version", ["2025-03-26", "2024-11-05"])
def test_a_client_of_a_revision_without_elicitation_never_declares_it_upstream(version: str) -> None:
    caps = client_capabilities(REVISIONS[version], EVERY_KIND)
    assert caps == {"roots": {"listChanged": True}, "sampling": {"context": {}}}
    assert "elicitation" not in translate.client_capabilities_for_upstream(caps)


# --------------------------------------------------------------------------- profiles


@pytest.mark.parametrize(
    ("setting", "name", "version", "expected"),
    [
        ("auto", "Visual Studio Code", "2025-11-25", VSCODE),
        ("auto", "Visual Studio Code - Insiders", "2025-11-25", VSCODE),
        ("auto", "some-client", "2025-11-25", VSCODE),
        ("auto", "some-client", "2026-07-28", VSCODE),  # an unknown revision: the latest
        ("auto", "some-client", "2025-06-18", GENERIC),
        ("auto", "Visual Studio Code", "2024-11-05", GENERIC),
        ("auto", "codex-mcp-client", "2025-11-25", GENERIC),
        ("auto", "cursor-vscode", "2025-11-25", GENERIC),
        ("auto", "claude-ai", "2025-11-25", GENERIC),
        ("auto", "Zed", "2025-11-25", GENERIC),
        ("vscode", "codex-mcp-client", "2025-06-18", VSCODE),
        ("generic", "Visual Studio Code", "2025-11-25", GENERIC),
    ],
)
def test_the_profile_comes_from_the_name_and_the_revision_unless_it_is_forced(
    setting: str, name: str, version: str, expected: revisions.Profile
) -> None:
    assert choose_profile(setting, name, negotiate(version)) is expected


#: The keys of each kind: VS Code's, another host's or an MCP App's, and those that never pass.
VSCODE_META = {"traceparent": "00-ab-cd-01", "tracestate": "k=v", "vscode.requestId": "r"}
OTHER_META = {
    "cursor.com/conversation": "c",
    "openai/outputTemplate": "ui://widget/a.html",
    "ui/resourceUri": "ui://a",
}
NEVER_META = {
    "progressToken": 3,
    "io.modelcontextprotocol/ui": {"x": 1},
    "tools.mcp.com/owned": 1,
    "bad key": 1,
    "x.": 2,
}
META = {**NEVER_META, **VSCODE_META, **OTHER_META}


def test_vscode_passes_its_own_keys_and_trace_context_only() -> None:
    assert translate.pass_meta(META, VSCODE) == VSCODE_META
    assert translate.pass_meta(META) == VSCODE_META


def test_generic_passes_every_key_of_the_grammar_that_the_protocol_does_not_own() -> None:
    assert translate.pass_meta(META, GENERIC) == {**VSCODE_META, **OTHER_META}
    params, token, meta = translate.forward_params({"name": "t", "_meta": META}, GENERIC)
    assert params == {"name": "t"} and token == 3 and meta == {**VSCODE_META, **OTHER_META}


@given(st.dictionaries(st.text(max_size=30), st.integers(), max_size=8))
def test_every_key_that_vscode_passes_the_generic_profile_passes_too(meta: dict[str, int]) -> None:
    generic = translate.pass_meta(meta, GENERIC)
    assert translate.pass_meta(meta, VSCODE).items() <= generic.items()
    assert all(translate.valid_meta_key(key) and not translate.reserved_meta_key(key) for key in generic)


# --------------------------------------------------------------------------- results


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_tool_result_keeps_the_content_blocks_that_the_revision_defines(version: str) -> None:
    result = {"content": copy.deepcopy(ALL_BLOCKS), "isError": False}
    before = copy.deepcopy(result)
    shaped, notes = shape_result(REVISIONS[version], GENERIC, "tools/call", result)
    assert result == before
    assert [block["type"] for block in shaped["content"]] == BLOCKS_OF[version]
    validate(version, shaped, "CallToolResult")
    dropped = len(ALL_BLOCKS) - len(BLOCKS_OF[version])
    if dropped:
        assert notes == [
            f"tools/call: left out content blocks that MCP {version} does not define ({dropped} of 5)"
        ]
    else:
        assert notes == [] and shaped is result


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_prompt_keeps_the_messages_whose_content_the_revision_defines(version: str) -> None:
    result = {"messages": [{"role": "user", "content": block} for block in ALL_BLOCKS]}
    shaped, notes = shape_result(REVISIONS[version], VSCODE, "prompts/get", result)
    assert [m["content"]["type"] for m in shaped["messages"]] == BLOCKS_OF[version]
    validate_frame(version, result_frame(shaped), request_method="prompts/get")
    assert bool(notes) is (len(BLOCKS_OF[version]) < len(ALL_BLOCKS))


@pytest.mark.parametrize("structured", [[1, 2, 3], "text", 7, None])
def test_the_generic_profile_leaves_out_structured_content_that_is_not_an_object(structured: Any) -> None:
    result = {"content": [{"type": "text", "text": "[1,2,3]"}], "structuredContent": structured}
    shaped, notes = shape_result(LATEST, GENERIC, "tools/call", result)
    assert "structuredContent" not in shaped and shaped["content"] == result["content"]
    assert notes == ["tools/call: left out a structuredContent that is not an object"]
    validate("2025-11-25", shaped, "CallToolResult")
    kept, _ = shape_result(LATEST, VSCODE, "tools/call", result)
    assert kept is result


def test_an_object_structured_content_stays_for_every_profile() -> None:
    result = {"content": [TEXT], "structuredContent": {"a": 1}}
    for profile in (VSCODE, GENERIC):
        assert shape_result(LATEST, profile, "tools/call", result) == (result, [])


@pytest.mark.parametrize("method", ["tools/list", "resources/read", "completion/complete"])
def test_the_other_results_pass_as_they_are(method: str) -> None:
    result = {"content": [LINK], "messages": [{"role": "user", "content": LINK}], "structuredContent": 1}
    assert shape_result(REVISIONS["2024-11-05"], GENERIC, method, result) == (result, [])


#: The members of a tool that each revision defines.
TOOL_KEYS_OF = {
    "2025-11-25": {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}
    | {"icons", "execution", "_meta"},
    "2025-06-18": {"name", "title", "description", "inputSchema", "outputSchema", "annotations", "_meta"},
    "2025-03-26": {"name", "description", "inputSchema", "annotations"},
    "2024-11-05": {"name", "description", "inputSchema"},
}
#: The members of ``serverInfo`` that each revision defines.
SERVER_INFO_KEYS_OF = {
    "2025-11-25": {"name", "title", "version", "icons", "description", "websiteUrl"},
    "2025-06-18": {"name", "title", "version"},
    "2025-03-26": {"name", "version"},
    "2024-11-05": {"name", "version"},
}
FULL_TOOL: dict[str, Any] = {
    "name": "count",
    "title": "Count",
    "description": "Count the letters.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"length": {"type": "integer"}}},
    "annotations": {"readOnlyHint": True, "title": "Count"},
    "icons": [{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png"}],
    "execution": {"taskSupport": "optional"},
    "_meta": {"vscode.example/ui": 1},
}
STRUCTURED_LATER = ["2025-03-26", "2024-11-05"]


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_the_initialize_result_has_the_capabilities_and_server_info_of_the_revision(version: str) -> None:
    info = {
        "name": "fixture",
        "title": "Fixture",
        "version": "1.0",
        "icons": [{"src": "data:image/png;base64,iVBORw0KGgo="}],
        "description": "A server.",
        "websiteUrl": "https://example.com",
    }
    caps = {"completions": {}, "logging": {}, "tools": {"listChanged": True}, "prompts": {}, "resources": {}}
    discover = {"capabilities": caps, "serverInfo": info}
    result = translate.initialize_result(
        discover,
        fallback_name="x",
        version="0.1.0",
        icon_rule=translate.IconRule.ALL,
        protocol_version=version,
    )
    assert result["serverInfo"].keys() == SERVER_INFO_KEYS_OF[version]
    assert ("completions" in result["capabilities"]) is (version != "2024-11-05")
    assert result["capabilities"].keys() - {"completions"} == caps.keys() - {"completions"}
    validate(version, result, "InitializeResult", strict=True)


def test_the_initialize_result_of_the_latest_revision_is_left_as_it_is() -> None:
    result = {"protocolVersion": LATEST.version, "capabilities": {"completions": {}}, "serverInfo": {"x": 1}}
    assert revisions.shape_initialize_result(LATEST, result) is result


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_tool_of_tools_list_keeps_the_members_that_the_revision_defines(version: str) -> None:
    result = {"tools": [copy.deepcopy(FULL_TOOL), {"name": "bare", "inputSchema": {"type": "object"}}]}
    before = copy.deepcopy(result)
    shaped, notes = shape_result(REVISIONS[version], GENERIC, "tools/list", result)
    assert result == before and notes == []
    assert shaped["tools"][0] == {key: FULL_TOOL[key] for key in TOOL_KEYS_OF[version]}
    assert shaped["tools"][1] == before["tools"][1]
    validate(version, shaped, "ListToolsResult", strict=True)
    if version == LATEST.version:
        assert shaped is result


ICONS = [{"src": "data:image/png;base64,iVBORw0KGgo="}]
#: A listed item of each kind, with every member that 2025-11-25 defines.
FULL_ITEMS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "prompts/list": (
        "prompts",
        "ListPromptsResult",
        {
            "name": "greet",
            "title": "Greet",
            "description": "Say hello.",
            "arguments": [{"name": "who", "title": "Who", "description": "A name.", "required": True}],
            "icons": ICONS,
            "_meta": {"x.example/a": 1},
        },
    ),
    "resources/list": (
        "resources",
        "ListResourcesResult",
        {
            "uri": "file:///notes.txt",
            "name": "notes",
            "title": "Notes",
            "description": "The notes.",
            "mimeType": "text/plain",
            "size": 5,
            "annotations": {"priority": 0.5},
            "icons": ICONS,
            "_meta": {"x.example/a": 1},
        },
    ),
    "resources/templates/list": (
        "resourceTemplates",
        "ListResourceTemplatesResult",
        {
            "uriTemplate": "file:///{name}",
            "name": "file",
            "title": "File",
            "description": "A file.",
            "mimeType": "text/plain",
            "annotations": {"priority": 0.5},
            "icons": ICONS,
            "_meta": {"x.example/a": 1},
        },
    ),
}
#: What each revision leaves out of a listed prompt, resource or template.
ITEM_LEFT_OUT_OF = {
    "2025-11-25": set(),
    "2025-06-18": {"icons"},
    "2025-03-26": {"icons", "title", "_meta"},
    "2024-11-05": {"icons", "title", "_meta"},
}


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
@pytest.mark.parametrize("method", FULL_ITEMS)
def test_a_listed_prompt_resource_or_template_keeps_the_members_of_the_revision(
    version: str, method: str
) -> None:
    name, definition, item = FULL_ITEMS[method]
    result = {name: [copy.deepcopy(item)], "nextCursor": "2"}
    before = copy.deepcopy(result)
    shaped, notes = shape_result(REVISIONS[version], GENERIC, method, result)
    assert result == before and notes == []
    left_out = ITEM_LEFT_OUT_OF[version]
    expected = {key: value for key, value in item.items() if key not in left_out}
    if "arguments" in expected and "title" in left_out:
        expected["arguments"] = [{"name": "who", "description": "A name.", "required": True}]
    assert shaped == {name: [expected], "nextCursor": "2"}
    validate(version, shaped, definition, strict=True)
    if not left_out:
        assert shaped is result


ANNOTATIONS = {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}
BLOCK_META = {"x.example/a": 1}
#: The members of a block, its annotations and resource contents, that 2025-06-18 added.
NEW_IN_2025_06_18 = ("_meta", "lastModified")


def without(value: Any, keys: tuple[str, ...]) -> Any:
    """``value`` without the members ``keys`` at any depth."""
    if isinstance(value, dict):
        return {key: without(item, keys) for key, item in value.items() if key not in keys}
    if isinstance(value, list):
        return [without(item, keys) for item in value]
    return value


def rich_blocks() -> list[dict[str, Any]]:
    """A block of each kind, with every member that 2025-11-25 defines of it."""
    return [
        {"type": "text", "text": "hi", "annotations": dict(ANNOTATIONS), "_meta": dict(BLOCK_META)},
        {**IMAGE, "annotations": dict(ANNOTATIONS), "_meta": dict(BLOCK_META)},
        {**AUDIO, "annotations": dict(ANNOTATIONS), "_meta": dict(BLOCK_META)},
        {
            "type": "resource",
            "resource": {"uri": "file:///notes.txt", "text": "notes", "_meta": dict(BLOCK_META)},
            "annotations": dict(ANNOTATIONS),
            "_meta": dict(BLOCK_META),
        },
        {**LINK, "title": "Notes", "icons": ICONS, "annotations": dict(ANNOTATIONS)}
        | {"_meta": dict(BLOCK_META)},
    ]


def expected_blocks(version: str) -> list[dict[str, Any]]:
    blocks = [block for block in rich_blocks() if block["type"] in BLOCKS_OF[version]]
    if version == "2025-06-18":
        return [{key: value for key, value in b.items() if key != "icons"} for b in blocks]
    if version in STRUCTURED_LATER:
        return [without(block, NEW_IN_2025_06_18) for block in blocks]
    return blocks


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_content_block_keeps_the_members_its_revision_defines(version: str) -> None:
    result = {"content": rich_blocks()}
    shaped, _notes = shape_result(REVISIONS[version], GENERIC, "tools/call", result)
    assert result == {"content": rich_blocks()}
    assert shaped["content"] == expected_blocks(version)
    validate(version, shaped, "CallToolResult", strict=True)
    prompt = {"messages": [{"role": "user", "content": block} for block in rich_blocks()]}
    shaped, _notes = shape_result(REVISIONS[version], GENERIC, "prompts/get", prompt)
    assert [message["content"] for message in shaped["messages"]] == expected_blocks(version)
    validate(version, shaped, "GetPromptResult", strict=True)


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_read_contents_and_listed_annotations_keep_the_members_of_the_revision(version: str) -> None:
    contents = [
        {"uri": "file:///a", "text": "a", "_meta": BLOCK_META},
        {"uri": "file:///b", "blob": "AA==", "_meta": BLOCK_META},
    ]
    read, _notes = shape_result(REVISIONS[version], GENERIC, "resources/read", {"contents": contents})
    older = version in STRUCTURED_LATER
    assert read == {"contents": without(contents, NEW_IN_2025_06_18) if older else contents}
    validate(version, read, "ReadResourceResult", strict=True)
    listed = {"resources": [{"uri": "file:///a", "name": "a", "annotations": ANNOTATIONS}]}
    shaped, _notes = shape_result(REVISIONS[version], GENERIC, "resources/list", listed)
    assert shaped == (without(listed, NEW_IN_2025_06_18) if older else listed)
    validate(version, shaped, "ListResourcesResult", strict=True)


@pytest.mark.parametrize("version", STRUCTURED_LATER)
def test_structured_content_that_the_text_holds_leaves_an_older_result(version: str) -> None:
    content = [{"type": "text", "text": '{"length": 4, "text": "abcd"}'}, IMAGE]
    result = {"content": content, "structuredContent": {"text": "abcd", "length": 4}}
    shaped, notes = shape_result(REVISIONS[version], VSCODE, "tools/call", result)
    assert shaped == {"content": content} and notes == []
    assert "structuredContent" in result
    validate(version, shaped, "CallToolResult", strict=True)


@pytest.mark.parametrize("version", STRUCTURED_LATER)
@pytest.mark.parametrize("structured", [{"text": "abcd", "length": 4}, [1, 2], "é"])
def test_structured_content_that_the_text_lacks_reaches_an_older_client_as_text(
    version: str, structured: Any
) -> None:
    content = [{"type": "text", "text": "4 bytes"}]
    result = {"content": content, "structuredContent": structured, "isError": False}
    shaped, notes = shape_result(REVISIONS[version], GENERIC, "tools/call", result)
    assert notes == []
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    assert shaped == {"content": [*content, {"type": "text", "text": text}], "isError": False}
    assert "structuredContent" not in shaped and result["content"] == content
    validate(version, shaped, "CallToolResult", strict=True)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_structured_content_stays_for_a_revision_that_defines_it(version: str) -> None:
    result = {"content": [{"type": "text", "text": "4 bytes"}], "structuredContent": {"length": 4}}
    assert shape_result(REVISIONS[version], GENERIC, "tools/call", result) == (result, [])


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_a_progress_notification_has_the_params_of_the_revision(version: str) -> None:
    params = {"progressToken": "t", "progress": 1, "total": 3, "message": "Step 1 of 3"}
    shaped = revisions.shape_notification(REVISIONS[version], "notifications/progress", params)
    assert ("message" in shaped) is (version != "2024-11-05")
    assert {key: shaped[key] for key in ("progressToken", "progress", "total")} == {
        "progressToken": "t",
        "progress": 1,
        "total": 3,
    }
    assert "message" in params
    frame = {"jsonrpc": "2.0", "method": "notifications/progress", "params": shaped}
    assert "ProgressNotification" in validate_frame(version, frame)


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_the_progress_of_a_request_reaches_the_client_in_the_terms_of_its_revision(version: str) -> None:
    written: list[tuple[str, dict[str, Any] | None]] = []

    class Output:
        def write_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
            written.append((method, params))
            return True

    forwarder = ProgressForwarder(Output(), "t", 100, REVISIONS[version])  # type: ignore[arg-type]
    forwarder({"progressToken": 7, "progress": 1, "message": "half"})
    forwarder.status("working")
    assert [method for method, _ in written] == ["notifications/progress"] * 2
    for method, params in written:
        frame = {"jsonrpc": "2.0", "method": method, "params": params}
        assert "ProgressNotification" in validate_frame(version, frame)
        assert params is not None and ("message" in params) is (version != "2024-11-05")


# --------------------------------------------------------------------------- input requests


def test_a_form_for_2025_06_18_has_no_mode_and_its_titled_choices_become_enum_names() -> None:
    before = copy.deepcopy(CHOICE_FORM)
    params = adapt_input_request(REVISIONS["2025-06-18"], "elicitation/create", CHOICE_FORM)
    assert CHOICE_FORM == before
    assert "mode" not in params
    assert params["requestedSchema"]["properties"]["size"] == {
        "type": "string",
        "title": "Size",
        "default": "s",
        "enum": ["s", "l"],
        "enumNames": ["Small", "Large"],
    }
    assert params["requestedSchema"]["properties"]["name"] == {"type": "string", "minLength": 1}
    validate_frame("2025-06-18", request_frame("elicitation/create", params))
    assert adapt_input_request(LATEST, "elicitation/create", CHOICE_FORM) is CHOICE_FORM


def test_a_multi_select_field_cannot_go_to_a_2025_06_18_client() -> None:
    form = copy.deepcopy(CHOICE_FORM)
    form["requestedSchema"]["properties"]["toppings"] = MULTI_SELECT
    with pytest.raises(NotCarried, match="a multi-select field"):
        adapt_input_request(REVISIONS["2025-06-18"], "elicitation/create", form)
    assert adapt_input_request(LATEST, "elicitation/create", form) is form


@pytest.mark.parametrize("version", OLDER)
def test_a_sampling_message_of_one_block_in_an_array_gets_the_block(version: str) -> None:
    params = sampling([TEXT], TEXT)
    adapted = adapt_input_request(REVISIONS[version], "sampling/createMessage", params)
    assert [m["content"] for m in adapted["messages"]] == [TEXT, TEXT]
    assert adapted["messages"][1] is params["messages"][1]
    validate_frame(version, request_frame("sampling/createMessage", adapted))
    plain = sampling(TEXT, IMAGE)
    assert adapt_input_request(REVISIONS[version], "sampling/createMessage", plain) is plain


@pytest.mark.parametrize("version", OLDER)
def test_a_sampling_message_of_several_blocks_cannot_go_to_an_older_client(version: str) -> None:
    with pytest.raises(NotCarried, match="a sampling message of several content blocks"):
        adapt_input_request(REVISIONS[version], "sampling/createMessage", sampling([TEXT, TEXT]))


def test_audio_goes_to_each_revision_but_2024_11_05() -> None:
    for version in CLIENT_REVISIONS[:-1]:
        params = sampling(AUDIO)
        assert adapt_input_request(REVISIONS[version], "sampling/createMessage", params) is params
    with pytest.raises(NotCarried, match="a sampling message with audio content"):
        adapt_input_request(REVISIONS["2024-11-05"], "sampling/createMessage", sampling(AUDIO))


# --------------------------------------------------------------------------- input rounds


def ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"elicitation-{next(counter)}"


def round_of(version: str, requests: dict[str, Any], caps: dict[str, Any] = EVERY_KIND) -> Any:
    revision = REVISIONS[version]
    kinds = ClientKinds.from_capabilities(client_capabilities(revision, caps))
    session = Session(kinds, ids(), revision)
    return session, session.plan_round({"resultType": "input_required", "inputRequests": requests})


@pytest.mark.parametrize("version", CLIENT_REVISIONS)
def test_each_request_of_a_round_has_the_shape_of_the_client_s_revision(version: str) -> None:
    requests = {
        "model": {"method": "sampling/createMessage", "params": sampling([TEXT])},
        "roots": {"method": "roots/list"},
    }
    if REVISIONS[version].form_elicitation:
        requests["size"] = {"method": "elicitation/create", "params": CHOICE_FORM}
        requests["confirm"] = {
            "method": "elicitation/create",
            "params": {"message": "Go?", "requestedSchema": {"type": "object", "properties": {}}},
        }
    _, planned = round_of(version, requests)
    assert [o.key for o in planned.outgoing] == list(requests)
    for outgoing in planned.outgoing:
        validate_frame(version, request_frame(outgoing.method, outgoing.params))
    assert planned.warnings == ()


def test_a_form_that_2025_06_18_cannot_take_is_declined_without_asking_and_logged() -> None:
    form = copy.deepcopy(CHOICE_FORM)
    form["requestedSchema"]["properties"]["toppings"] = MULTI_SELECT
    many = {"method": "elicitation/create", "params": form}
    session, planned = round_of("2025-06-18", {"many": many, "r": {"method": "roots/list"}})
    assert [o.key for o in planned.outgoing] == ["r"]
    assert dict(planned.immediate) == {"many": {"action": "decline"}}
    assert planned.warnings == (
        "input request 'many': a client of MCP 2025-06-18 cannot take a multi-select field, "
        "and the upstream server gets decline",
    )
    responses = session.input_responses({"r": {"roots": [{"uri": "file:///a"}]}})
    assert responses == {"many": {"action": "decline"}, "r": {"roots": [{"uri": "file:///a"}]}}
    with pytest.raises(KeyError):
        session.shape_answer("many", {"action": "accept"})


@pytest.mark.parametrize("version", OLDER)
def test_a_sampling_that_an_older_client_cannot_take_gets_no_answer_upstream(version: str) -> None:
    two = {"method": "sampling/createMessage", "params": sampling([TEXT, IMAGE])}
    session, planned = round_of(version, {"model": two})
    assert planned.outgoing == () and dict(planned.immediate) == {}
    assert planned.warnings == (
        f"input request 'model': a client of MCP {version} cannot take a sampling message of several "
        "content blocks, and the upstream server gets no answer for it",
    )
    assert session.input_responses({}) == {}
    with pytest.raises(KeyError):
        session.shape_answer("model", {"role": "assistant", "content": TEXT, "model": "m"})


@pytest.mark.parametrize("version", OLDER)
def test_url_elicitation_is_undeclared_for_an_older_client_as_for_vs_code_without_it(version: str) -> None:
    url = {"method": "elicitation/create", "params": {"mode": "url", "message": "Go.", "url": "https://a.b"}}
    with pytest.raises(InputError) as failed:
        round_of(version, {"auth": url})
    assert failed.value.cause == "undeclared_input_request"
    assert "elicitation.url" in str(failed.value.detail)
