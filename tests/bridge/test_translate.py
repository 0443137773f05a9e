"""The translation: capability masks, initialize, forwarded params, result rules, icons, events, names."""

from __future__ import annotations

import ast
import copy
import inspect
import json
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbridge.bridge.rules import errortable, legacy, translate
from mcpbridge.bridge.rules.translate import (
    LOG_LEVEL_ORDER,
    MAX_SCHEMA_DEPTH,
    Declared,
    IconRule,
    client_capabilities_for_upstream,
    declared_notifications,
    forward_params,
    initialize_result,
    legacy_error,
    listen_event,
    log_params,
    log_passes,
    progress_params,
    refused_state_text,
    reserved_meta_key,
    shape_result,
    valid_meta_key,
)
from mcpbridge.mcp.protocol import LOG_LEVELS
from tests.schema import FrameInvalid, validate_legacy, validate_modern

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)

DATA_ICON = {"src": "data:image/png;base64,AA==", "mimeType": "image/png"}
HTTP_ICON = {"src": "https://example.com/icon.png"}
FILE_ICON = {"src": "file:///home/user/icon.png"}


def shape(method: str, result: dict[str, Any], icon_rule: IconRule = IconRule.ALL) -> tuple[Any, list[str]]:
    """shape_result, with the check that the input does not change."""
    before = copy.deepcopy(result)
    shaped = shape_result(method, result, icon_rule=icon_rule)
    assert result == before, "shape_result changed its input"
    return shaped


# --------------------------------------------------------------------------- purity


@pytest.mark.parametrize("module", [legacy, translate, errortable], ids=lambda m: m.__name__)
def test_the_translation_modules_import_no_io_thread_or_clock_module(module: ModuleType) -> None:
    tree = ast.parse(inspect.getsource(module))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    roots = {name.split(".")[0] for name in names}
    assert not roots & {"threading", "socket", "subprocess", "requests", "urllib3", "time", "webbrowser"}


# --------------------------------------------------------------------------- capabilities

VSCODE_CAPABILITIES = {
    "roots": {"listChanged": True},
    "sampling": {},
    "elicitation": {"form": {}, "url": {}},
    "tasks": {"list": {}, "cancel": {}},
    "experimental": {"x": {"a": 1}},
    "extensions": {
        "io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]},
        "io.modelcontextprotocol/tasks": {},
    },
}


def test_vs_code_capabilities_go_upstream_without_tasks_roots_list_changed_and_the_tasks_extension() -> None:
    before = copy.deepcopy(VSCODE_CAPABILITIES)
    caps = client_capabilities_for_upstream(VSCODE_CAPABILITIES)
    assert VSCODE_CAPABILITIES == before
    assert json.dumps(caps) == json.dumps(
        {
            "experimental": {"x": {"a": 1}},
            "roots": {},
            "sampling": {},
            "elicitation": {"form": {}, "url": {}},
            "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}},
        }
    )
    validate_modern(caps, "ClientCapabilities")


def test_declared_sampling_settings_and_elicitation_modes_go_upstream_as_declared() -> None:
    caps = {
        "roots": {"listChanged": True},
        "sampling": {"context": {}, "tools": {}},
        "elicitation": {"form": {}, "url": {}},
        "tasks": {},
    }
    assert client_capabilities_for_upstream(caps) == {
        "roots": {},
        "sampling": {"context": {}, "tools": {}},
        "elicitation": {"form": {}, "url": {}},
    }
    copilot: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}}}
    assert client_capabilities_for_upstream(copilot) == copilot
    assert client_capabilities_for_upstream({"elicitation": {}}) == {"elicitation": {}}


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        (
            {
                "roots": True,
                "sampling": {"context": 7},
                "elicitation": [],
                "experimental": {"a": 1, "b": {}},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            },
            {"experimental": {"b": {}}, "sampling": {}},
        ),
        (
            {"elicitation": {"form": True, "url": {}}, "sampling": {"tools": []}},
            {"sampling": {}, "elicitation": {"url": {}}},
        ),
        ({"experimental": {}, "extensions": {"a.b/c": 1}}, {}),
        (None, {}),
        ({}, {}),
        ([{"roots": {}}], {}),
    ],
)
def test_capabilities_with_a_shape_that_is_not_valid_are_dropped_not_repaired(
    caps: Any, expected: Any
) -> None:
    out = client_capabilities_for_upstream(caps)
    assert out == expected
    validate_modern(out, "ClientCapabilities")


# --------------------------------------------------------------------------- initialize

FULL_DISCOVER = {
    "resultType": "complete",
    "ttlMs": 60000,
    "cacheScope": "public",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {
        "experimental": {"e": {}},
        "logging": {},
        "completions": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": True},
        "tasks": {"list": {}},
        "extensions": {"io.modelcontextprotocol/ui": {}, "io.modelcontextprotocol/tasks": {}},
    },
    "instructions": "Use the tools.",
    "_meta": {
        "io.modelcontextprotocol/serverInfo": {
            "name": "fixture",
            "title": "Fixture",
            "version": "1.2.3",
            "icons": [DATA_ICON],
            "description": "A server.",
            "websiteUrl": "https://example.com",
            "extra": 1,
        }
    },
}


