"""End-to-end fuzz: thousands of bad lines, mixed with good requests, through the real executable.

A seeded generator makes each bad line together with the answer the error table names
for it (``parse_error`` -32700, ``invalid_request_shape`` -32600, ``too_deep`` -32600,
``line_too_long`` -32600 with ``--max-line-bytes``) or with no answer at all (answers
and notifications that nothing waits for). Good requests go between the bad lines. The
test checks that

* every good request gets its right answer and every bad line exactly its error,
  with the id the line carried when the id can be read, and no id otherwise;
* the errors without an id come in the order of their lines;
* every byte on stdout is a JSON-RPC line valid against the 2025-11-25 schema;
* no content of a line reaches stderr, even at ``--log-level debug``;
* the bridge still answers at the end and exits 0 at the end of stdin.
"""

from __future__ import annotations

import json
import queue
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from harness import WAIT, Bridge, bridge_command, fixture_command
from schema import validate_legacy_frame

MAX_LINE = 8192
DEPTH = 64
#: How many bad lines the run sends (the brief asks for thousands).
BAD_LINES = 10_000
#: Lines sent before the test waits for their answers: well under the in-flight limit.
CHUNK = 120
SEED = 20261125
#: A text that each bad line carries; stderr must never show it.
CONTENT = "FUZZ-CONTENT-5e1a"

NO_ID = object()  # the answer has no id member


@dataclass
class Case:
    """One line and what the bridge must answer."""

    kind: str
    line: bytes
    #: The (code, cause) of the expected error; ``("result", method)`` for a good request;
    #: ``None`` when the line gets no answer.
    expect: tuple[Any, str] | None
    id: Any = NO_ID
    #: For good tools/call requests: the text of the result.
    text: str | None = None


