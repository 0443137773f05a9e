"""Bad lines from the client: each gets the error of the error table, and the bridge goes on."""

from __future__ import annotations

import json

import pytest

from harness import Bridge, bridge_command, fixture_command
from schema import validate_legacy_frame


@pytest.fixture
def bridge() -> Bridge:
    with Bridge(bridge_command("--max-line-bytes", "1024", upstream=fixture_command())) as b:
        b.initialize()
        yield b  # type: ignore[misc]


def nested(depth: int, id: int) -> bytes:
    """A ping whose message has ``depth`` levels of nesting."""
    params = '{"a":' * (depth - 1) + "1" + "}" * (depth - 1)
    return f'{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{params}}}\n'.encode()


def error_of(bridge: Bridge, line: bytes) -> dict:
    bridge.send(line)
    frame = bridge.wait_frame(lambda f: "method" not in f)
    validate_legacy_frame(frame)
    return frame


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\\ud800"}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\xff"}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"a\x01"}}\n',
        b'{"jsonrpc":"2.0","id":1,"method":"ping"\n',
    ],
)
def test_lines_that_are_not_json_get_parse_error(bridge: Bridge, line: bytes) -> None:
    frame = error_of(bridge, line)
    assert frame["error"]["code"] == -32700 and frame["error"]["data"]["cause"] == "parse_error"
    assert bridge.request("ping")["result"] == {}


def test_a_too_deep_message_names_the_limit_and_keeps_its_id(bridge: Bridge) -> None:
    frame = error_of(bridge, nested(66, 41))
    assert frame["id"] == 41
    assert frame["error"]["code"] == -32600
    assert frame["error"]["data"] == {"cause": "too_deep", "detail": "limit: 64 levels"}
    ok = bridge.request("ping", json.loads(nested(64, 0))["params"])
    assert ok["result"] == {}


@pytest.mark.parametrize("id_first", [True, False])
def test_a_too_long_line_gets_line_too_long_with_the_recovered_id(bridge: Bridge, id_first: bool) -> None:
    request = {"name": "echo", "arguments": {"text": "x" * 2000}}
    if id_first:
        frame_obj = {"jsonrpc": "2.0", "id": "long-1", "method": "tools/call", "params": request}
    else:
        frame_obj = {"jsonrpc": "2.0", "method": "tools/call", "params": request, "id": "long-1"}
    line = json.dumps(frame_obj, separators=(",", ":"))
    frame = error_of(bridge, line.encode() + b"\n")
    assert frame["id"] == "long-1"
    assert frame["error"]["code"] == -32600
    assert frame["error"]["data"] == {"cause": "line_too_long", "detail": "limit: 1024 bytes"}
    assert bridge.request("ping")["result"] == {}


def test_json_rpc_1_0_is_an_invalid_request_shape_with_its_string_id(bridge: Bridge) -> None:
    frame = error_of(bridge, b'{"jsonrpc":"1.0","id":"s-9","method":"ping"}\n')
    assert frame["id"] == "s-9"
    assert frame["error"]["code"] == -32600 and frame["error"]["data"]["cause"] == "invalid_request_shape"


def test_a_message_without_a_usable_id_gets_an_error_without_an_id(bridge: Bridge) -> None:
    frame = error_of(bridge, b"[1,2,3]\n")
    assert "id" not in frame and frame["error"]["code"] == -32600


def test_blank_lines_and_crlf_are_accepted(bridge: Bridge) -> None:
    bridge.send(b"\r\n\n   \n" + b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    assert bridge.wait_response("crlf")["result"] == {}


def test_answers_to_nothing_write_nothing(bridge: Bridge) -> None:
    for frame in (
        {"jsonrpc": "2.0", "id": 5, "result": {}},
        {"jsonrpc": "2.0", "id": "b-77", "result": {}},
        {"jsonrpc": "2.0", "id": None, "result": {}},
        {"jsonrpc": "2.0", "id": "x-1", "error": {"code": 1, "message": "m"}},
    ):
        bridge.send(frame)
    bridge.send(b'{"jsonrpc":"2.0","id":1.5,"result":{}}\n')
    marker = bridge.request_async("ping")
    first = bridge.wait_frame(lambda f: "method" not in f)
    assert first == {"jsonrpc": "2.0", "id": marker, "result": {}}


def test_every_byte_on_stdout_is_a_json_rpc_line(bridge: Bridge) -> None:
    for line in (b"\xff\n", b"{\n", b"null\n", b'{"jsonrpc":"2.0"}\n', nested(100, 3)):
        bridge.send(line)
    bridge.request("ping")
    bridge.close_stdin()
    bridge.wait_exit()
    for raw in bridge.raw_lines:
        frame = json.loads(raw)
        assert frame["jsonrpc"] == "2.0"
        validate_legacy_frame(frame)