def init(
    discover: Any, icon_rule: IconRule = IconRule.ALL, fallback_name: str = "fallback"
) -> dict[str, Any]:
    before = copy.deepcopy(discover)
    result = initialize_result(discover, fallback_name=fallback_name, version="0.1.0", icon_rule=icon_rule)
    assert discover == before
    validate_legacy(result, "InitializeResult")
    return result


def test_the_initialize_result_keeps_what_the_upstream_server_declared_in_2025_11_25_terms() -> None:
    assert init(FULL_DISCOVER) == {
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "experimental": {"e": {}},
            "logging": {},
            "completions": {},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "tools": {"listChanged": True},
            "extensions": {"io.modelcontextprotocol/ui": {}},
        },
        "serverInfo": {
            "name": "fixture",
            "title": "Fixture",
            "version": "1.2.3",
            "icons": [DATA_ICON],
            "description": "A server.",
            "websiteUrl": "https://example.com",
        },
        "instructions": "Use the tools.",
    }


def test_the_initialize_result_has_no_member_of_2026_07_28_and_never_tasks() -> None:
    result = init(FULL_DISCOVER)
    for key in ("resultType", "ttlMs", "cacheScope", "supportedVersions", "_meta"):
        assert key not in result
    assert "tasks" not in result["capabilities"]
    assert "io.modelcontextprotocol/tasks" not in result["capabilities"]["extensions"]


def test_without_server_info_the_fallback_name_and_the_bridge_version_are_used() -> None:
    discover = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    assert init(discover, fallback_name="my-server") == {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "my-server", "version": "0.1.0"},
    }
    assert init(discover, fallback_name="")["serverInfo"] == {"name": "mcp-bridge-vscode", "version": "0.1.0"}


@pytest.mark.parametrize(
    "meta",
    [
        {"io.modelcontextprotocol/serverInfo": {"name": "", "version": "1"}},
        {"io.modelcontextprotocol/serverInfo": {"name": "a"}},
        {"io.modelcontextprotocol/serverInfo": {"name": "a", "version": 1}},
        {
            "io.modelcontextprotocol/serverInfo": {
                "name": "a",
                "version": "1",
                "icons": [{"mimeType": "image/png"}],
            }
        },
        {"io.modelcontextprotocol/serverInfo": {"name": "a", "version": "1", "title": 5}},
        {"io.modelcontextprotocol/serverInfo": "a"},
        7,
    ],
)
def test_server_info_that_is_not_a_valid_implementation_gives_the_fallback(meta: Any) -> None:
    assert init({"capabilities": {}, "_meta": meta})["serverInfo"] == {"name": "fallback", "version": "0.1.0"}


def test_a_body_level_server_info_counts_when_meta_has_none() -> None:
    body = {"capabilities": {}, "serverInfo": {"name": "body", "version": "2"}}
    assert init(body)["serverInfo"] == {"name": "body", "version": "2"}
    both = {**body, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "meta", "version": "3"}}}
    assert init(both)["serverInfo"] == {"name": "meta", "version": "3"}


@pytest.mark.parametrize(
    "discover",
    [
        None,
        [],
        {"capabilities": [], "instructions": 7},
        {
            "capabilities": {
                "tools": True,
                "prompts": [],
                "resources": 1,
                "completions": "x",
                "experimental": 2,
                "extensions": {"a": 1},
            }
        },
    ],
)
def test_a_discover_result_with_members_that_are_not_valid_gives_a_minimal_result(discover: Any) -> None:
    assert init(discover) == {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "serverInfo": {"name": "fallback", "version": "0.1.0"},
    }


def test_a_remote_server_keeps_only_the_data_icons_of_its_server_info() -> None:
    icons = [HTTP_ICON, DATA_ICON, {"src": "DATA:image/png;base64,AA=="}, FILE_ICON, "x"]
    info = {"name": "s", "version": "1", "icons": icons}
    discover = {"capabilities": {}, "_meta": {"io.modelcontextprotocol/serverInfo": info}}
    with pytest.raises(FrameInvalid, match=r"'x' is not of type 'object' \(at /icons/4\)"):
        validate_legacy(info, "Implementation")
    info["icons"] = icons[:4]
    assert init(discover, IconRule.DATA_ONLY)["serverInfo"]["icons"] == [
        DATA_ICON,
        {"src": "DATA:image/png;base64,AA=="},
    ]
    assert init(discover, IconRule.ALL)["serverInfo"]["icons"] == icons[:4]
    info["icons"] = [HTTP_ICON]
    assert "icons" not in init(discover, IconRule.DATA_ONLY)["serverInfo"]


