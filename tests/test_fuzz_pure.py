"""Property tests of the pure parsers and rules: bad input never raises an unexpected exception.

Each pure function that sees bytes or JSON of a peer gets arbitrary input here: arbitrary
bytes, deep nesting, huge numbers, lone surrogates, members of the wrong type, duplicate
members and ids of every type. A function may refuse the input only with its own documented
exception (``FrameError``, ``InvalidParams``, ``InputError``, ``ClientFailed``,
``SchemaError``, ``ArgError``); everything else it returns must be writable as JSON.

The counts of examples are chosen so that the whole file runs in well under a minute.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mcpbridge.bridge.rules import forms, legacy, legacyshapes, translate
from mcpbridge.bridge.rules import input as input_rules
from mcpbridge.bridge.rules.revisions import VSCODE
from mcpbridge.mcp import jsonrpc
from mcpbridge.mcp.ids import recover_id, shows_response
from mcpbridge.mcp.jsonrpc import ErrorResponse, FrameError, Notification, Request, Response
from mcpbridge.mcp.protocol import META_SERVER_INFO
from mcpbridge.mcp.transports.framing import KEEP_BYTES
from mcpbridge.vscode import cli
from mcpbridge.vscode import settings as args
from schema import validate_legacy, validate_legacy_frame

FRAME_CAUSES = {"parse_error", "too_deep", "invalid_request_shape", "invalid_id"}
CLIENT_DEPTH = 64
UPSTREAM_DEPTH = 200
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- strategies

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["", "2.0", "ping", "tools/call", "b-1", "\u0000", "\U0001f600", "_meta"])
)
JSON = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)
#: Every JSON type, for an id: the valid ones (strings, integers) and all the others.
ANY_ID = st.one_of(
    st.integers(),
    st.integers(min_value=10**18, max_value=10**30),
    st.text(max_size=10),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
METHODS = st.sampled_from(
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/subscribe",
        "notifications/cancelled",
        "notifications/initialized",
        "Ping",
        "",
    ]
) | st.text(max_size=12)


@st.composite
def message_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON-RPC-like object whose members may be missing, of the wrong type, or extra."""
    obj: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        obj["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None, ""]))
    if draw(st.booleans()):
        obj["id"] = draw(ANY_ID)
    if draw(st.booleans()):
        obj["method"] = draw(METHODS | JSON)
    if draw(st.booleans()):
        obj["params"] = draw(JSON)
    if draw(st.integers(0, 3)) == 0:
        obj["result"] = draw(JSON)
    if draw(st.integers(0, 3)) == 0:
        obj["error"] = draw(
            st.fixed_dictionaries({"code": st.integers() | JSON, "message": st.text(max_size=5) | JSON})
            | JSON
        )
    if draw(st.integers(0, 4)) == 0:
        obj[draw(st.text(max_size=6))] = draw(JSON)
    return obj


#: Pieces of the text of a JSON string literal: escapes of surrogates, escaped
#: backslashes that make "udc00" plain text, and ordinary characters.
STRING_PIECES = st.sampled_from(
    [
        "\\\\",
        "\\ud800",
        "\\udbff",
        "\\udc00",
        "\\udfff",
        "\\uD83D",
        "\\uDE00",
        "ud800",
        "udc00",
        "\\u0041",
        '\\"',
        "\\n",
        "a",
        "\u00e9",
        "\U0001f600",
    ]
)


@st.composite
def string_literals(draw: st.DrawFn) -> str:
    """The source text of a JSON string: ``"`` + pieces + ``"``."""
    return '"' + "".join(draw(st.lists(STRING_PIECES, max_size=8))) + '"'


def has_surrogate(value: Any) -> bool:
    """True when a string anywhere in ``value`` holds a surrogate code point (not writable as UTF-8)."""
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_surrogate(v) for v in value)
    return False


def nested(depth: int, kind: str, leaf: Any = 1) -> Any:
    """A value with ``depth`` levels of arrays or objects (``depth`` 0 is the leaf)."""
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


def deep_json(depth: int) -> st.SearchStrategy[Any]:
    """JSON values with a chain of ``depth`` levels somewhere inside."""
    return st.builds(nested, st.just(depth), st.sampled_from(["list", "dict"]), JSON)


def writable(value: Any) -> bytes:
    """The JSON bytes of ``value``; fails the test when it cannot be written."""
    return jsonrpc.dumps(value)


