"""The SSE parser follows the WHATWG rules, in any chunking, within its limit."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpbridge.mcp.transports.sse import Event, EventTooLarge, SseParser


def parse_all(data: bytes, limit: int = 1 << 20) -> list[Event]:
    return SseParser(limit).feed(data)


def parse_bytewise(data: bytes, limit: int = 1 << 20) -> list[Event]:
    parser = SseParser(limit)
    events: list[Event] = []
    for index in range(len(data)):
        events += parser.feed(data[index : index + 1])
    return events


def test_a_data_line_and_a_blank_line_make_one_message_event():
    assert parse_all(b"data: hello\n\n") == [Event("hello", "message", "")]


def test_data_lines_are_joined_with_newlines():
    assert parse_all(b"data: a\ndata:b\ndata:  c\n\n") == [Event("a\nb\n c")]


def test_crlf_cr_and_lf_all_end_lines():
    stream = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n"
    assert [e.data for e in parse_all(stream)] == ["one", "two", "three"]


def test_a_crlf_split_across_chunks_is_one_line_end():
    parser = SseParser(100)
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r") == [Event("x")]
    assert parser.feed(b"\ndata: y\n\n") == [Event("y")]


def test_comments_are_ignored_and_cost_nothing():
    parser = SseParser(64)
    for _ in range(10_000):
        assert parser.feed(b": keep-alive\r\n\r\n") == []
    assert parser.feed(b"data: after\n\n") == [Event("after")]


def test_the_event_field_sets_the_type_for_one_event():
    events = parse_all(b"event: ping\ndata: 1\n\ndata: 2\n\n")
    assert [(e.type, e.data) for e in events] == [("ping", "1"), ("message", "2")]


def test_the_id_field_stays_for_later_events_and_null_ids_are_ignored():
    events = parse_all(b"id: 7\ndata: a\n\ndata: b\n\nid: x\x00y\ndata: c\n\nid\ndata: d\n\n")
    assert [e.last_event_id for e in events] == ["7", "7", "7", ""]


def test_retry_takes_digits_only():
    parser = SseParser(100)
    parser.feed(b"retry: 1500\n\n")
    assert parser.retry == 1500
    parser.feed(b"retry: 15x\nretry:\nretry: -1\nretry:  15\nretry: \xd9\xa5\n\n")
    assert parser.retry == 1500


def test_retry_takes_at_most_a_day_and_ignores_a_longer_one():
    parser = SseParser(10_000)
    parser.feed(b"retry: 86400000\n\n")
    assert parser.retry == 86_400_000
    # A day and a millisecond, and a number of 5,000 digits (which int() refuses): ignored.
    parser.feed(b"retry: 86400001\nretry: " + b"9" * 5000 + b"\n\n")
    assert parser.retry == 86_400_000
    parser.feed(b"retry: 0000000000000000000000000000000000000000250\n\n")
    assert parser.retry == 250


def test_an_event_without_data_is_not_dispatched_and_its_type_is_reset():
    assert parse_all(b"event: lonely\n\ndata: x\n\n") == [Event("x", "message")]


def test_an_empty_data_line_dispatches_an_empty_event():
    assert parse_all(b"data\n\ndata:\n\n") == [Event(""), Event("")]


def test_a_field_without_colon_has_an_empty_value_and_unknown_fields_are_ignored():
    assert parse_all(b"foo: bar\ndata\ndata\n\n") == [Event("\n")]


def test_only_one_space_after_the_colon_is_dropped():
    assert parse_all(b"data:   two spaces\n\n") == [Event("  two spaces")]


def test_a_leading_byte_order_mark_is_dropped_even_split():
    parser = SseParser(100)
    assert parser.feed(b"\xef\xbb") == []
    assert parser.feed(b"\xbfdata: bom\n\n") == [Event("bom")]


def test_a_byte_order_mark_later_in_the_stream_is_kept_as_part_of_a_field_name():
    assert parse_all(b"data: a\n\n\xef\xbb\xbfdata: b\n\n") == [Event("a")]


def test_invalid_utf8_becomes_the_replacement_character():
    assert parse_all(b"data: \xff\n\n") == [Event("\ufffd")]


def test_an_unfinished_event_at_the_end_is_not_dispatched():
    parser = SseParser(100)
    assert parser.feed(b"data: half") == []
    assert parser.feed(b"\n") == []


def test_an_event_over_the_limit_raises_and_the_parser_stays_failed():
    parser = SseParser(10)
    with pytest.raises(EventTooLarge) as info:
        parser.feed(b"data: 0123456789A\n\n")
    assert info.value.limit == 10
    with pytest.raises(EventTooLarge):
        parser.feed(b"data: x\n\n")


def test_the_limit_counts_the_data_of_one_event_across_lines():
    parser = SseParser(10)
    assert parser.feed(b"data: 01234\ndata: 5678\n\n") == [Event("01234\n5678")]
    with pytest.raises(EventTooLarge):
        parser.feed(b"data: 01234\ndata: 56789\n\n")


def test_an_event_of_exactly_the_limit_passes():
    assert parse_all(b"data: " + b"a" * 50 + b"\n\n", limit=50) == [Event("a" * 50)]


def test_an_endless_line_raises_before_it_ends():
    parser = SseParser(100)
    with pytest.raises(EventTooLarge):
        for _ in range(100):
            parser.feed(b"x" * 10)


def test_the_limit_applies_per_event_not_per_stream():
    parser = SseParser(100)
    total = 0
    for _ in range(1000):
        total += len(parser.feed(b"data: " + b"b" * 90 + b"\n\n"))
    assert total == 1000


def test_a_zero_limit_is_refused():
    with pytest.raises(ValueError):
        SseParser(0)


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

_line_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x00"), max_size=30
)
_events = st.lists(
    st.tuples(
        st.lists(_line_text, min_size=1, max_size=4),
        st.one_of(st.none(), st.from_regex(r"[a-z]{1,8}", fullmatch=True)),
        st.one_of(st.none(), st.from_regex(r"[0-9a-z]{0,6}", fullmatch=True)),
    ),
    max_size=6,
)
_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[Event]]:
    """A stream and the events it encodes, with line ends mixed at random."""
    out = b""
    expected: list[Event] = []
    last_id = ""
    previous_end = b""

    def line(content: bytes) -> None:
        nonlocal out, previous_end
        end = draw(_ends)
        if not content and previous_end == b"\r" and end == b"\n":
            end = b"\r\n"  # a CR and then an LF would read as one line end
        out += content + end
        previous_end = end

    for lines, event_type, event_id in draw(_events):
        if draw(st.booleans()):
            line(b": comment")
        if event_type is not None:
            line(b"event: " + event_type.encode())
        if event_id is not None:
            line(b"id:" + event_id.encode())
            last_id = event_id
        for text in lines:
            line(b"data: " + text.encode())
        line(b"")
        expected.append(Event("\n".join(lines), event_type or "message", last_id))
    return out, expected


@settings(max_examples=300, deadline=None)
@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_chunking_of_a_stream_gives_the_events_it_encodes(stream, cuts):
    data, expected = stream
    parser = SseParser(1 << 20)
    events: list[Event] = []
    previous = 0
    for cut in sorted(min(c, len(data)) for c in cuts) + [len(data)]:
        events += parser.feed(data[previous:cut])
        previous = cut
    assert events == expected
    assert parse_all(data) == expected
    assert parse_bytewise(data) == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=1, max_value=300))
def test_arbitrary_bytes_never_break_the_parser_except_by_the_limit(data, split):
    parser = SseParser(64)
    try:
        parser.feed(data[:split])
        parser.feed(data[split:])
    except EventTooLarge:
        pass


def test_an_event_keeps_its_bytes_and_decodes_its_text_when_asked():
    (event,) = parse_all(b"data: caf\xc3\xa9\ndata: \xff\n\n")
    assert event.raw == b"caf\xc3\xa9\n\xff"
    assert event.data == "caf\u00e9\n\ufffd"
    assert event == Event("caf\u00e9\n\ufffd") and Event(raw=b"x").data == "x"


def test_a_long_data_line_in_many_chunks_gives_one_event():
    parser = SseParser(1 << 20)
    line = b"data: " + b"z" * 300_000 + b"\n\n"
    events = [e for i in range(0, len(line), 4096) for e in parser.feed(line[i : i + 4096])]
    assert [e.raw for e in events] == [b"z" * 300_000]


def test_a_long_data_line_in_many_chunks_is_joined_once_and_known_control_free():
    value = b'{"x":"' + b"y" * 300_000 + b'"}'
    stream = b"\xef\xbb\xbfevent: message\ndata: " + value + b"\n\n"
    parser = SseParser(1_000_000)
    events = []
    for start in range(0, len(stream), 4096):
        events += parser.feed(stream[start : start + 4096])
    assert len(events) == 1
    assert events[0].raw == value
    assert events[0].control_free is True


@pytest.mark.parametrize(
    "stream",
    [
        b"data: " + b"a\x01" * 100_000 + b"\n\n",  # a control character in the value
        b"data: " + b"a" * 100_000 + b"\ndata: b\n\n",  # two data lines: joined with a newline
        b"data: short\n\n",  # not looked at
    ],
)
def test_an_event_is_not_called_control_free_unless_it_is(stream):
    parser = SseParser(1_000_000)
    events = []
    for start in range(0, len(stream), 1000):
        events += parser.feed(stream[start : start + 1000])
    assert len(events) == 1
    assert events[0].control_free is False
    expected = stream[len(b"data: ") : -2].replace(b"\ndata: ", b"\n")
    assert events[0].raw == expected


def test_a_long_line_whose_field_name_is_split_across_chunks_is_still_read():
    parser = SseParser(1_000_000)
    value = b"z" * 200_000
    events = parser.feed(b"da") + parser.feed(b"ta:") + parser.feed(b" " + value) + parser.feed(b"\n\n")
    assert [e.raw for e in events] == [value]


def _peak_of_feeding(parser: SseParser, stream: bytes, chunk: int) -> tuple[list[Event], int]:
    """The events of ``stream`` fed in pieces of ``chunk`` bytes, and the peak of the memory
    allocated meanwhile (the pieces are cut as they are fed, as they arrive from a socket)."""
    events: list[Event] = []
    tracemalloc.start()
    try:
        for start in range(0, len(stream), chunk):
            events += parser.feed(stream[start : start + chunk])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return events, peak


def test_an_event_of_many_short_data_lines_costs_about_its_bytes():
    limit = 1 << 16
    count = limit // 3  # "xy" and a newline each
    events, peak = _peak_of_feeding(SseParser(limit), b"data:xy\n" * count + b"\n", 4096)
    assert [len(e.raw) for e in events] == [3 * count - 1]
    assert events[0].raw[:8] == b"xy\nxy\nxy"
    # Its buffer, then the bytes of the event: not an object per line (20 times the bytes).
    assert peak < 3 * limit


def test_a_long_data_line_in_chunks_of_two_bytes_costs_about_its_bytes():
    limit = 1 << 16
    events, peak = _peak_of_feeding(SseParser(limit), b"data: " + b"x" * limit + b"\n\n", 2)
    assert [e.raw for e in events] == [b"x" * limit]
    assert events[0].control_free
    assert peak < 3 * limit