def test_a_flag_is_declared_only_when_it_is_json_true() -> None:
    assert declared_notifications(init(FULL_DISCOVER)) == Declared(True, True, True, True, True)
    assert declared_notifications(FULL_DISCOVER) == Declared(True, True, True, True, True)
    odd = {
        "capabilities": {
            "tools": {"listChanged": "true"},
            "prompts": {"listChanged": 1},
            "resources": {"subscribe": True},
            "logging": True,
        }
    }
    declared = declared_notifications(odd)
    assert declared == Declared(subscribe=True)
    assert declared.listens
    assert not declared_notifications({"capabilities": {"tools": {}}}).listens
    assert declared_notifications(None) == Declared()
    assert declared_notifications({"capabilities": 5}) == Declared()


# --------------------------------------------------------------------------- forwarded params


def test_forwarded_params_lose_meta_and_task_and_keep_the_progress_token_and_the_allowed_meta() -> None:
    params = {
        "name": "echo",
        "arguments": {"text": "hi", "_meta": 1},
        "task": {"ttl": 1000},
        "_meta": {
            "progressToken": "5c2e7a61-1f0e-4a43-9b38-6e0c2bdbd2f4",
            "vscode.conversationId": "c",
            "vscode.requestId": "r",
            "traceparent": "00-ab-cd-01",
        },
    }
    before = copy.deepcopy(params)
    out, token, meta = forward_params(params)
    assert params == before
    assert out == {"name": "echo", "arguments": {"text": "hi", "_meta": 1}}
    assert out["arguments"] is params["arguments"]
    assert token == "5c2e7a61-1f0e-4a43-9b38-6e0c2bdbd2f4"
    assert meta == {"vscode.conversationId": "c", "vscode.requestId": "r", "traceparent": "00-ab-cd-01"}


@pytest.mark.parametrize("params", [None, 1, "x", []])
def test_missing_params_forward_as_an_empty_object(params: Any) -> None:
    assert forward_params(params) == ({}, None, {})


@pytest.mark.parametrize(
    ("token", "expected"),
    [(0, 0), ("t", "t"), (1.5, 1.5), (False, False), (True, True), (2**70, 2**70)],
)
def test_each_scalar_progress_token_counts_also_zero_and_booleans(token: Any, expected: Any) -> None:
    out, found, meta = forward_params({"_meta": {"progressToken": token}})
    assert out == {} and meta == {}
    assert found == expected and type(found) is type(expected)


@pytest.mark.parametrize(
    "meta", [{"progressToken": None}, {"progressToken": {}}, {"progressToken": [1]}, {"t": 1}, 5]
)
def test_null_or_structured_progress_tokens_are_no_token(meta: Any) -> None:
    assert forward_params({"_meta": meta}) == ({}, None, {})


def test_only_trace_keys_and_valid_vscode_keys_that_the_protocol_does_not_own_pass_upstream() -> None:
    value = {"deep": ["unchanged"]}
    meta = {
        "traceparent": "00-ab-cd-01",
        "tracestate": "a=b",
        "baggage": "k=v",
        "vscode.requestId": value,
        "vscode.a/b": 1,
        "vscode.x-y_z.1": 2,
        "vscode.bad key": 3,
        "vscode.": 4,
        "vscode.x-": 5,
        "vscode.\u00e9": 6,
        "vscode.mcp/x": 7,
        "vscode.modelcontextprotocol/x": 8,
        "vscode./x": 9,
        "io.modelcontextprotocol/logLevel": "debug",
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "progressToken": 1,
        "other": 10,
        "VSCODE.x": 11,
    }
    _, token, passed = forward_params({"_meta": meta})
    assert token == 1
    assert passed == {
        "traceparent": "00-ab-cd-01",
        "tracestate": "a=b",
        "vscode.requestId": value,
        "vscode.a/b": 1,
        "vscode.x-y_z.1": 2,
    }
    assert passed["vscode.requestId"] is value


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("progressToken", True),
        ("io.modelcontextprotocol/protocolVersion", True),
        ("com.example-corp.app/my_key.v2", True),
        ("a", True),
        ("1abc/x", False),
        ("a..b/x", False),
        ("io.modelcontextprotocol/", False),
        ("-bad", False),
        ("bad-", False),
        ("", False),
        ("a b", False),
        ("/x", False),
        ("a/b/c", False),
    ],
)
def test_the_meta_key_grammar(key: str, valid: bool) -> None:
    assert valid_meta_key(key) is valid


def test_keys_with_a_protocol_prefix_or_the_progress_token_are_reserved() -> None:
    assert reserved_meta_key("io.modelcontextprotocol/protocolVersion")
    assert reserved_meta_key("org.mcp/x")
    assert reserved_meta_key("vscode.mcp/x")
    assert reserved_meta_key("progressToken")
    assert not reserved_meta_key("com.example/x")
    assert not reserved_meta_key("vscode.mcp")


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_forwarding_any_params_gives_an_object_and_changes_nothing(value: Any) -> None:
    before = copy.deepcopy(value)
    params, token, meta = forward_params(value)
    assert value == before
    assert isinstance(params, dict) and "_meta" not in params and "task" not in params
    assert token is None or isinstance(token, (str, int, float))
    assert all(key in ("traceparent", "tracestate") or key.startswith("vscode.") for key in meta)


# --------------------------------------------------------------------------- result rules