def check_frame_error(exc: FrameError) -> None:
    assert exc.cause in FRAME_CAUSES
    assert (
        exc.id is None
        or isinstance(exc.id, str)
        or (isinstance(exc.id, int) and not isinstance(exc.id, bool))
    )
    assert isinstance(exc.is_response, bool)


def parse_or_error(line: bytes | str, max_depth: int = CLIENT_DEPTH) -> jsonrpc.Message | FrameError:
    try:
        return jsonrpc.parse(line, max_depth=max_depth)
    except FrameError as exc:
        check_frame_error(exc)
        return exc


def assert_round_trip(message: jsonrpc.Message) -> None:
    """An accepted message can be written back, and reads back as itself."""
    line = jsonrpc.serialize(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    again = jsonrpc.parse(line[:-1], max_depth=10_000)
    assert again == message


# --------------------------------------------------------------------------- jsonrpc.parse


@FUZZ
@given(st.binary(max_size=200))
@example(b"\xff\xfe")
@example(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1e999}}')
@example(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":NaN}}')
@example(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}')
@example(b'{"jsonrpc":"2.0","id":"\\\\ud800\\udc00","method":"ping"}')
def test_arbitrary_bytes_give_a_message_or_a_frame_error(line: bytes) -> None:
    outcome = parse_or_error(line)
    if not isinstance(outcome, FrameError):
        assert_round_trip(outcome)


@FUZZ
@given(
    base=message_objects(), cuts=st.lists(st.tuples(st.integers(0, 400), st.binary(max_size=3)), max_size=4)
)
def test_a_damaged_message_gives_a_message_or_a_frame_error(
    base: dict[str, Any], cuts: list[tuple[int, bytes]]
) -> None:
    line = bytearray(json.dumps(base).encode())
    for position, replacement in cuts:
        at = position % (len(line) + 1)
        line[at : at + len(replacement)] = replacement
    outcome = parse_or_error(bytes(line))
    if not isinstance(outcome, FrameError):
        assert_round_trip(outcome)


@FUZZ
@given(message_objects())
@example({"jsonrpc": "2.0", "id": 1, "method": None, "result": {}, "error": {"code": 1, "message": "m"}})
@example({"jsonrpc": "1.0", "id": 1, "method": None, "result": {}})
@example({"jsonrpc": "2.0", "id": 1, "method": None, "result": {}})
def test_every_shape_of_object_is_a_message_or_a_named_frame_error(obj: dict[str, Any]) -> None:
    outcome = parse_or_error(json.dumps(obj).encode())
    # A method member, even null, makes a request or a notification: never a response.
    looks_like_a_response = "method" not in obj and ("result" in obj or "error" in obj)
    if isinstance(outcome, FrameError):
        if outcome.id is not None:
            assert outcome.id == obj.get("id")
        # A receiver answers a bad request, but only drops a bad response (never answers it).
        assert outcome.is_response == looks_like_a_response
        return
    assert isinstance(outcome, (Response, ErrorResponse)) == looks_like_a_response
    assert obj.get("jsonrpc") == "2.0"
    assert_round_trip(outcome)
    if isinstance(outcome, (Request, Notification)):
        assert outcome.method == obj["method"]
        assert outcome.params is None or isinstance(outcome.params, dict)
    if isinstance(outcome, (Request, Response)):
        assert isinstance(outcome.id, (str, int)) and not isinstance(outcome.id, bool)
    if isinstance(outcome, ErrorResponse):
        assert isinstance(outcome.error.code, int) and isinstance(outcome.error.message, str)


@FUZZ
@given(id=ANY_ID, method=st.sampled_from(["ping", "tools/call"]))
def test_ids_of_every_type_are_kept_only_when_they_are_strings_or_integers(id: Any, method: str) -> None:
    outcome = parse_or_error(json.dumps({"jsonrpc": "2.0", "id": id, "method": method}).encode())
    valid = isinstance(id, str) or (isinstance(id, int) and not isinstance(id, bool))
    if valid:
        assert outcome == Request(id, method)
    else:
        assert isinstance(outcome, FrameError) and outcome.cause == "invalid_id" and outcome.id is None


@FUZZ
@given(literals=st.lists(string_literals(), min_size=1, max_size=3), as_key=st.booleans())
@example(literals=['"\\\\udc00"'], as_key=False)  # an escaped backslash and the text "udc00": valid
@example(literals=['"\\\\ud800\\udc00"'], as_key=False)  # the text "\ud800", then a lone low surrogate
def test_a_line_is_refused_exactly_when_it_holds_a_lone_surrogate(literals: list[str], as_key: bool) -> None:
    if as_key:
        body = "{" + ",".join(f"{lit}:{i}" for i, lit in enumerate(literals)) + "}"
    else:
        body = "[" + ",".join(literals) + "]"
    line = '{"jsonrpc":"2.0","id":"s","method":"ping","params":{"v":' + body + "}}"
    expected = json.loads(line)  # Python's json: the reference decoding of the escapes
    outcome = parse_or_error(line.encode())
    if has_surrogate(expected):
        assert isinstance(outcome, FrameError) and outcome.cause == "parse_error"
    else:
        assert isinstance(outcome, Request) and outcome.params == expected["params"]
        assert_round_trip(outcome)


#: Text that may hold raw surrogate code points (``st.text`` leaves them out by default).
SURROGATE_TEXT = st.lists(st.characters(categories=["Cs"]) | st.characters(), max_size=30).map("".join)


@FUZZ
@given(text=SURROGATE_TEXT)
def test_a_text_line_with_a_raw_surrogate_is_a_parse_error_not_a_message(text: str) -> None:
    line = (
        '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":' + json.dumps(text, ensure_ascii=False) + "}}"
    )
    outcome = parse_or_error(line)
    if has_surrogate(text):
        assert isinstance(outcome, FrameError) and outcome.cause == "parse_error"
    else:
        assert isinstance(outcome, Request) and outcome.params == {"s": text}


@FUZZ
@given(
    depth=st.integers(0, 300), kind=st.sampled_from(["list", "dict"]), limit=st.sampled_from([1, 10, 64, 200])
)
def test_nesting_over_the_limit_is_too_deep_with_the_id_and_under_it_is_a_message(
    depth: int, kind: str, limit: int
) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"v": nested(depth, kind)}})
    outcome = parse_or_error(line.encode(), max_depth=limit)
    levels = depth + 2  # the message object and its params object
    if levels > limit:
        assert isinstance(outcome, FrameError) and outcome.cause == "too_deep" and outcome.id == 7
    else:
        assert isinstance(outcome, Request)


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_nesting_far_over_any_limit_is_too_deep_and_does_not_overflow_the_stack(depth: int) -> None:
    for line in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth, "[" * depth):
        outcome = parse_or_error(line.encode(), max_depth=UPSTREAM_DEPTH)
        assert isinstance(outcome, FrameError) and outcome.cause == "too_deep"