class Generator:
    """Makes the lines of the run, each with its expected answer."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0

    def next_id(self) -> Any:
        self.n += 1
        return f"q-{self.n}" if self.n % 2 else 1_000_000 + self.n

    def head(self, request_id: Any, method: str = "ping") -> str:
        return '{"jsonrpc":"2.0","id":' + json.dumps(request_id) + ',"method":"' + method + '","params":'

    # ------------------------------------------------------------------ good requests

    def good(self) -> Case:
        request_id = self.next_id()
        roll = self.rng.random()
        if roll < 0.4:
            return Case(
                "ping",
                self.line({"jsonrpc": "2.0", "id": request_id, "method": "ping"}),
                ("result", "ping"),
                request_id,
            )
        if roll < 0.8:
            # Valid text that looks like an escape: an escaped backslash and "udc00", pairs, controls.
            text = (
                self.rng.choice(["\\udc00", "\\ud800x", "\U0001f600", "tab\there", "\u00e9", ""])
                + f"-{self.n}"
            )
            params = {"name": "echo", "arguments": {"text": text}}
            line = json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
            ).encode()
            return Case("echo", line + b"\n", ("result", "tools/call"), request_id, text)
        a, b = self.rng.randrange(-(10**6), 10**6), self.rng.randrange(10**6)
        params = {"name": "add", "arguments": {"a": a, "b": b}}
        line = self.line({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        return Case("add", line, ("result", "tools/call"), request_id, str(a + b))

    @staticmethod
    def line(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    # -------------------------------------------------------------------- bad lines

    def bad(self) -> Case:
        maker = self.rng.choice(
            [
                self.parse_error_with_id,
                self.parse_error_with_id,
                self.parse_error_without_id,
                self.truncated,
                self.wrong_shape_with_id,
                self.invalid_id,
                self.not_an_object,
                self.too_deep,
                self.far_too_deep,
                self.too_long,
                self.answer_to_nothing,
                self.notification,
                self.refused_request,
                self.duplicate_members,
            ]
        )
        return maker()

    def parse_error_with_id(self) -> Case:
        request_id = self.next_id()
        bad = self.rng.choice(
            [
                '{"s":"\\ud800"}',
                '{"s":"\\udc00' + CONTENT + '"}',
                '{"s":"\\\\ud800\\udfff"}',  # the text "\ud800", then a lone low surrogate
                '{"s":"\\uDBFF\\uDBFF"}',
                '{"s":"a\x01' + CONTENT + '"}',
                '{"s":"\x1f"}',
                "NaN",
                "-Infinity",
                "1e999",
                "9" * 4400,  # more digits than Python reads
                "{'s':1}",
                '{"a":1,}',
                "[1 2]",
                "tru",
                '{"a"}',
                "0x10",
                "01",
                '"\udcff"',  # the byte 0xff (surrogateescape below)
                '{"s":"' + CONTENT + '\udcc3"}',  # a cut UTF-8 sequence
                '{"s":"\udced\udca0\udc80"}',  # the bytes of an encoded surrogate: not UTF-8
                "{} extra",
            ]
        )
        raw = (self.head(request_id) + bad + "}").encode("utf-8", "surrogateescape")
        return Case("parse_error_id", raw + b"\n", (-32700, "parse_error"), request_id)

    def parse_error_without_id(self) -> Case:
        body = bytes(self.rng.randrange(1, 256) for _ in range(self.rng.randrange(1, 60)))
        body = body.replace(b"\n", b"").replace(b"\r", b"") + b"\xff"  # invalid UTF-8 for sure
        if b'"id"' in body:
            body = body.replace(b'"id"', b"")
        if self.rng.random() < 0.5:
            body = self.rng.choice([b"{", b"garbage ", b'{"jsonrpc":"2.0","method":"ping",']) + body
        return Case("parse_error", body + b"\n", (-32700, "parse_error"))

    def truncated(self) -> Case:
        request_id = self.next_id()
        full = self.line(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": CONTENT}},
            }
        )[:-1]
        start = full.index(b'"method"')
        cut = self.rng.randrange(start, len(full) - 1)
        return Case("truncated", full[:cut] + b"\n", (-32700, "parse_error"), request_id)

    def wrong_shape_with_id(self) -> Case:
        request_id = self.next_id()
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "ping"}
        change = self.rng.choice(["jsonrpc", "no_jsonrpc", "method", "params", "result"])
        if change == "jsonrpc":
            obj["jsonrpc"] = self.rng.choice(["1.0", 2.0, None, "", "2.0 "])
        elif change == "no_jsonrpc":
            del obj["jsonrpc"]
        elif change == "method":
            obj["method"] = self.rng.choice([5, None, True, ["ping"], {"m": CONTENT}])
        elif change == "params":
            obj["params"] = self.rng.choice([[1, 2], CONTENT, 3, True])
        else:
            obj["result"] = {}
        return Case("wrong_shape", self.line(obj), (-32600, "invalid_request_shape"), request_id)

    def invalid_id(self) -> Case:
        bad_id = self.rng.choice([None, 1.5, True, False, [1], {"id": 1}, 1e300, -0.0])
        obj = {"jsonrpc": "2.0", "id": bad_id, "method": self.rng.choice(["ping", "tools/call", "nope"])}
        return Case("invalid_id", self.line(obj), (-32600, "invalid_request_shape"))

    def not_an_object(self) -> Case:
        value: Any = self.rng.choice(
            [[], [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], 1, "str", None, True, -1.5, [[[]]]]
        )
        return Case("not_an_object", self.line(value), (-32600, "invalid_request_shape"))

    def too_deep(self) -> Case:
        request_id = self.next_id()
        depth = self.rng.randrange(DEPTH - 1, DEPTH + 60)
        params = '{"a":' * depth + "1" + "}" * depth
        line = (self.head(request_id) + params + "}").encode()
        levels = depth + 1  # the message object, then params is the first of the depth levels
        if levels <= DEPTH:
            return Case("deep_ok", line + b"\n", ("result", "ping"), request_id)
        return Case("too_deep", line + b"\n", (-32600, "too_deep"), request_id)

    def far_too_deep(self) -> Case:
        # Deeper than the stack of any recursive parser; still shorter than the line limit.
        request_id = self.next_id()
        depth = self.rng.randrange(1500, 3500)
        params = "[" * depth + "]" * depth
        line = (self.head(request_id) + params + "}").encode()
        return Case("far_too_deep", line + b"\n", (-32600, "too_deep"), request_id)

    def too_long(self) -> Case:
        size = self.rng.randrange(MAX_LINE + 1, 4 * MAX_LINE)
        filler = CONTENT * (size // len(CONTENT) + 1)
        where = self.rng.choice(["first", "last", "none"])
        if where == "none":
            return Case("too_long", b"[" + filler.encode() + b"]\n", (-32600, "line_too_long"))
        request_id = self.next_id()
        params = {"name": "echo", "arguments": {"text": filler}}
        if where == "first":
            obj = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        else:
            obj = {"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": request_id}
        return Case("too_long_id", self.line(obj), (-32600, "line_too_long"), request_id)

    def answer_to_nothing(self) -> Case:
        obj: Any = self.rng.choice(
            [
                {"jsonrpc": "2.0", "id": self.rng.randrange(10**6), "result": {"c": CONTENT}},
                {"jsonrpc": "2.0", "id": f"b-{self.rng.randrange(1, 10**6)}", "result": {}},
                {"jsonrpc": "2.0", "id": None, "result": {}},
                {"jsonrpc": "2.0", "id": 1.5, "result": {}},
                {"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": CONTENT}},
                {"jsonrpc": "2.0", "id": "b-3", "error": {"code": "bad", "message": 1}},
                {"jsonrpc": "2.0", "error": {"code": 1, "message": "m"}},
                {"jsonrpc": "2.0", "id": "b-4", "result": {}, "error": {"code": 1, "message": "m"}},
            ]
        )
        return Case("answer", self.line(obj), None)

    def notification(self) -> Case:
        obj: Any = self.rng.choice(
            [
                {"jsonrpc": "2.0", "method": "notifications/unknown", "params": {"c": CONTENT}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "nobody"}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1.5}},
                {"jsonrpc": "2.0", "method": "notifications/cancelled"},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            ]
        )
        if self.rng.random() < 0.2:
            return Case("blank", self.rng.choice([b"\n", b"   \n", b"\t\r\n"]), None)
        return Case("notification", self.line(obj), None)

    def refused_request(self) -> Case:
        request_id = self.next_id()
        method, params, expect = self.rng.choice(
            [
                ("nope/" + CONTENT, None, (-32601, "method_not_found")),
                ("server/discover", None, (-32601, "method_not_found")),
                ("Tools/List", None, (-32601, "method_not_found")),
                ("logging/setLevel", {"level": "loud"}, (-32602, "invalid_params")),
                ("logging/setLevel", None, (-32602, "invalid_params")),
                (
                    "initialize",
                    {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "x", "version": "1"},
                    },
                    (-32600, "already_initialized"),
                ),
            ]
        )
        obj: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            obj["params"] = params
        return Case("refused", self.line(obj), expect, request_id)

    def duplicate_members(self) -> Case:
        first, last = self.next_id(), self.next_id()
        if self.rng.random() < 0.5:
            first_id, last_id = json.dumps(first), json.dumps(last)
            line = (
                '{"jsonrpc":"2.0","id":' + first_id + ',"method":"nope","id":' + last_id + ',"method":"ping"}'
            )
            return Case("duplicate_ok", line.encode() + b"\n", ("result", "ping"), last)
        line = '{"jsonrpc":"2.0","id":' + json.dumps(last) + ',"method":"ping","method":5}'
        return Case("duplicate_bad", line.encode() + b"\n", (-32600, "invalid_request_shape"), last)

    # -------------------------------------------------------------------------- run

    def cases(self, bad_lines: int) -> Iterator[Case]:
        sent_bad = 0
        while sent_bad < bad_lines:
            if self.rng.random() < 0.3:
                yield self.good()
            else:
                case = self.bad()
                sent_bad += case.kind not in ("deep_ok", "duplicate_ok")
                yield case


def collect(
    bridge: Bridge, done: Callable[[], bool], on_frame: Callable[[dict[str, Any]], None], timeout: float
) -> None:
    """Read frames until ``done()`` holds; every frame goes to ``on_frame``."""
    deadline = time.monotonic() + timeout
    while not done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the bridge did not answer every line in time")
        try:
            frame = bridge.frames.get(timeout=remaining)
        except queue.Empty:
            continue
        if frame is None:
            raise EOFError("the bridge closed its stdout")
        on_frame(frame)


@pytest.mark.slow
def test_thousands_of_bad_lines_get_their_errors_and_good_requests_their_answers() -> None:
    generator = Generator(SEED)
    command = bridge_command(
        "--log-level", "debug", "--max-line-bytes", str(MAX_LINE), upstream=fixture_command()
    )
    with Bridge(command) as bridge:
        assert "result" in bridge.initialize()
        by_id: dict[Any, Case] = {}
        answers: dict[Any, list[dict[str, Any]]] = {}
        expected_anonymous: list[tuple[Any, str]] = []
        anonymous: list[dict[str, Any]] = []
        kinds: dict[str, int] = {}

        def on_frame(frame: dict[str, Any]) -> None:
            if "method" in frame:
                # Only the list changes of the listen stream's first acknowledgment; no request.
                assert "id" not in frame and frame["method"].endswith("/list_changed"), frame
                return
            if "id" in frame:
                answers.setdefault(_key(frame["id"]), []).append(frame)
            else:
                anonymous.append(frame)

        chunk: list[Case] = []
        all_cases = list(generator.cases(BAD_LINES))
        for index, case in enumerate(all_cases, 1):
            kinds[case.kind] = kinds.get(case.kind, 0) + 1
            if case.expect is not None:
                if case.id is NO_ID:
                    expected_anonymous.append(case.expect)
                else:
                    assert _key(case.id) not in by_id
                    by_id[_key(case.id)] = case
            chunk.append(case)
            if len(chunk) == CHUNK or index == len(all_cases):
                bridge.send(b"".join(c.line for c in chunk))
                wanted = [_key(c.id) for c in chunk if c.expect is not None and c.id is not NO_ID]
                try:
                    collect(bridge, lambda w=wanted: all(k in answers for k in w), on_frame, 6 * WAIT)  # type: ignore[misc]
                except TimeoutError:
                    missing = [by_id[k] for k in wanted if k not in answers]
                    raise AssertionError(
                        "no answer to: " + "; ".join(f"{c.kind} {c.line[:150]!r}" for c in missing[:5])
                    ) from None
                chunk = []

        final = bridge.request_async("ping", id="final")
        collect(bridge, lambda: _key(final) in answers, on_frame, WAIT)

        bad_tried = sum(
            n for kind, n in kinds.items() if kind not in ("ping", "echo", "add", "deep_ok", "duplicate_ok")
        )
        assert bad_tried >= BAD_LINES
        for key, case in by_id.items():
            frames = answers.get(key, [])
            assert len(frames) == 1, (case.kind, case.line[:120], frames)
            _check(case, frames[0])
        unexpected = set(answers) - set(by_id) - {_key(final)}
        assert not unexpected, f"answers to ids that no line carried: {sorted(map(str, unexpected))[:5]}"
        got_anonymous = [(f["error"]["code"], f["error"]["data"]["cause"]) for f in anonymous]
        assert got_anonymous == expected_anonymous

        bridge.close_stdin()
        assert bridge.wait_exit(WAIT) == 0
    for raw in bridge.raw_lines:
        assert raw.endswith(b"\n")
        validate_legacy_frame(json.loads(raw))
    assert CONTENT not in bridge.stderr_text
    assert "Traceback" not in bridge.stderr_text
    print(f"\nfuzz: {bad_tried} bad lines tried, {len(all_cases) - bad_tried} good requests; {kinds}")


def _key(request_id: Any) -> tuple[str, Any]:
    # 1 and "1" are different ids; True is never an id here.
    return (type(request_id).__name__, request_id)


def _check(case: Case, frame: dict[str, Any]) -> None:
    assert case.expect is not None
    kind, detail = case.expect
    if kind == "result":
        assert "result" in frame, (case.kind, frame)
        validate_legacy_frame(frame, request_method=detail)
        if case.text is not None:
            assert frame["result"]["content"] == [{"type": "text", "text": case.text}]
            assert frame["result"].get("isError") is not True
        else:
            assert frame["result"] == {}
        return
    assert "error" in frame, (case.kind, case.line[:120], frame)
    error = frame["error"]
    assert (error["code"], error["data"]["cause"]) == (kind, detail), (case.kind, case.line[:120], error)
    if detail == "too_deep":
        assert error["data"]["detail"] == f"limit: {DEPTH} levels"
    if detail == "line_too_long":
        assert error["data"]["detail"] == f"limit: {MAX_LINE} bytes"