def test_a_result_loses_the_members_of_2026_07_28_and_the_server_info() -> None:
    raw = {
        "resultType": "complete",
        "ttlMs": 1000,
        "cacheScope": "public",
        "contents": [],
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
    }
    assert shape("resources/read", raw) == ({"contents": []}, [])
    other = {
        "messages": [],
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}, "k": 1},
    }
    assert shape("prompts/get", other)[0] == {"messages": [], "_meta": {"k": 1}}
    assert shape("prompts/get", {"messages": [], "_meta": 5})[0] == {"messages": []}
    assert shape("completion/complete", {"completion": {"values": []}, "_meta": {}})[0] == {
        "completion": {"values": []}
    }


@pytest.mark.parametrize("method", sorted(legacy.LIST_METHODS))
def test_a_list_result_loses_a_next_cursor_that_is_not_a_string(method: str) -> None:
    assert shape(method, {"items": [], "nextCursor": None})[0] == {"items": []}
    assert shape(method, {"items": [], "nextCursor": 7})[0] == {"items": []}
    assert shape(method, {"items": [], "nextCursor": "p2", "_meta": {"k": 1}})[0] == {
        "items": [],
        "nextCursor": "p2",
        "_meta": {"k": 1},
    }
    assert shape(method, {"items": [], "nextCursor": ""})[0] == {"items": [], "nextCursor": ""}


def test_a_method_that_has_no_pages_keeps_its_next_cursor() -> None:
    raw: dict[str, Any] = {"completion": {"values": []}, "nextCursor": None}
    assert shape("completion/complete", raw)[0] == raw


def tools_page(schema: Any, name: str = "t") -> dict[str, Any]:
    return {"resultType": "complete", "tools": [{"name": name, "inputSchema": schema}]}


def shape_schema(schema: Any, name: str = "t") -> tuple[Any, list[str]]:
    result, notes = shape("tools/list", tools_page(schema, name))
    return result["tools"][0]["inputSchema"], notes


def added(pointer: str, tool: str = "t") -> str:
    return f"tool '{tool}': added an items schema at '{pointer}' of the input schema"


BARE_ARRAY = {
    "type": "object",
    "properties": {
        "values": {"type": "array", "description": "Any values"},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        "choice": {"anyOf": [{"type": "array"}, {"type": "string"}]},
    },
    "required": ["values"],
    "additionalProperties": False,
}


def test_the_fixture_tool_bare_array_gets_three_items_schemas() -> None:
    result, notes = shape("tools/list", tools_page(BARE_ARRAY, "bare_array"))
    assert result["tools"][0]["inputSchema"] == {
        "type": "object",
        "properties": {
            "values": {"type": "array", "description": "Any values", "items": {}},
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "integer"}],
                "items": {},
                "maxItems": 2,
            },
            "choice": {"anyOf": [{"type": "array", "items": {}}, {"type": "string"}]},
        },
        "required": ["values"],
        "additionalProperties": False,
    }
    assert notes == [
        "tool 'bare_array': added an items schema at '/properties/values' of the input schema",
        "tool 'bare_array': added an items schema at '/properties/pair' of the input schema",
        "tool 'bare_array': added an items schema at '/properties/choice/anyOf/0' of the input schema",
    ]
    validate_legacy(result, "ListToolsResult")
    assert shape("tools/list", result)[1] == []


def test_an_array_with_prefix_items_only_gets_items_and_so_does_the_array_inside() -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "array"}]}},
    }
    fixed, notes = shape_schema(schema)
    assert fixed == {
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "string"}, {"type": "array", "items": {}}],
                "items": {},
            }
        },
    }
    assert notes == [added("/properties/pair"), added("/properties/pair/prefixItems/1")]


def test_items_false_keeps_a_max_items_and_limits_an_array_without_prefix_items_to_nothing() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "prefixItems": [{}], "items": False, "maxItems": 1},
            "b": {"type": "array", "items": False},
            "c": {"type": "array", "items": None},
            "d": {"type": "array", "prefixItems": 3, "items": False},
        },
    }
    fixed, notes = shape_schema(schema)
    assert fixed["properties"] == {
        "a": {"type": "array", "prefixItems": [{}], "items": {}, "maxItems": 1},
        "b": {"type": "array", "items": {}, "maxItems": 0},
        "c": {"type": "array", "items": {}},
        "d": {"type": "array", "prefixItems": 3, "items": {}},
    }
    assert len(notes) == 4


def test_items_that_are_false_in_javascript_become_an_empty_schema_without_max_items() -> None:
    props: dict[str, Any] = {
        name: {"type": "array", "items": value}
        for name, value in zip("abcdef", [0, 0.0, -0.0, "", None, float("nan")], strict=True)
    }
    props["g"] = {"type": "array", "prefixItems": [{}], "items": 0}
    fixed, notes = shape_schema({"type": "object", "properties": props})
    assert all(node["items"] == {} and "maxItems" not in node for node in fixed["properties"].values())
    assert len(notes) == 7