@FUZZ
@given(
    digits=st.integers(1, 6000),
    where=st.sampled_from(["id", "params"]),
    form=st.sampled_from(["int", "neg", "exp", "frac"]),
)
def test_huge_numbers_never_escape_as_an_unexpected_exception(digits: int, where: str, form: str) -> None:
    number = "9" * digits
    number = {"int": number, "neg": "-" + number, "exp": "1e" + number[:6], "frac": "0." + number}[form]
    if where == "id":
        line = '{"jsonrpc":"2.0","id":' + number + ',"method":"ping"}'
    else:
        line = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":' + number + "}}"
    outcome = parse_or_error(line.encode())
    if not isinstance(outcome, FrameError):
        assert_round_trip(outcome)


@FUZZ
@given(
    members=st.lists(
        st.tuples(st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]), JSON | ANY_ID),
        min_size=1,
        max_size=8,
    )
)
def test_duplicate_members_read_as_the_last_one_and_never_raise(members: list[tuple[str, Any]]) -> None:
    line = "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v)}" for k, v in members) + "}"
    outcome = parse_or_error(line.encode())
    try:
        reference: Any = jsonrpc.from_obj(json.loads(line))  # json keeps the last duplicate
    except FrameError as exc:
        reference = exc
    if isinstance(reference, FrameError):
        assert isinstance(outcome, FrameError) and outcome.cause == reference.cause
    else:
        assert outcome == reference


#: Pieces of a long string: what needs an escape, what does not, and the mark that the
#: fast path of the encoder puts in place of a long string.
LONG_PIECES = st.sampled_from(
    [
        "a",
        "\u00e9",
        "\U0001f600",
        '"',
        "\\",
        "\n",
        "\x00",
        "\x1f",
        "\u2028",
        "\x7f",
        "\x00mcpbridge:long-string\x00",
    ]
)


