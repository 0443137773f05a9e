"""Large frames: they pass whole and unchanged, cost no second copy, and their memory goes back.

The pure parts (the parse of a long line, the output pieces, the line reader) are
tested in the process; the bridge itself over real pipes with the fixture server.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import WAIT
from harness import Bridge, bridge_command, fixture_command, text_of
from mcpbridge.mcp import jsonrpc
from mcpbridge.mcp.jsonrpc import FrameError, Response
from mcpbridge.mcp.transports.framing import LineReader, TooLong
from peers import running_py_http_server

MiB = 1024 * 1024
LONG = 300 * 1024


def line_of(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def reference(line: bytes) -> Any:
    """What the standard library makes of a line (the rules of jsonrpc aside)."""
    return json.loads(line)


# --------------------------------------------------------------------------- the parse of a long line


def test_a_long_plain_string_is_cut_out_and_the_message_is_the_one_of_the_whole_line() -> None:
    text = "x" * LONG
    blob = base64.b64encode(os.urandom(LONG)).decode()
    obj = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": text}], "b": [blob, 1]}}
    line = line_of(obj)
    message = jsonrpc.parse(line, max_depth=64)
    assert isinstance(message, Response)
    assert jsonrpc.to_obj(message) == obj
    assert message.raw is not None and len(message.raw) == 2


def test_a_long_string_goes_out_as_a_view_of_the_line_it_came_from() -> None:
    text = "y" * LONG
    line = line_of({"jsonrpc": "2.0", "id": 1, "result": {"text": text}})
    message = jsonrpc.parse(line, max_depth=64)
    assert isinstance(message, Response)
    pieces = jsonrpc.serialize_parts({"jsonrpc": "2.0", "id": 9, "result": message.result}, raw=message.raw)
    views = [piece for piece in pieces if isinstance(piece, memoryview)]
    assert len(views) == 1 and views[0].obj is line
    out = b"".join(pieces)
    assert out == line_of({"jsonrpc": "2.0", "id": 9, "result": {"text": text}}) + b"\n"


def test_an_equal_string_that_is_not_the_parsed_one_is_encoded_as_usual() -> None:
    line = line_of({"jsonrpc": "2.0", "id": 1, "result": {"text": "z" * LONG}})
    message = jsonrpc.parse(line, max_depth=64)
    assert isinstance(message, Response)
    other = "".join(["z" * (LONG - 1), "z"])  # equal, but another object
    pieces = jsonrpc.serialize_parts({"text": other}, raw=message.raw)
    assert not any(isinstance(piece, memoryview) for piece in pieces)
    assert b"".join(pieces) == line_of({"text": other}) + b"\n"


@pytest.mark.parametrize(
    "body",
    [
        '"a":"' + "q" * LONG + '\x01"',  # a raw control character in the long string
        '"a":"' + "q" * LONG + '"x',  # garbage after the long string
        '"a":"' + "q" * LONG,  # no closing quote
        '"a":"\\ud800","b":"' + "q" * LONG + '"',  # a lone surrogate beside it
    ],
    ids=["control", "garbage", "unterminated", "lone-surrogate"],
)
def test_a_long_line_that_is_not_valid_json_is_a_parse_error(body: str) -> None:
    line = ('{"jsonrpc":"2.0","id":1,"result":{' + body + "}}").encode()
    with pytest.raises(FrameError) as caught:
        jsonrpc.parse(line, max_depth=64)
    assert caught.value.cause == "parse_error"


def test_invalid_utf8_in_a_long_string_is_a_parse_error() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{"a":"' + b"q" * LONG + b'\xff"}}'
    with pytest.raises(FrameError) as caught:
        jsonrpc.parse(line, max_depth=64)
    assert caught.value.cause == "parse_error"


@pytest.mark.parametrize(
    "obj",
    [
        {"a": "\x00mcpbridge-cut-0", "b": "w" * LONG},  # a string that looks like the mark
        {"a": "w" * LONG, "a ": 1, "b": {"w" * 10: "v" * LONG}},
        {"a": "v" * LONG, "dup": "first", "c": "é" * LONG},  # a non-ASCII long string
        {"k": "w" * LONG + '"quoted"\n' + "w" * 10},  # escapes: parsed whole
    ],
)
def test_long_lines_of_every_shape_parse_as_the_whole_line_does(obj: dict[str, Any]) -> None:
    line = line_of({"jsonrpc": "2.0", "id": 1, "result": obj})
    message = jsonrpc.parse(line, max_depth=64)
    assert isinstance(message, Response) and message.result == reference(line)["result"]
    assert jsonrpc.serialize(message) == line + b"\n"


def test_a_member_given_twice_keeps_the_last_one_as_json_does() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{"a":"' + b"v" * LONG + b'","a":"short"}}'
    message = jsonrpc.parse(line, max_depth=64)
    assert isinstance(message, Response) and message.result == {"a": "short"}


# --------------------------------------------------------------------------- the line reader


class Trickle(io.RawIOBase):
    """A raw stream that gives at most ``step`` bytes a read, as a pipe does."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = memoryview(data)
        self._step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self._step, len(self._data))
        buffer[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


def test_the_reader_takes_no_more_of_the_stream_than_the_line_it_returns() -> None:
    long = b"L" * (3 * MiB)
    data = b'{"first":1}\n' + long + b"\n" + b'{"second":2}\n'
    stream = io.BufferedReader(Trickle(data, 64 * 1024), buffer_size=MiB)
    assert LineReader(stream, 8 * MiB).next() == b'{"first":1}'
    assert LineReader(stream, 8 * MiB).next() == long
    assert LineReader(stream, 8 * MiB).next() == b'{"second":2}'


def test_a_long_line_without_control_characters_is_marked_control_free() -> None:
    clean = b"c" * (2 * MiB)
    dirty = b"d" * MiB + b"\x01" + b"d" * MiB
    stream = io.BufferedReader(Trickle(clean + b"\n" + dirty + b"\r\n" + b"short\n", 100_000))
    reader = LineReader(stream, 8 * MiB)
    assert reader.next() == clean and reader.control_free
    assert reader.next() == dirty and not reader.control_free
    assert reader.next() == b"short" and not reader.control_free  # not looked at: short


def test_a_long_line_over_the_limit_keeps_its_head_and_tail() -> None:
    line = b'{"id":5,' + b"z" * (3 * MiB) + b',"end":1}'
    stream = io.BufferedReader(Trickle(line + b"\r\n" + b"next\n", 64 * 1024))
    reader = LineReader(stream, MiB)
    too_long = reader.next()
    assert isinstance(too_long, TooLong)
    assert too_long.size == len(line)
    assert too_long.head == line[:256] and too_long.tail == line[-256:]
    assert reader.next() == b"next"


# --------------------------------------------------------------------------- through the bridge


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_16_mib_result_and_a_16_mib_blob_pass_the_bridge_whole() -> None:
    size = 16 * MiB
    with Bridge(bridge_command(upstream=fixture_command())) as bridge:
        assert "result" in bridge.initialize()
        response = bridge.request("tools/call", {"name": "big", "arguments": {"bytes": size}})
        text = text_of(response)
        assert len(text) == size and text == "x" * size
        uri = f"file:///fixture/blob/{size}"
        read = bridge.request("resources/read", {"uri": uri})
        contents = read["result"]["contents"]
        assert base64.b64decode(contents[0]["blob"]) == (bytes(range(256)) * (size // 256))
        assert bridge.request("ping")["result"] == {}


def minor_faults(pid: int) -> int:
    """The page faults of the process that found no page (each fresh 4 KiB page costs one)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[7])


@contextlib.contextmanager
def bridge_of(form: str) -> Iterator[Bridge]:
    """A bridge in ``form``: a command (the fixture server) or a URL (the Python SDK under uvicorn,
    which speaks both eras: ``--protocol 2026-07-28`` makes the bridge translate for it, as for the
    fixture)."""
    if form == "command":
        with Bridge(bridge_command(upstream=fixture_command())) as bridge:
            yield bridge
        return
    with running_py_http_server() as url, Bridge(bridge_command("--protocol", "2026-07-28", url)) as bridge:
        yield bridge


def big_call(bridge: Bridge, form: str, size: int) -> None:
    arguments = {"bytes": size} if form == "command" else {"size": size}
    response = bridge.request("tools/call", {"name": "big", "arguments": arguments})
    assert len(text_of(response)) == size


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("form", ["command", "url"])
def test_the_memory_of_large_results_is_kept_while_they_come_and_goes_back_once_they_stop(form: str) -> None:
    """While large results come one after another, the next one needs no fresh pages; a quiet
    bridge returns the memory."""
    size = 16 * MiB
    with bridge_of(form) as bridge:
        assert "result" in bridge.initialize()
        pid = bridge.proc.pid
        idle = rss_bytes(pid)
        big_call(bridge, form, size)
        big_call(bridge, form, size)
        before = minor_faults(pid)
        big_call(bridge, form, size)
        fresh_pages = minor_faults(pid) - before
        # The line alone is 4,096 pages: in fresh memory each copy of it costs that many faults.
        assert fresh_pages < size // 4096 // 4, f"{fresh_pages} page faults for a {size}-byte result"
        released = threading.Event()
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if rss_bytes(pid) < idle + 8 * MiB:
                released.set()
                break
            released.wait(0.1)
        assert released.is_set(), f"RSS {rss_bytes(pid)} after large frames, {idle} when idle"
        assert bridge.request("ping")["result"] == {}


# --------------------------------------------------------------------------- the small rules around them


def test_a_message_of_a_short_line_stays_right_when_a_long_string_is_put_into_it() -> None:
    message = jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":1}}', max_depth=64)
    assert message.raw is jsonrpc.SHORT_LINE
    assert isinstance(message, jsonrpc.Request) and message.params is not None
    message.params["long"] = "q\n" * LONG  # needs escapes: the encoder writes it
    assert jsonrpc.serialize(message) == line_of(jsonrpc.to_obj(message)) + b"\n"


def test_a_message_that_contains_itself_cannot_be_written() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError):
        jsonrpc.serialize({"jsonrpc": "2.0", "id": 1, "result": {"loop": loop}})


def test_a_cancel_token_runs_each_callback_once_and_wakes_its_waiters() -> None:
    from mcpbridge.mcp.cancel import CancelToken

    token = CancelToken()
    calls: list[str] = []
    remove = token.add_callback(lambda: calls.append("kept"))
    token.add_callback(lambda: calls.append("removed"))()
    removed = token.add_callback(lambda: calls.append("gone"))
    removed()
    assert not token.wait(0.01)
    waiter = threading.Thread(target=lambda: calls.append(f"woke {token.wait(WAIT)}"))
    waiter.start()
    token.cancel("stop")
    waiter.join(WAIT)
    token.cancel("again")
    remove()
    token.add_callback(lambda: calls.append("late"))
    assert sorted(calls) == ["kept", "late", "woke True"]
    assert token.cancelled and token.reason == "stop"