def test_items_that_are_true_in_javascript_stay_even_when_they_are_not_a_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": 1},
            "b": {"type": "array", "items": "x"},
            "c": {"type": "array", "items": True},
            "d": {"type": "array", "items": {"type": "string"}},
            "e": {"type": "array", "items": [{"type": "string"}]},
        },
    }
    fixed, notes = shape_schema(schema)
    assert fixed is schema
    assert notes == []


def test_type_arrays_other_spellings_and_boolean_schemas_stay_as_they_are() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["array", "null"]},
            "b": True,
            "c": False,
            "f": {"type": "Array"},
            "g": {},
        },
        "additionalProperties": False,
    }
    result = tools_page(schema)
    shaped, notes = shape("tools/list", result)
    assert notes == []
    assert shaped["tools"][0]["inputSchema"] is schema


def test_the_walk_visits_single_schemas_then_maps_then_arrays_then_items() -> None:
    schema = {
        "type": "object",
        "properties": {
            "choice": {"anyOf": [{"type": "array"}, {"type": "string"}]},
            "nested": {
                "type": "object",
                "properties": {"deep": {"type": "array", "items": {"type": "array"}}},
            },
        },
        "additionalProperties": {"type": "array"},
        "patternProperties": {"^x/y~z$": {"type": "array"}},
        "$defs": {"list": {"type": "array"}},
        "definitions": {"old": {"type": "array"}},
        "allOf": [{"oneOf": [{"not": {"type": "array"}}]}],
        "if": {"type": "array"},
        "then": {"type": "array"},
        "else": {"type": "array"},
        "dependencies": {"a": ["b"], "c": {"type": "array"}},
        "dependentSchemas": {"d": {"type": "array"}},
        "contains": {"type": "array"},
        "items": [{"type": "array"}],
    }
    fixed, notes = shape_schema(schema)
    assert notes == [
        added(pointer)
        for pointer in (
            "/additionalProperties",
            "/if",
            "/then",
            "/else",
            "/contains",
            "/properties/choice/anyOf/0",
            "/properties/nested/properties/deep/items",
            "/patternProperties/^x~1y~0z$",
            "/dependencies/c",
            "/dependentSchemas/d",
            "/$defs/list",
            "/definitions/old",
            "/allOf/0/oneOf/0/not",
            "/items/0",
        )
    ]
    assert fixed["dependencies"]["a"] == ["b"]
    assert shape_schema(fixed)[1] == []


def test_the_root_schema_is_fixed_and_pointer_tokens_are_escaped() -> None:
    schema = {
        "type": "array",
        "properties": {"a/b": {"type": "array"}, "~": {"type": "array"}, "": {"type": "array"}},
    }
    fixed, notes = shape_schema(schema)
    assert notes == [added(""), added("/properties/a~1b"), added("/properties/~0"), added("/properties/")]
    assert fixed["items"] == {}


def test_the_walk_stops_below_the_depth_limit_with_one_too_deep_line() -> None:
    levels = MAX_SCHEMA_DEPTH + 2
    node: dict[str, Any] = {"type": "array"}
    for _ in range(levels):
        node = {"type": "array", "not": node}
    fixed, notes = shape_schema(node)
    assert len(notes) == MAX_SCHEMA_DEPTH + 2
    assert notes[: MAX_SCHEMA_DEPTH + 1] == [added("/not" * depth) for depth in range(MAX_SCHEMA_DEPTH + 1)]
    pointer = "/not" * (MAX_SCHEMA_DEPTH + 1)
    assert notes[-1] == f"tool 't': the input schema at '{pointer}' is too deep to examine"
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        assert fixed["items"] == {}
        fixed = fixed["not"]
    assert "items" not in fixed


def test_an_80_level_deep_input_schema_gets_its_near_root_array_fixed_and_its_deep_chain_untouched() -> None:
    deep: dict[str, Any] = {"type": "array"}
    for _ in range(80):
        deep = {"type": "object", "properties": {"next": deep}}
    schema = {"type": "object", "properties": {"list": {"type": "array"}, "chain": deep}}
    result, notes = shape("tools/list", tools_page(schema, "deep"))
    fixed = result["tools"][0]["inputSchema"]
    assert fixed["properties"]["list"] == {"type": "array", "items": {}}
    assert notes[0] == added("/properties/list", "deep")
    assert len(notes) == 2 and notes[1].endswith("is too deep to examine")
    assert fixed["properties"]["chain"] is deep
    validate_legacy(result, "ListToolsResult")


def test_every_tool_of_a_page_is_walked_and_others_are_skipped() -> None:
    page: dict[str, Any] = {
        "tools": [
            {"name": "a", "inputSchema": {"type": "object", "properties": {"x": {"type": "array"}}}},
            {"name": "b", "inputSchema": {"type": "object"}},
            7,
            {"name": "c"},
            {"inputSchema": {"type": "array"}},
            {"name": "d", "inputSchema": {"type": "object", "properties": {"y": {"type": "array"}}}},
        ],
        "nextCursor": None,
    }
    result, notes = shape("tools/list", page)
    assert notes == [added("/properties/x", "a"), added("", ""), added("/properties/y", "d")]
    assert "nextCursor" not in result
    assert result["tools"][1] is page["tools"][1] and result["tools"][3] is page["tools"][3]
    call, call_notes = shape("tools/call", {"content": [], "inputSchema": {"type": "array"}})
    assert call_notes == [] and call["inputSchema"] == {"type": "array"}