@st.composite
def long_strings(draw: st.DrawFn) -> str:
    """A string of 64 KiB or more: a few pieces, repeated."""
    unit = "".join(draw(st.lists(LONG_PIECES, min_size=1, max_size=6)))
    return unit * (draw(st.integers(64 * 1024, 80 * 1024)) // len(unit) + 1)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    value=st.recursive(
        long_strings() | SCALARS,
        lambda children: (
            st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
        ),
        max_leaves=4,
    )
)
def test_a_frame_with_long_strings_is_written_exactly_as_the_json_encoder_writes_it(value: Any) -> None:
    frame = {"jsonrpc": "2.0", "id": 1, "result": {"v": value}}
    expected = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    assert jsonrpc.serialize(frame) == expected
    assert jsonrpc.dumps(frame) + b"\n" == expected


@FUZZ
@given(
    id=st.integers() | st.text(max_size=12),
    order=st.sampled_from(["first", "after_jsonrpc", "last"]),
    cut=st.integers(0, 200),
    damage=st.sampled_from([b"NaN", b"\\ud800", b"\xff", b"[" * 300, b""]),
)
def test_the_id_of_an_upstream_line_that_does_not_parse_is_recovered_from_its_ends(
    id: Any, order: str, cut: int, damage: bytes
) -> None:
    body = {"resultType": "complete", "content": [{"type": "text", "text": "x" * 300}]}
    if order == "first":
        obj = {"id": id, "jsonrpc": "2.0", "result": body}
    elif order == "after_jsonrpc":
        obj = {"jsonrpc": "2.0", "id": id, "result": body}
    else:
        obj = {"jsonrpc": "2.0", "result": body, "id": id}
    line = json.dumps(obj, separators=(",", ":")).encode()
    if order == "last":
        damaged = line[: 40 + cut] + damage + line[40 + cut :]
    else:
        damaged = line[: len(line) - 40 - cut] + damage  # the end is cut off
    found = recover_id(damaged[:KEEP_BYTES], damaged[-KEEP_BYTES:])  # as the stdio client reads it
    if len(json.dumps(id)) < 100:  # the kept ends hold it
        assert found == id
    assert found is None or isinstance(found, (str, int)) and not isinstance(found, bool)


@FUZZ
@given(st.binary(max_size=300))
def test_recovering_an_upstream_id_from_any_bytes_gives_a_valid_id_or_none(line: bytes) -> None:
    found = recover_id(line[:KEEP_BYTES], line[-KEEP_BYTES:])
    assert found is None or isinstance(found, (str, int)) and not isinstance(found, bool)
    writable(found)


# --------------------------------------------------------------------------- legacy


@FUZZ
@given(params=JSON | deep_json(CLIENT_DEPTH))
def test_the_params_parsers_of_the_front_end_accept_or_refuse_with_invalid_params(params: Any) -> None:
    for parser in (legacy.parse_initialize, legacy.parse_set_level, legacy.parse_subscribe):
        try:
            parsed = parser(params)
        except legacy.InvalidParams as exc:
            assert exc.detail and exc.cause == "invalid_params"
            continue
        if isinstance(parsed, legacy.InitializeParams):
            writable(parsed.client_info)
            writable(parsed.capabilities)
            assert isinstance(parsed.client_info["name"], str)
        else:
            assert isinstance(parsed, str)
    cancelled = legacy.parse_cancelled(params)
    assert cancelled is None or isinstance(cancelled, (str, int)) and not isinstance(cancelled, bool)
    assert isinstance(legacy.has_modern_meta(params), bool)


@FUZZ
@given(method=st.text(max_size=30) | METHODS)
def test_every_method_name_has_a_class(method: str) -> None:
    assert isinstance(legacy.classify(method), legacy.MethodClass)
    assert isinstance(legacy.classify_notification(method), legacy.NotificationClass)


@FUZZ
@given(head=st.binary(max_size=300), tail=st.binary(max_size=300))
@example(head=b'{"id":"\\ud800', tail=b'"id":"\xff"}')
@example(head=b'{"jsonrpc":"2.0","id":' + b"9" * 300, tail=b"")
def test_recover_id_from_any_bytes_gives_a_writable_id_or_none(head: bytes, tail: bytes) -> None:
    found = legacy.recover_id(head, tail)
    assert found is None or isinstance(found, (str, int)) and not isinstance(found, bool)
    writable(found)


