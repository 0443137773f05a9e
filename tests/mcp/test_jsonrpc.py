"""The pure JSON-RPC core: parsing, id rules, the nesting limit, serialization."""

from __future__ import annotations

import json

import pytest

from mcpbridge.mcp import jsonrpc
from mcpbridge.mcp.jsonrpc import (
    NO_DATA,
    ErrorResponse,
    FrameError,
    Notification,
    Request,
    Response,
    parse,
    serialize,
)


def frame_error(line: bytes | str, max_depth: int = 64) -> FrameError:
    with pytest.raises(FrameError) as info:
        parse(line, max_depth=max_depth)
    return info.value


def test_a_request_a_notification_and_both_kinds_of_response_parse() -> None:
    assert parse(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', max_depth=64) == Request(1, "ping")
    assert parse('{"jsonrpc":"2.0","method":"n","params":{}}', max_depth=64) == Notification("n", {})
    assert parse(b'{"jsonrpc":"2.0","id":"a","result":[]}', max_depth=64) == Response("a", [])
    err = parse(b'{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}', max_depth=64)
    assert isinstance(err, ErrorResponse) and err.id is None and err.error.data is NO_DATA


@pytest.mark.parametrize("bad_id", ["true", "1.5", "null", "[1]", "{}"])
def test_a_request_id_must_be_a_string_or_an_integer(bad_id: str) -> None:
    error = frame_error(f'{{"jsonrpc":"2.0","id":{bad_id},"method":"m"}}')
    assert error.cause == "invalid_id"


@pytest.mark.parametrize("bad_id", ["true", "1.5", "null", "[1]"])
def test_a_response_with_a_bad_id_is_reported_as_a_response(bad_id: str) -> None:
    error = frame_error(f'{{"jsonrpc":"2.0","id":{bad_id},"result":{{}}}}')
    assert error.cause == "invalid_id" and error.is_response


def test_the_nesting_limit_counts_levels_from_the_root() -> None:
    def nested(levels: int) -> str:
        return (
            '{"jsonrpc":"2.0","id":7,"method":"m","params":'
            + '{"a":' * (levels - 1)
            + "1"
            + "}" * (levels - 1)
            + "}"
        )

    assert isinstance(parse(nested(10), max_depth=10), Request)
    error = frame_error(nested(11), max_depth=10)
    assert (error.cause, error.id, error.detail) == ("too_deep", 7, "limit: 10 levels")


def test_nesting_far_beyond_the_interpreter_stack_is_too_deep_not_a_crash() -> None:
    assert frame_error("[" * 200_000 + "]" * 200_000).cause == "too_deep"


@pytest.mark.parametrize(
    "line",
    [
        b"\xff\xfe",
        b'{"jsonrpc":"2.0","method":"m","params":{"s":"\\ud800"}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"s":"\\udc00x"}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"s":"a\x01b"}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"n":NaN}}',
        b'{"jsonrpc":"2.0","method":"m","params":{"n":1e400}}',
        b'{"jsonrpc":"2.0","method":"m"',
        b"9" * 5000,
    ],
)
def test_lines_that_could_not_be_written_back_as_json_are_parse_errors(line: bytes) -> None:
    assert frame_error(line).cause == "parse_error"


def test_a_surrogate_pair_escape_is_valid() -> None:
    msg = parse(b'{"jsonrpc":"2.0","method":"m","params":{"s":"\\ud83d\\ude00"}}', max_depth=64)
    assert isinstance(msg, Notification) and msg.params == {"s": "\U0001f600"}


@pytest.mark.parametrize(
    "line, cause",
    [
        ('{"jsonrpc":"1.0","id":"x","method":"m"}', "invalid_request_shape"),
        ('{"id":1,"method":"m"}', "invalid_request_shape"),
        ('{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}', "invalid_request_shape"),
        ('{"jsonrpc":"2.0","id":1}', "invalid_request_shape"),
        ("[1,2]", "invalid_request_shape"),
        ('"text"', "invalid_request_shape"),
        ('{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', "invalid_request_shape"),
    ],
)
def test_valid_json_that_is_not_json_rpc_names_its_shape(line: str, cause: str) -> None:
    assert frame_error(line).cause == cause


def test_a_shape_error_keeps_the_id_it_could_read() -> None:
    assert frame_error('{"jsonrpc":"1.0","id":"x","method":"m"}').id == "x"


def test_serialize_writes_one_line_even_with_newlines_in_strings() -> None:
    line = serialize(Response(1, {"text": "a\nb\r\u2028"}))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 1, "result": {"text": "a\nb\r\u2028"}}


def test_serialize_round_trips_every_message_kind() -> None:
    for msg in [
        Request("r", "tools/call", {"name": "x"}),
        Notification("notifications/initialized"),
        Response(0, {}),
        jsonrpc.error_response(None, -32700, "Parse error"),
        jsonrpc.error_response(3, -32603, "m", {"cause": "x"}),
    ]:
        assert parse(serialize(msg), max_depth=64) == msg


@pytest.mark.parametrize("control_free", [False, True])
def test_a_long_line_in_a_bytearray_parses_as_its_bytes_with_views_of_the_buffer(control_free):
    text = "B" * (512 * 1024)
    line = jsonrpc.dumps({"jsonrpc": "2.0", "id": 7, "result": {"blob": text, "n": 1}})
    buffer = bytearray(line)
    message = jsonrpc.parse(buffer, max_depth=200, control_free=control_free)
    assert message == jsonrpc.parse(line, max_depth=200)
    assert message.raw is not None
    view = message.raw.text_of(message.result["blob"])
    assert view is not None and view.obj is buffer  # a view of the buffer, not a copy
    assert jsonrpc.serialize(message) == line + b"\n"


def test_a_bytearray_that_is_not_json_is_a_parse_error():
    with pytest.raises(FrameError) as info:
        jsonrpc.parse(bytearray(b'{"jsonrpc":"2.0","id":1,"result":"' + b"x" * 300_000 + b'"'), max_depth=200)
    assert info.value.cause == "parse_error"