def test_output_schemas_that_are_not_object_schemas_are_dropped() -> None:
    page = {
        "tools": [
            {
                "name": "a",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "array", "items": {"type": "integer"}},
            },
            {"name": "b", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            {"name": "c", "inputSchema": {"type": "object"}, "outputSchema": True},
            {"name": "d", "inputSchema": {"type": "object"}},
            {"name": "e", "inputSchema": {"type": "object"}, "outputSchema": {"type": ["object"]}},
        ]
    }
    result, _ = shape("tools/list", page)
    assert result == {
        "tools": [
            {"name": "a", "inputSchema": {"type": "object"}},
            {"name": "b", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            {"name": "c", "inputSchema": {"type": "object"}},
            {"name": "d", "inputSchema": {"type": "object"}},
            {"name": "e", "inputSchema": {"type": "object"}},
        ]
    }
    validate_legacy(result, "ListToolsResult")


def test_structured_content_without_a_text_block_gets_a_compact_json_text_mirror() -> None:
    raw: dict[str, Any] = {
        "resultType": "complete",
        "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
        "structuredContent": {"text": "hi", "length": 2},
    }
    result, _ = shape("tools/call", raw)
    assert result == {
        "content": [
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "text", "text": '{"text":"hi","length":2}'},
        ],
        "structuredContent": {"text": "hi", "length": 2},
    }
    assert result["content"][0] is raw["content"][0]
    validate_legacy(result, "CallToolResult")