@FUZZ
@given(message_objects())
def test_the_start_of_a_line_shows_a_response_exactly_when_the_parser_sees_one(obj: dict[str, Any]) -> None:
    line = json.dumps(obj).encode()
    if len(line) <= KEEP_BYTES:  # the kept start is the whole line
        is_response = "method" not in obj and ("result" in obj or "error" in obj)
        assert shows_response(line) is is_response
    assert isinstance(shows_response(line[:KEEP_BYTES]), bool)


@FUZZ
@given(id=ANY_ID, filler=st.text(min_size=300, max_size=400), first=st.booleans())
def test_recover_id_of_a_long_line_finds_only_valid_ids(id: Any, filler: str, first: bool) -> None:
    if first:
        line = json.dumps({"jsonrpc": "2.0", "id": id, "method": "x", "params": {"f": filler}}).encode()
    else:
        line = json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"f": filler}, "id": id}).encode()
    found = legacy.recover_id(line[:256], line[-256:])
    if isinstance(id, str) and len(json.dumps(id)) < 200 or isinstance(id, int) and not isinstance(id, bool):
        assert found == id or found is None and isinstance(id, str) and "\\" in json.dumps(id)
    else:
        assert found is None or found == id


# --------------------------------------------------------------------------- translate


@FUZZ
@given(caps=JSON | deep_json(CLIENT_DEPTH))
def test_client_capabilities_always_give_an_object_without_tasks(caps: Any) -> None:
    out = translate.client_capabilities_for_upstream(caps)
    assert isinstance(out, dict) and "tasks" not in out
    writable(out)
    kinds = input_rules.ClientKinds.from_capabilities(caps)
    assert isinstance(kinds, input_rules.ClientKinds)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    discover=JSON
    | st.fixed_dictionaries(
        {
            "capabilities": JSON,
            "instructions": JSON,
            "_meta": st.fixed_dictionaries({META_SERVER_INFO: JSON}),
        }
    ),
    icon_rule=st.sampled_from(list(translate.IconRule)),
)
def test_any_discover_result_gives_an_initialize_result_of_the_2025_schema(
    discover: Any, icon_rule: Any
) -> None:
    init = translate.initialize_result(discover, fallback_name="fuzz", version="0.1.0", icon_rule=icon_rule)
    validate_legacy(init, "InitializeResult")
    assert "tasks" not in init["capabilities"]
    assert isinstance(translate.declared_notifications(init), translate.Declared)


@FUZZ
@given(
    method=st.sampled_from(sorted(legacy.FORWARDED_METHODS)),
    result=st.dictionaries(
        st.sampled_from(
            [
                "resultType",
                "ttlMs",
                "cacheScope",
                "_meta",
                "nextCursor",
                "tools",
                "content",
                "structuredContent",
            ]
        )
        | st.text(max_size=6),
        JSON | deep_json(UPSTREAM_DEPTH - 3),
        max_size=6,
    ),
    icon_rule=st.sampled_from(list(translate.IconRule)),
)
def test_any_complete_result_is_shaped_without_an_exception_and_stays_writable(
    method: str, result: dict[str, Any], icon_rule: Any
) -> None:
    shaped, notes = translate.shape_result(method, result, icon_rule=icon_rule)
    writable(shaped)
    assert not {"resultType", "ttlMs", "cacheScope"} & set(shaped)
    if method in legacy.LIST_METHODS and "nextCursor" in shaped:
        assert isinstance(shaped["nextCursor"], str)
    if method == "tools/call":
        assert isinstance(shaped["content"], list)
    assert all(isinstance(note, str) for note in notes)


@FUZZ
@given(
    tools=st.lists(
        st.fixed_dictionaries(
            {"name": JSON, "inputSchema": JSON | deep_json(UPSTREAM_DEPTH - 5), "outputSchema": JSON}
        ),
        max_size=3,
    )
)
def test_deep_and_odd_tool_schemas_are_shaped_without_an_exception(tools: list[Any]) -> None:
    shaped, _ = translate.shape_result("tools/list", {"tools": tools}, icon_rule=translate.IconRule.ALL)
    writable(shaped)


