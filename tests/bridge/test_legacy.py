"""The 2025-11-25 side: method classes, the params the bridge reads itself, the id of a long line."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbridge.bridge.rules.legacy import (
    FORWARDED_METHODS,
    InvalidParams,
    MethodClass,
    NotificationClass,
    classify,
    classify_notification,
    has_modern_meta,
    parse_cancelled,
    parse_initialize,
    parse_set_level,
    parse_subscribe,
    recover_id,
)
from mcpbridge.mcp.ids import shows_response
from mcpbridge.mcp.protocol import LOG_LEVELS
from mcpbridge.mcp.transports.framing import LineReader, TooLong

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


# --------------------------------------------------------------------------- classes


def test_the_eight_forwarded_methods_have_the_same_name_in_both_revisions() -> None:
    assert FORWARDED_METHODS == {
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
    }
    assert all(classify(method) is MethodClass.FORWARD for method in FORWARDED_METHODS)


@pytest.mark.parametrize(
    ("method", "kind"),
    [
        ("initialize", MethodClass.INITIALIZE),
        ("ping", MethodClass.PING),
        ("logging/setLevel", MethodClass.SET_LEVEL),
        ("server/discover", MethodClass.DISCOVER),
        ("resources/subscribe", MethodClass.SUBSCRIBE),
        ("resources/unsubscribe", MethodClass.UNSUBSCRIBE),
        ("subscriptions/listen", MethodClass.UNKNOWN),
        ("tasks/get", MethodClass.TASK),
        ("tasks/result", MethodClass.TASK),
        ("tasks/cancel", MethodClass.TASK),
        ("tasks/list", MethodClass.TASK),
        ("tasks/update", MethodClass.UNKNOWN),
        ("Tasks/get", MethodClass.UNKNOWN),
        ("Tools/List", MethodClass.UNKNOWN),
        ("tools/list ", MethodClass.UNKNOWN),
        ("", MethodClass.UNKNOWN),
    ],
)
def test_a_method_is_classified_by_an_exact_case_sensitive_lookup(method: str, kind: MethodClass) -> None:
    assert classify(method) is kind


@pytest.mark.parametrize(
    ("method", "kind"),
    [
        ("notifications/initialized", NotificationClass.INITIALIZED),
        ("notifications/cancelled", NotificationClass.CANCELLED),
        ("notifications/roots/list_changed", NotificationClass.ROOTS_LIST_CHANGED),
        ("notifications/progress", NotificationClass.OTHER),
        ("notifications/tasks/status", NotificationClass.OTHER),
        ("Notifications/Cancelled", NotificationClass.OTHER),
    ],
)
def test_a_notification_of_the_client_is_classified_by_its_method(
    method: str, kind: NotificationClass
) -> None:
    assert classify_notification(method) is kind


# --------------------------------------------------------------------------- params

VSCODE_INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}, "url": {}}},
    "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
    "_meta": {"x": 1},
    "unknown": True,
}


def test_the_initialize_params_of_vs_code_parse() -> None:
    params = parse_initialize(VSCODE_INITIALIZE)
    assert params.protocol_version == "2025-11-25"
    assert params.capabilities == VSCODE_INITIALIZE["capabilities"]
    assert params.client_info == {"name": "Visual Studio Code", "version": "1.140.0"}


def test_initialize_params_without_capabilities_get_an_empty_object() -> None:
    params = parse_initialize(
        {"protocolVersion": "2025-11-25", "clientInfo": {"name": "copilot", "version": "1"}}
    )
    assert params.capabilities == {}
    odd = parse_initialize({**VSCODE_INITIALIZE, "capabilities": [1]})
    assert odd.capabilities == {}


def test_the_client_info_keeps_only_the_members_of_an_implementation_with_their_types() -> None:
    info = {
        "name": "n",
        "version": "1",
        "title": "T",
        "description": 5,
        "websiteUrl": "https://example.com",
        "icons": [{"src": "data:image/png;base64,AA=="}],
        "extra": {"secret": "x"},
    }
    params = parse_initialize({"protocolVersion": "2025-11-25", "clientInfo": info})
    assert params.client_info == {
        "name": "n",
        "version": "1",
        "title": "T",
        "websiteUrl": "https://example.com",
        "icons": [{"src": "data:image/png;base64,AA=="}],
    }
    bad_icons = parse_initialize(
        {"protocolVersion": "x", "clientInfo": {**info, "icons": [{"mimeType": "a"}]}}
    )
    assert "icons" not in bad_icons.client_info


@pytest.mark.parametrize(
    "params",
    [
        None,
        "x",
        [],
        {},
        {"protocolVersion": "2025-11-25", "capabilities": {}},
        {"protocolVersion": "2025-11-25", "clientInfo": {"name": "x"}},
        {"protocolVersion": "2025-11-25", "clientInfo": {"version": "1"}},
        {"protocolVersion": "2025-11-25", "clientInfo": {"name": "x", "version": 1}},
        {"protocolVersion": "2025-11-25", "clientInfo": "x"},
        {"protocolVersion": 20251125, "clientInfo": {"name": "x", "version": "1"}},
    ],
)
def test_initialize_params_without_a_protocol_version_string_or_a_full_client_info_are_invalid(
    params: Any,
) -> None:
    with pytest.raises(InvalidParams) as info:
        parse_initialize(params)
    assert info.value.cause == "invalid_params" and info.value.detail


@pytest.mark.parametrize("level", LOG_LEVELS)
def test_each_of_the_eight_log_levels_is_a_valid_set_level(level: str) -> None:
    assert parse_set_level({"level": level, "_meta": {}}) == level


@pytest.mark.parametrize("params", [None, {}, {"level": "loud"}, {"level": "WARNING"}, {"level": 3}, "debug"])
def test_a_set_level_without_a_valid_level_is_invalid(params: Any) -> None:
    with pytest.raises(InvalidParams):
        parse_set_level(params)


def test_subscribe_params_need_a_uri_that_is_a_non_empty_string() -> None:
    assert parse_subscribe({"uri": "file:///a.txt", "_meta": {}}) == "file:///a.txt"
    for params in (None, {}, {"uri": 5}, {"uri": ""}, {"uri": None}, ["file:///a"]):
        with pytest.raises(InvalidParams):
            parse_subscribe(params)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"requestId": 7, "reason": "stop"}, 7),
        ({"requestId": 0}, 0),
        ({"requestId": "b-1"}, "b-1"),
        ({"requestId": 1.5}, None),
        ({"requestId": 2.0}, None),
        ({"requestId": True}, None),
        ({"requestId": None}, None),
        ({"requestId": [1]}, None),
        ({}, None),
        (None, None),
        ("7", None),
    ],
)
def test_a_cancellation_names_a_string_or_integer_id_or_nothing(params: Any, expected: Any) -> None:
    found = parse_cancelled(params)
    assert found == expected and type(found) is type(expected)


def test_modern_meta_is_the_protocol_version_key_in_the_meta_object() -> None:
    assert has_modern_meta({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert not has_modern_meta({"_meta": {"progressToken": 0}})
    assert not has_modern_meta({"_meta": 7})
    assert not has_modern_meta({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})
    assert not has_modern_meta({})
    assert not has_modern_meta(None)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_the_params_parsers_take_any_json_value_and_raise_only_invalid_params(value: Any) -> None:
    for parse in (parse_initialize, parse_set_level, parse_subscribe):
        try:
            parse(value)
        except InvalidParams:
            pass
    found = parse_cancelled(value)
    assert found is None or isinstance(found, (str, int))
    meta = value.get("_meta") if isinstance(value, dict) else None
    expected = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
    assert has_modern_meta(value) is expected


# --------------------------------------------------------------------------- the id of a long line


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"x"', 7),
        (b' { "id" : -3 , "x": [', -3),
        (b'{"jsonrpc":"2.0","id":0,', 0),
        (b'{"jsonrpc":"2.0","id":"b-1","result":{"x":"\\ud800"}}', "b-1"),
        (b'{"id":"a\\"b",', 'a"b'),
        (b'{"id":"caf\xc3\xa9","method":"x"}', "caf\u00e9"),
        (b'{"id":123456789012345678901234567890}', 123456789012345678901234567890),
        # An id in a nested value, or as a value, does not count.
        (b'{"params":{"id":5,"list":[{"id":6}]},"name":"id","id":9}', 9),
        (b'{"method":"tools/call","params":{"id":5}', None),
        (b'{"params":{"id":5}}', None),
        # A value that the kept bytes cut, or that is not an id.
        (b'{"id":12', None),
        (b'{"id":"abc', None),
        (b'{"id":1.5}', None),
        (b'{"id":1e5}', None),
        (b'{"id":01}', None),
        (b'{"id":null}', None),
        (b'{"id":true}', None),
        (b'{"id":-}', None),
        (b'{"id":{"a":1}}', None),
        # Not a JSON string: bytes that are not UTF-8, a raw control character, a lone surrogate.
        (b'{"id":"\xb3\xe3rpc","method":"x"}', None),
        (b'{"id":"a\x1cb","method":"x"}', None),
        (b'{"id":"a\\ud800","method":"x"}', None),
        (b'[{"id":1}]', None),
        (b"", None),
        (b'{"method":"x"}', None),
    ],
)
def test_the_id_is_found_in_the_start_of_a_line_only_as_a_top_level_member(
    head: bytes, expected: Any
) -> None:
    found = recover_id(head, b"")
    assert found == expected and type(found) is type(expected)


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (b'yy"}},"jsonrpc":"2.0","id":7}', 7),
        (b'x" , "id" : -12 }\r', -12),
        (b'{"id":3}', 3),
        (b'"2.0","id":"req-1"}', "req-1"),
        (b',"id":"caf\xc3\xa9"}', "caf\u00e9"),
        (b',"id":123456789012345678901234567890}', 123456789012345678901234567890),
        # A string id with escape sequences, read forward from its key.
        (b',"id":"a\\"b"}', 'a"b'),
        (b',"id":"\\u001f"}', "\x1f"),
        (b'"x":"q\\\\","id":"\\\\"}', "\\"),
        # An id in a nested object has more than one "}" after it.
        (b',"params":{"id":5}}', None),
        # The text of a string value, and a key that only ends with "id".
        (b',"text":"a \\"id\\":5}"}', None),
        (b',"xid":5}', None),
        (b',"text":"a\\\\","id":5}', 5),
        (b'["id":5}', None),
        # A value that is not an integer or a valid string.
        (b',"id":1.5}', None),
        (b',"id":1e5}', None),
        (b',"id":null}', None),
        (b',"id":"a\x01b"}', None),
        (b',"id":"\xb3\xe3"}', None),
        # A text that does not end with the object, or that starts inside the member.
        (b',"id":5', None),
        (b',"id":5}x', None),
        (b"5}", None),
        (b'"id":5}', None),
        (b"}", None),
        (b"", None),
    ],
)
def test_the_id_is_found_at_the_end_of_a_line_only_as_the_last_top_level_member(
    tail: bytes, expected: Any
) -> None:
    found = recover_id(b"", tail)
    assert found == expected and type(found) is type(expected)


def test_the_start_of_the_line_wins_over_its_end() -> None:
    assert recover_id(b'{"jsonrpc":"2.0","id":1,"method":"x"', b',"id":2}') == 1
    assert recover_id(b'{"jsonrpc":"2.0","method":"x"', b',"id":2}') == 2


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":"b-1","result":{"action":"accept","content":{"text":"', True),
        (b'{"result":{"content":[{"type":"text","text":"', True),
        (b'{"jsonrpc":"2.0","id":"b-1","error":{"code":-1', True),
        # A method member makes a request or a notification, even beside a result, even escaped.
        (b'{"jsonrpc":"2.0","id":"b-1","method":"ping","params":{"x":"', False),
        (b'{"method":"tools/call","params":{"name":"echo","arguments":{"text":"', False),
        (b'{"jsonrpc":"2.0","id":"b-1","result":{},"method":null', False),
        (b'{"jsonrpc":"2.0","id":"b-1","\\u006dethod":"ping","params":{"', False),
        # A result inside the params, or members not shown yet, show no response.
        (b'{"jsonrpc":"2.0","id":"b-1","params":{"result":{"x":"', False),
        (b'{"jsonrpc":"2.0","id":"b-1","par', False),
        (b"[", False),
        (b"", False),
    ],
)
def test_the_start_of_a_line_shows_a_response_only_by_its_top_level_members(
    head: bytes, expected: bool
) -> None:
    assert shows_response(head) is expected


def _too_long(line: bytes, limit: int = 100) -> TooLong:
    item = LineReader(io.BytesIO(line + b"\n"), max_line_bytes=limit).next()
    assert isinstance(item, TooLong)
    return item


def test_the_id_of_a_too_long_line_of_vs_code_comes_from_its_start() -> None:
    line = b'{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"x":"' + b"y" * 3000 + b'"}}'
    item = _too_long(line)
    assert recover_id(item.head, item.tail) == 42


def test_the_id_of_a_too_long_line_of_the_typescript_sdk_comes_from_its_end() -> None:
    line = (
        b'{"method":"tools/call","params":{"name":"echo","arguments":{"text":"'
        + b"y" * 3000
        + b'"}},"jsonrpc":"2.0","id":43}\r'
    )
    item = _too_long(line)
    assert recover_id(item.head, b"") is None
    assert recover_id(item.head, item.tail) == 43
    longer = b'{"method":"x","params":{"text":"' + b"z" * 2000 + b'"},"jsonrpc":"2.0","id":"ts-44"}'
    item = _too_long(longer)
    assert recover_id(item.head, item.tail) == "ts-44"


def test_an_id_only_inside_the_params_of_a_too_long_line_is_not_taken() -> None:
    line = b'{"jsonrpc":"2.0","method":"x","params":{"id":5,"text":"' + b"q" * 3000 + b'","id":6}}'
    item = _too_long(line)
    assert recover_id(item.head, item.tail) is None


IDS = st.integers() | st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"), exclude_characters='"\\'),
    max_size=20,
)


@settings(max_examples=300, deadline=None)
@given(request_id=IDS, filler=st.text(min_size=300, max_size=600), first=st.booleans())
def test_the_id_of_any_long_request_is_recovered_where_vs_code_or_the_typescript_sdk_writes_it(
    request_id: Any, filler: str, first: bool
) -> None:
    body = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": filler, "id": "no"}}}
    message = (
        {"jsonrpc": "2.0", "id": request_id, **body}
        if first
        else {**body, "jsonrpc": "2.0", "id": request_id}
    )
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert recover_id(line[:256], line[-256:]) == request_id


@settings(max_examples=500, deadline=None)
@given(head=st.binary(max_size=300), tail=st.binary(max_size=300))
def test_recovering_an_id_from_any_bytes_never_raises(head: bytes, tail: bytes) -> None:
    found = recover_id(head, tail)
    assert found is None or (isinstance(found, (str, int)) and not isinstance(found, bool))
    if isinstance(found, str):
        found.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_recovering_an_id_from_any_json_text_never_raises(value: Any) -> None:
    text = json.dumps(value).encode("utf-8")
    found = recover_id(text[:256], text[-256:])
    if isinstance(value, dict) and found is not None and len(text) <= 256:
        assert value.get("id") == found