@pytest.mark.parametrize(
    ("structured", "text"),
    [
        (0, "0"),
        ([1, 2], "[1,2]"),
        ([1, 2, 3], "[1,2,3]"),
        ("\u00e9", '"\u00e9"'),
        (False, "false"),
        ({}, "{}"),
    ],
)
def test_structured_content_of_each_json_type_stays_and_is_mirrored(structured: Any, text: str) -> None:
    result, _ = shape("tools/call", {"content": [], "structuredContent": structured})
    assert result == {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def test_null_structured_content_or_an_existing_text_block_gives_no_mirror() -> None:
    assert shape("tools/call", {"content": [], "structuredContent": None})[0] == {
        "content": [],
        "structuredContent": None,
    }
    own = {"content": [{"type": "text", "text": "own"}], "structuredContent": {"a": 1}, "isError": False}
    assert shape("tools/call", own)[0] == own


def test_a_call_result_always_has_a_content_array() -> None:
    assert shape("tools/call", {"resultType": "complete", "isError": True})[0] == {
        "isError": True,
        "content": [],
    }
    assert shape("tools/call", {"content": {}})[0] == {"content": []}
    assert shape("resources/read", {"contents": []})[0] == {"contents": []}


def test_the_array_output_tool_loses_its_output_schema_and_its_result_keeps_the_array_with_a_mirror() -> None:
    page = {
        "tools": [
            {
                "name": "array_output",
                "inputSchema": {"type": "object"},
                "outputSchema": {"type": "array", "items": {"type": "integer"}},
            },
            {"name": "structured", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
        ]
    }
    tools, _ = shape("tools/list", page)
    assert "outputSchema" not in tools["tools"][0] and "outputSchema" in tools["tools"][1]
    call, _ = shape("tools/call", {"content": [], "structuredContent": [1, 2, 3]})
    assert call == {"content": [{"type": "text", "text": "[1,2,3]"}], "structuredContent": [1, 2, 3]}


def test_a_big_result_is_shared_not_copied() -> None:
    big = {"type": "text", "text": "x" * 1_000_000}
    raw: dict[str, Any] = {"resultType": "complete", "content": [big], "structuredContent": {"a": [1] * 1000}}
    result, _ = shape("tools/call", raw)
    assert result["content"] is raw["content"] and result["content"][0] is big
    assert result["structuredContent"] is raw["structuredContent"]


# --------------------------------------------------------------------------- icons

ICONS = [HTTP_ICON, DATA_ICON, FILE_ICON]


def with_icons(item: dict[str, Any], icons: Any = None) -> dict[str, Any]:
    return {**item, "icons": list(ICONS) if icons is None else icons}


@pytest.mark.parametrize(
    ("method", "key", "item", "definition"),
    [
        ("tools/list", "tools", {"name": "t", "inputSchema": {"type": "object"}}, "ListToolsResult"),
        ("prompts/list", "prompts", {"name": "p"}, "ListPromptsResult"),
        ("resources/list", "resources", {"uri": "file:///a", "name": "a"}, "ListResourcesResult"),
        (
            "resources/templates/list",
            "resourceTemplates",
            {"uriTemplate": "file:///{x}", "name": "x"},
            "ListResourceTemplatesResult",
        ),
    ],
)
def test_a_remote_server_keeps_only_data_icons_on_list_items(
    method: str, key: str, item: dict[str, Any], definition: str
) -> None:
    raw = {key: [with_icons(item), with_icons(item, [HTTP_ICON]), with_icons(item, "x"), item]}
    remote, _ = shape(method, raw, IconRule.DATA_ONLY)
    assert remote[key] == [with_icons(item, [DATA_ICON]), item, item, item]
    assert remote[key][3] is item
    validate_legacy(remote, definition)
    local, _ = shape(method, raw, IconRule.ALL)
    assert local[key] == raw[key]


def test_a_remote_server_keeps_only_data_icons_on_resource_links_of_a_call_and_a_prompt() -> None:
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    text = {"type": "text", "text": "t", "icons": [HTTP_ICON]}  # not a link: not touched
    call, _ = shape("tools/call", {"content": [with_icons(link), text]}, IconRule.DATA_ONLY)
    assert call == {"content": [with_icons(link, [DATA_ICON]), text]}
    assert call["content"][1] is text
    prompt = {
        "messages": [
            {"role": "user", "content": with_icons(link, [FILE_ICON])},
            {"role": "user", "content": text},
        ]
    }
    shaped, _ = shape("prompts/get", prompt, IconRule.DATA_ONLY)
    assert shaped["messages"][0] == {"role": "user", "content": link}
    assert shaped["messages"][1] is prompt["messages"][1]
    validate_legacy(shaped, "GetPromptResult")
    assert shape("prompts/get", prompt, IconRule.ALL)[0] == prompt
    listed = {"messages": [{"role": "user", "content": [with_icons(link, [HTTP_ICON, DATA_ICON])]}]}
    assert shape("prompts/get", listed, IconRule.DATA_ONLY)[0] == {
        "messages": [{"role": "user", "content": [with_icons(link, [DATA_ICON])]}]
    }


def test_data_icons_are_recognized_without_regard_to_case() -> None:
    icons = [{"src": "Data:image/png;base64,AA=="}, {"src": "dataX"}, {"src": 5}, {"mimeType": "image/png"}]
    result, _ = shape("prompts/list", {"prompts": [{"name": "p", "icons": icons}]}, IconRule.DATA_ONLY)
    assert result["prompts"][0]["icons"] == [{"src": "Data:image/png;base64,AA=="}]


METHODS = sorted(legacy.FORWARDED_METHODS)


@settings(max_examples=400, deadline=None)
@given(
    method=st.sampled_from(METHODS),
    result=st.dictionaries(
        st.text(max_size=12)
        | st.sampled_from(
            [
                "tools",
                "content",
                "structuredContent",
                "nextCursor",
                "_meta",
                "messages",
                "prompts",
                "resultType",
            ]
        ),
        JSON,
        max_size=6,
    ),
    rule=st.sampled_from(list(IconRule)),
)
def test_shaping_any_object_result_never_raises_and_never_changes_the_input(
    method: str, result: dict[str, Any], rule: IconRule
) -> None:
    shaped, notes = shape(method, result, rule)
    assert isinstance(shaped, dict) and all(isinstance(note, str) for note in notes)
    assert not {"resultType", "ttlMs", "cacheScope"} & set(shaped)
    if method in legacy.LIST_METHODS and "nextCursor" in shaped:
        assert isinstance(shaped["nextCursor"], str)
    if method == "tools/call":
        assert isinstance(shaped["content"], list)
    json.dumps(shaped, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(method=st.sampled_from(METHODS), value=JSON)
def test_shaping_a_value_that_is_not_an_object_gives_it_back(method: str, value: Any) -> None:
    if not isinstance(value, dict):
        assert shape_result(method, value, icon_rule=IconRule.DATA_ONLY) == (value, [])


@settings(max_examples=200, deadline=None)
@given(schema=JSON)
def test_walking_any_input_schema_twice_finds_nothing_the_second_time(schema: Any) -> None:
    first, _ = shape("tools/list", tools_page(schema))
    _, again = shape("tools/list", first)
    assert [note for note in again if "too deep" not in note] == []


# --------------------------------------------------------------------------- notifications


def test_progress_goes_to_the_client_token_with_only_the_progress_members() -> None:
    upstream = {"progressToken": 17, "progress": 2, "total": 3, "message": "Step 2 of 3", "_meta": {"k": 1}}
    params = progress_params("5c2e7a61", upstream)
    assert params == {"progressToken": "5c2e7a61", "progress": 2, "total": 3, "message": "Step 2 of 3"}
    validate_legacy(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}, "ProgressNotification"
    )
    assert progress_params(0, {"progressToken": 1, "progress": 0.5}) == {"progressToken": 0, "progress": 0.5}
    assert progress_params(1, {"progress": 1, "total": "3", "message": 4}) == {
        "progressToken": 1,
        "progress": 1,
    }


@pytest.mark.parametrize("params", [None, {}, {"progress": "1"}, {"progress": True}, {"progress": None}, [1]])
def test_progress_without_a_number_is_dropped(params: Any) -> None:
    assert progress_params("t", params) is None


def test_a_log_message_keeps_exactly_level_logger_and_data() -> None:
    upstream = {
        "level": "warning",
        "logger": "fixture",
        "data": "a message at the level warning",
        "_meta": {"x": 1},
    }
    params = log_params(upstream)
    assert params == {"level": "warning", "logger": "fixture", "data": "a message at the level warning"}
    assert list(params) == ["level", "logger", "data"]
    validate_legacy(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": params}, "LoggingMessageNotification"
    )
    assert log_params({"level": "debug", "data": None}) == {"level": "debug", "data": None}


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        {},
        {"level": "debug"},
        {"level": "loud", "data": 1},
        {"level": "DEBUG", "data": 1},
        {"level": "info", "logger": 5, "data": 1},
    ],
)
def test_a_log_message_that_is_not_valid_is_dropped(params: Any) -> None:
    assert log_params(params) is None