@FUZZ
@given(params=JSON | deep_json(CLIENT_DEPTH))
def test_forward_params_never_pass_meta_task_or_a_protocol_key(params: Any) -> None:
    out, token, meta = translate.forward_params(params)
    assert isinstance(out, dict) and "_meta" not in out and "task" not in out
    assert token is None or isinstance(token, (str, int, float))
    for key in meta:
        assert VSCODE.passes_meta(key)
        assert not key.startswith("io.modelcontextprotocol/") and key != "progressToken"
    writable([out, meta])


@FUZZ
@given(method=st.sampled_from(sorted(translate.LISTEN_EVENTS)) | st.text(max_size=20), params=JSON)
def test_upstream_notifications_are_translated_or_dropped(method: str, params: Any) -> None:
    event = translate.listen_event(method, params)
    if event is not None:
        assert event[0] in translate.LISTEN_EVENTS
        writable(event[1])
    log = translate.log_params(params)
    if log is not None:
        assert set(log) <= {"level", "logger", "data"} and translate.log_passes(log["level"], None)
    progress = translate.progress_params("tok", params)
    if progress is not None:
        assert progress["progressToken"] == "tok"
        writable(progress)


@FUZZ
@given(
    code=st.integers(),
    message=st.text(max_size=20),
    data=JSON,
    method=st.sampled_from(sorted(legacy.FORWARDED_METHODS)),
)
def test_upstream_errors_keep_their_shape(code: int, message: str, data: Any, method: str) -> None:
    error = translate.legacy_error(method, {"code": code, "message": message, "data": data})
    assert isinstance(error["code"], int) and error["message"] == message
    assert translate.refused_state_text(method, message).endswith(
        ("Run the tool again.", "Send the request again.")
    )


# --------------------------------------------------------------------------- input


INPUT_REQUEST = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {
            "method": st.sampled_from(
                ["elicitation/create", "sampling/createMessage", "roots/list", "tools/call"]
            ),
            "params": JSON
            | st.fixed_dictionaries(
                {
                    "mode": st.sampled_from(["form", "url", "other"]),
                    "message": JSON,
                    "url": st.text(max_size=30) | st.sampled_from(["https://example.com/a", "javascript:x"]),
                    "requestedSchema": JSON
                    | st.fixed_dictionaries(
                        {"type": st.just("object"), "properties": JSON, "required": JSON}
                    ),
                    "messages": JSON,
                    "maxTokens": JSON,
                }
            ),
        }
    ),
)
ANSWER = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"action": st.sampled_from(["accept", "decline", "cancel", "maybe"]), "content": JSON}
    ),
    st.just(input_rules.BAD_LINE),
    st.builds(
        input_rules.ClientError,
        st.fixed_dictionaries({"code": st.integers(), "message": st.text(max_size=5)}),
    ),
)


@FUZZ
@given(
    requests=JSON | st.dictionaries(st.text(max_size=5), INPUT_REQUEST, max_size=4),
    state=JSON,
    caps=st.sampled_from(
        [
            {},
            {"elicitation": {}},
            {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "roots": {}},
        ]
    ),
    answers=st.lists(ANSWER, min_size=4, max_size=4),
)
def test_any_input_required_result_is_planned_or_refused_and_any_answer_is_shaped_or_refused(
    requests: Any, state: Any, caps: dict[str, Any], answers: list[Any]
) -> None:
    ids = iter(range(1, 100))
    session = input_rules.Session(
        input_rules.ClientKinds.from_capabilities(caps), lambda: f"elicitation-{next(ids)}"
    )
    raw = {"resultType": "input_required", "inputRequests": requests, "requestState": state}
    try:
        planned = session.plan_round(raw)
    except input_rules.InputError as exc:
        assert exc.cause in {"invalid_input_request", "too_many_input_requests", "undeclared_input_request"}
        return
    for n, outgoing in enumerate(planned.outgoing, 1):
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": f"b-{n}", "method": outgoing.method}
        if outgoing.params is not None:
            frame["params"] = outgoing.params
        writable(frame)
        validate_legacy_frame(frame)  # the client never gets a request that it must refuse
    given_answers = {
        item.key: answer
        for item, answer in zip(planned.outgoing, answers[: len(planned.outgoing)], strict=False)
    }
    try:
        responses = session.input_responses(given_answers)
    except input_rules.InputError as exc:
        assert exc.cause == "invalid_client_answer"
        return
    except input_rules.ClientFailed as failure:
        assert isinstance(failure.error, dict)
        return
    writable(responses)
    params = input_rules.retry_params({"name": "t"}, responses, planned.request_state)
    writable(params)
    session.completions_after_round(raw)
    session.completions_on_failure()


