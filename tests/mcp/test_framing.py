"""Line framing: limits, the kept head and tail, CRLF, blank lines."""

from __future__ import annotations

import io

from mcpbridge.mcp.transports.framing import KEEP_BYTES, LineReader, TooLong


def read_all(data: bytes, limit: int, buffer_size: int = 4096) -> list[bytes | TooLong]:
    reader = LineReader(io.BufferedReader(io.BytesIO(data), buffer_size=buffer_size), limit)
    out: list[bytes | TooLong] = []
    while (item := reader.next()) is not None:
        out.append(item)
    return out


def test_lines_are_split_on_newline_and_crlf_and_blank_lines_are_skipped() -> None:
    assert read_all(b"a\r\n\n  \r\nb\nc", 10) == [b"a", b"b", b"c"]


def test_a_line_exactly_at_the_limit_passes_and_one_byte_more_is_too_long() -> None:
    items = read_all(b"x" * 8 + b"\n" + b"y" * 9 + b"\r\n" + b"ok\n", 8)
    assert items[0] == b"x" * 8
    assert isinstance(items[1], TooLong) and items[1].size == 9
    assert items[2] == b"ok"


def test_a_too_long_line_keeps_its_head_and_tail_and_the_next_line_is_intact() -> None:
    line = b'{"jsonrpc":"2.0","id":41,' + b"z" * 300_000 + b',"id":42}'
    for buffer_size in (16, 4096):
        items = read_all(line + b"\r\n" + b'{"next":1}\n', 1024, buffer_size)
        assert len(items) == 2
        too_long = items[0]
        assert isinstance(too_long, TooLong)
        assert too_long.size == len(line)
        assert too_long.head == line[:KEEP_BYTES] and too_long.tail == line[-KEEP_BYTES:]
        assert items[1] == b'{"next":1}'


def test_a_too_long_last_line_without_newline_is_reported() -> None:
    items = read_all(b"q" * 100, 10)
    assert len(items) == 1 and isinstance(items[0], TooLong) and items[0].size == 100


def test_invalid_utf8_passes_the_framer_as_bytes() -> None:
    assert read_all(b"\xff\xfe\n", 10) == [b"\xff\xfe"]