def test_a_log_message_passes_at_or_above_the_client_level() -> None:
    assert list(LOG_LEVEL_ORDER) == list(LOG_LEVELS)
    assert [level for level in LOG_LEVELS if log_passes(level, "warning")] == [
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    assert all(log_passes(level, "debug") for level in LOG_LEVELS)
    assert all(log_passes(level, None) for level in LOG_LEVELS)
    assert not log_passes("loud", None)
    assert log_passes("emergency", "emergency") and not log_passes("alert", "emergency")


@pytest.mark.parametrize(
    "method",
    [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    ],
)
def test_a_list_change_goes_out_without_params_or_subscription_id(method: str) -> None:
    meta = {"_meta": {"io.modelcontextprotocol/subscriptionId": 3}}
    assert listen_event(method, meta) == (method, None)
    assert listen_event(method, None) == (method, None)
    assert listen_event(method, {}) == (method, None)
    kept = listen_event(method, {"_meta": {"io.modelcontextprotocol/subscriptionId": 3, "k": 1}})
    assert kept == (method, {"_meta": {"k": 1}})
    validate_legacy({"jsonrpc": "2.0", "method": method, "params": kept[1]}, None)
    validate_legacy({"jsonrpc": "2.0", "method": method}, None)


def test_a_resource_update_goes_out_with_exactly_its_uri() -> None:
    method = "notifications/resources/updated"
    params = {"uri": "file:///fixture/notes.txt", "_meta": {"io.modelcontextprotocol/subscriptionId": "s"}}
    event = listen_event(method, params)
    assert event == (method, {"uri": "file:///fixture/notes.txt"})
    assert params["_meta"] == {"io.modelcontextprotocol/subscriptionId": "s"}
    validate_legacy({"jsonrpc": "2.0", "method": method, "params": event[1]}, "ResourceUpdatedNotification")
    assert listen_event(method, {"uri": 5}) is None
    assert listen_event(method, {}) is None
    assert listen_event(method, None) is None


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("notifications/cancelled", {"requestId": 1}),
        ("notifications/message", {"level": "info", "data": 1}),
        ("notifications/progress", {"progressToken": 1, "progress": 1}),
        ("notifications/subscriptions/acknowledged", {}),
        ("notifications/tasks/status", {}),
        ("notifications/Tools/list_changed", None),
        ("notifications/tools/list_changed", [1]),
        ("notifications/tools/list_changed", "x"),
    ],
)
def test_every_other_event_of_a_listen_stream_stays_in_the_bridge(method: str, params: Any) -> None:
    assert listen_event(method, params) is None


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(sorted(translate.LISTEN_EVENTS) + ["notifications/cancelled", "x"]), params=JSON
)
def test_translating_any_event_never_raises_and_never_passes_a_subscription_id(
    method: str, params: Any
) -> None:
    before = copy.deepcopy(params)
    event = listen_event(method, params)
    assert params == before
    if event is not None:
        out = event[1]
        assert out is None or (out and "io.modelcontextprotocol/subscriptionId" not in out.get("_meta", {}))
    progress_params("t", params)
    log_params(params)


# --------------------------------------------------------------------------- errors and texts


def test_a_refused_request_state_gives_a_text_that_tells_what_to_do() -> None:
    start = (
        "The upstream server did not accept the saved state of the request. The answer possibly came after "
        "the time limit of the state, or the server started again. Upstream message: "
    )
    assert (
        refused_state_text("tools/call", "Invalid requestState.")
        == start + "Invalid requestState. Run the tool again."
    )
    assert (
        refused_state_text("prompts/get", "state expired") == start + "state expired. Send the request again."
    )
    assert refused_state_text("resources/read", "x. ") == start + "x. Send the request again."


def test_the_2026_resource_not_found_of_a_read_becomes_the_2025_code() -> None:
    error = {"code": -32602, "message": "Resource not found", "data": {"uri": "file:///x"}}
    assert legacy_error("resources/read", error) == {**error, "code": -32002}
    assert error["code"] == -32602
    for method, other in (
        ("resources/read", {"code": -32602, "message": "bad", "data": {"x": 1}}),
        ("resources/read", {"code": -32602, "message": "bad"}),
        ("resources/read", {"code": -32002, "message": "nf", "data": {"uri": "file:///x"}}),
        ("tools/call", {"code": -32602, "message": "Unknown tool", "data": {"uri": "file:///x"}}),
    ):
        assert legacy_error(method, other) is other