@FUZZ
@given(
    schema=JSON | st.fixed_dictionaries({"type": st.just("object"), "properties": JSON, "required": JSON}),
    content=JSON,
)
def test_any_requested_schema_compiles_or_is_refused_and_checks_any_content(
    schema: Any, content: Any
) -> None:
    try:
        form = forms.compile_form_schema(schema)
    except forms.SchemaError:
        return
    assert isinstance(form.accepts(content), bool)


@FUZZ
@given(
    url=st.text(max_size=60)
    | st.from_regex(r"(https?|javascript|file|data):/{0,3}[\x21-\x7e]{0,30}", fullmatch=True)
)
def test_the_url_rule_answers_every_text(url: str) -> None:
    assert isinstance(input_rules.url_allowed(url), bool)


@FUZZ
@given(
    value=JSON | deep_json(UPSTREAM_DEPTH - 2), definition=st.sampled_from(sorted(legacyshapes.LEGACY_SHAPES))
)
def test_the_shape_check_answers_every_value(value: Any, definition: str) -> None:
    assert isinstance(legacyshapes.conforms(value, definition), bool)


# --------------------------------------------------------------------------- args

OPTION_WORDS = st.sampled_from(
    [
        "--",
        "--name",
        "--name=x",
        "--log-level",
        "debug",
        "--discover-timeout",
        "--max-line-bytes",
        "--header",
        "--header-env",
        "--help",
        "--version",
        "--all",
        "logout",
        "check",
        "http://127.0.0.1:9/mcp",
        "https://example.com/mcp",
        "python",
        "-",
        "",
        "=",
        "--header=X-Key:v",
        "--header-env=X-Key=VAR",
        "--client-id",
        "--token-store",
        "memory",
        "999999999999999999999",
        "-1",
        "\u0000",
    ]
)


@FUZZ
@given(
    argv=st.lists(OPTION_WORDS | st.text(max_size=12), max_size=8),
    env=st.dictionaries(
        st.sampled_from(["VAR", "MCP_BRIDGE_TOKEN_KEY", "MCP_BRIDGE_CLIENT_SECRET"]), st.text(max_size=70)
    ),
)
def test_any_command_line_parses_or_gives_an_arg_error(argv: list[str], env: dict[str, str]) -> None:
    try:
        parsed = cli.parse(argv, env)
    except args.ArgError as exc:
        assert exc.exit_code == 2 and exc.diagnostic and "\n" not in exc.diagnostic
        return
    assert isinstance(parsed, (args.Settings, str))


SECRET = "S3CRET-7f1c"


@FUZZ
@given(
    before=st.lists(OPTION_WORDS, max_size=4),
    place=st.sampled_from(
        ["header", "header-env", "url-path", "url-query", "url-userinfo", "env-key", "secret"]
    ),
    after=st.lists(OPTION_WORDS, max_size=3),
)
def test_a_diagnostic_never_holds_a_secret_value(before: list[str], place: str, after: list[str]) -> None:
    env = {"VAR": SECRET, "MCP_BRIDGE_TOKEN_KEY": SECRET, "MCP_BRIDGE_CLIENT_SECRET": SECRET}
    secret_words = {
        "header": ["--header", f"Authorization: Bearer {SECRET}"],
        "header-env": ["--header-env", "X-Api-Key=VAR"],
        "url-path": [f"http://127.0.0.1:9/mcp/{SECRET}"],
        "url-query": [f"https://example.com/mcp?key={SECRET}"],
        "url-userinfo": [f"https://user:{SECRET}@example.com/mcp"],
        "env-key": ["--token-store", "file"],
        "secret": ["--client-id", "abc"],
    }[place]
    argv = [*before, *secret_words, *after]
    try:
        parsed = cli.parse(argv, env)
    except args.ArgError as exc:
        assert SECRET not in exc.diagnostic and SECRET not in str(exc)
        return
    if isinstance(parsed, args.Settings) and parsed.form is args.Form.URL:
        assert SECRET not in repr(parsed) and SECRET not in parsed.serving.name
        assert all(SECRET not in warning for warning in parsed.warnings)
