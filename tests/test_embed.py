"""The embedded bridge: ``serve_stdio_auto`` serves both revisions on one stdio.

The first part runs the function in this process on real pipes, with the fixture
server; the second part runs the example server ``python -m mcpbridge.examples.notes_server``
as a child process, with our client, the harness, the Python SDK (``mcp==2.3.0``)
in 2026-07-28 mode and the TypeScript SDK in 2025-11-25 mode. Every frame is
checked against the schema of its revision.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from conftest import REPO_ROOT, WAIT, NodePeers
from fixtures.fixture_server import build
from harness import VSCODE_CAPABILITIES, Bridge, text_of
from mcpbridge.embed import serve_stdio_auto
from mcpbridge.mcp.server import Server
from schema import validate_legacy_frame, validate_modern_frame

#: The grace of the server in the tests of this process: short, so a stop is quick.
GRACE = 0.5
#: How long the function may take to return after the end of the input.
STOP_BOUND = 3.0
#: How long the example server may take to exit after the end of stdin (grace 2 s).
PROCESS_STOP_BOUND = 2 * 2.0 + 2.0

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
FORM_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": VSCODE_CAPABILITIES,
    "clientInfo": {"name": "Visual Studio Code", "version": "1.140.0"},
}
COPILOT_INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}},
    "clientInfo": {"name": "copilot-cli", "version": "1.0.89"},
}
NOTES_SERVER = [sys.executable, "-m", "mcpbridge.examples.notes_server"]
#: The debug line of the embedded bridge when its listen stream opens.
LISTEN_OPEN = "the listen stream is open"
#: The example server with the debug lines of its embedded bridge on stderr, to see LISTEN_OPEN.
TRACED_NOTES_SERVER = [
    sys.executable,
    "-c",
    "import logging; logging.getLogger('mcpbridge.bridge').setLevel(logging.DEBUG); "
    "from mcpbridge.examples.notes_server import main; main()",
]


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        frame["params"] = params
    return frame


def notification(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return request(request_id, method, {**(params or {}), "_meta": dict(META)})


def line(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame).encode() + b"\n"


def is_response(frame: dict[str, Any], request_id: Any) -> bool:
    return frame.get("id") == request_id and "method" not in frame


def first_text(frame: dict[str, Any]) -> str:
    return text_of(frame)


# ------------------------------------------------------------- the function in this process


class _Opened(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == LISTEN_OPEN:
            self.event.set()


@contextmanager
def listen_stream_opened() -> Iterator[threading.Event]:
    """An event that the embedded bridge of this process sets when its listen stream opens."""
    logger = logging.getLogger("mcpbridge.bridge")
    opened = _Opened()
    level = logger.level
    logger.addHandler(opened)
    logger.setLevel(logging.DEBUG)
    try:
        yield opened.event
    finally:
        logger.removeHandler(opened)
        logger.setLevel(level)


class Embedded:
    """``serve_stdio_auto`` on its own thread, between two real pipes."""

    def __init__(self, server: Server, **options: Any) -> None:
        self.server = server
        in_read, in_write = os.pipe()
        out_read, out_write = os.pipe()
        self._stdin = os.fdopen(in_read, "rb")
        self._stdout = os.fdopen(out_write, "wb")
        self._input = os.fdopen(in_write, "wb")
        self._output = os.fdopen(out_read, "rb")
        self._cond = threading.Condition()
        self._frames: list[dict[str, Any]] = []
        self._output_ended = False
        self.methods: dict[Any, str] = {}
        self.returned = threading.Event()
        self.error: BaseException | None = None
        self._finished = False
        self._options = options
        self._serve = threading.Thread(target=self._run, name="test-embed-serve", daemon=True)
        self._reader = threading.Thread(target=self._read, name="test-embed-output", daemon=True)
        self._serve.start()
        self._reader.start()

    def _run(self) -> None:
        try:
            serve_stdio_auto(self.server, stdin=self._stdin, stdout=self._stdout, **self._options)
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc
        finally:
            self.returned.set()

    def _read(self) -> None:
        for raw in self._output:
            frame = json.loads(raw)
            with self._cond:
                self._frames.append(frame)
                self._cond.notify_all()
        with self._cond:
            self._output_ended = True
            self._cond.notify_all()

    # -- input

    def send(self, *frames: dict[str, Any]) -> None:
        """Write the frames in one chunk."""
        for frame in frames:
            if "id" in frame and "method" in frame:
                self.methods[frame["id"]] = frame["method"]
        self.send_raw(b"".join(line(frame) for frame in frames))

    def send_raw(self, data: bytes) -> None:
        self._input.write(data)
        self._input.flush()

    def call(self, frame: dict[str, Any]) -> dict[str, Any]:
        self.send(frame)
        return self.response(frame["id"])

    # -- output

    @property
    def frames(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._frames)

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        with self._cond:
            while True:
                for frame in self._frames:
                    if predicate(frame):
                        return frame
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._output_ended:
                    raise AssertionError(f"no {what}; frames: {self._frames}")
                self._cond.wait(remaining)

    def response(self, request_id: Any) -> dict[str, Any]:
        return self.wait_for(lambda f: is_response(f, request_id), f"response to {request_id!r}")

    def client_request(self, method: str) -> dict[str, Any]:
        return self.wait_for(lambda f: f.get("method") == method and "id" in f, f"request {method}")

    def index(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return next(i for i, frame in enumerate(self.frames) if predicate(frame))

    # -- end

    def finish(self) -> None:
        """Close the input; fail unless the function returns within :data:`STOP_BOUND`."""
        if self._finished:
            return
        self._finished = True
        self._input.close()
        returned = self.returned.wait(STOP_BOUND)
        self._serve.join(WAIT)
        self._stdout.close()  # the function never closes it: this ends the reader
        self._reader.join(WAIT)
        self._stdin.close()
        self._output.close()
        assert returned, f"serve_stdio_auto did not return within {STOP_BOUND} s of the end of the input"
        if self.error is not None:
            raise self.error

    def check_frames(self, *, legacy: bool, modern_ids: tuple[Any, ...] = ()) -> None:
        """Check every frame against the schema of its revision.

        ``modern_ids``: the 2026-07-28 answers on a connection that became legacy.
        """
        for frame in self.frames:
            method = self.methods.get(frame.get("id")) if "method" not in frame else None
            if not legacy or ("method" not in frame and frame.get("id") in modern_ids):
                validate_modern_frame(frame, request_method=method)
            else:
                validate_legacy_frame(frame, request_method=method)


def fixture_server(**limits: Any) -> Server:
    server = build()
    server.shutdown_grace = GRACE
    for name, value in limits.items():
        setattr(server, name, value)
    return server


@pytest.fixture
def embedded() -> Iterator[Callable[..., Embedded]]:
    """Start ``serve_stdio_auto`` (fixture server, grace 0.5 s); every run is finished at the end."""
    started: list[Embedded] = []

    def start(server: Server | None = None, **options: Any) -> Embedded:
        connection = Embedded(server or fixture_server(), **options)
        started.append(connection)
        return connection

    yield start
    for connection in started:
        connection.finish()


def expect_legacy_initialize(frame: dict[str, Any], name: str = "bridge-fixture-server") -> None:
    result = frame["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == name
    assert "tools" in result["capabilities"]
    validate_legacy_frame(frame, request_method="initialize")


def expect_discover_result(frame: dict[str, Any]) -> None:
    result = frame["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "protocolVersion" not in result
    validate_modern_frame(frame, request_method="server/discover")


def initialize(connection: Embedded, request_id: Any = 1, params: dict[str, Any] | None = None) -> None:
    expect_legacy_initialize(connection.call(request(request_id, "initialize", params or INITIALIZE)))


# ------------------------------------------------------------------------- legacy path


def test_initialize_first_selects_the_legacy_path_where_tools_list_and_a_form_round_via_b_1_work(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    initialize(c)
    c.send(notification("notifications/initialized"))
    tools = c.call(request(2, "tools/list"))["result"]["tools"]
    assert {"add", "ask_form", "toggle"} <= {tool["name"] for tool in tools}
    assert first_text(c.call(request(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))) == "5"
    c.send(request(4, "tools/call", {"name": "ask_form", "arguments": {}}))
    form = c.client_request("elicitation/create")
    assert form["id"] == "b-1" and form["params"]["message"] == "Tell us about you."
    c.send_raw(
        line({"jsonrpc": "2.0", "id": "b-1", "result": {"action": "accept", "content": {"name": "Ada"}}})
    )
    assert first_text(c.response(4)) == 'form: accept {"name":"Ada"}'
    # After initialize, server/discover belongs to the front end, which refuses it.
    refused = c.call(request(5, "server/discover", {"_meta": META}))
    assert refused["error"]["code"] == -32601
    c.finish()
    c.check_frames(legacy=True)
    assert c.server._connection_list() == []


def test_a_server_discover_first_is_answered_by_the_server_and_initialize_then_selects_the_legacy_path(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    expect_discover_result(c.call(modern(11, "server/discover")))
    assert c.frames[0]["id"] == 11
    # A second discover also selects no path.
    expect_discover_result(c.call(modern(12, "server/discover")))
    initialize(c)
    assert first_text(c.call(request(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))) == "5"
    c.finish()
    c.check_frames(legacy=True, modern_ids=(11, 12))


def test_discover_refuse_answers_minus_32601_and_the_copilot_initialize_then_gets_a_legacy_path_with_forms(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded(discover="refuse")
    refused = c.call(modern(11, "server/discover"))
    assert refused["error"]["code"] == -32601
    assert refused["error"]["data"]["cause"] == "method_not_found"
    initialize(c, 2, COPILOT_INITIALIZE)
    add = {"name": "add", "arguments": {"a": 1, "b": 1}, "_meta": {"progressToken": 0}}
    assert first_text(c.call(request(3, "tools/call", add))) == "2"
    c.send(request(4, "tools/call", {"name": "ask_form", "arguments": {}}))
    assert c.client_request("elicitation/create")["id"] == "b-1"
    c.send_raw(line({"jsonrpc": "2.0", "id": "b-1", "result": {"action": "decline"}}))
    assert first_text(c.response(4)) == "form: decline"
    c.finish()
    c.check_frames(legacy=True)


def test_blank_lines_select_nothing(embedded: Callable[..., Embedded]) -> None:
    c = embedded()
    c.send_raw(b"\n  \t\r\n\n")
    initialize(c)
    c.finish()
    assert len(c.frames) == 1
    c.check_frames(legacy=True)


def test_an_input_of_blank_lines_only_selects_no_path_and_writes_nothing(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    c.send_raw(b"\n\r\n   \n")
    c.finish()
    assert c.frames == []


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_too_long_first_line_is_dropped_and_initialize_then_selects_the_legacy_path(
    embedded: Callable[..., Embedded],
) -> None:
    records = _Records()
    logger = logging.getLogger("mcpbridge.embed")
    logger.addHandler(records)
    try:
        c = embedded(fixture_server(max_line_bytes=1024))
        c.send(modern(9, "tools/list", {"x": "x" * 6000}))
        initialize(c)
        assert (
            first_text(c.call(request(2, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})))
            == "5"
        )
        c.finish()
    finally:
        logger.removeHandler(records)
    # The responses of initialize and of the call; the line that is too long got none.
    assert [frame["id"] for frame in c.frames] == [1, 2]
    assert "dropped a frame longer than 1024 bytes" in records.messages
    c.check_frames(legacy=True)


def test_initialize_initialized_and_ping_in_one_chunk_get_two_responses_and_no_error(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    c.send(
        request(1, "initialize", INITIALIZE), notification("notifications/initialized"), request(2, "ping")
    )
    expect_legacy_initialize(c.response(1))
    assert c.response(2)["result"] == {}
    c.finish()
    # The ping may be answered while initialize runs, and list changes may follow the
    # result when the reader is late: the responses are exactly two.
    responses = [frame for frame in c.frames if "method" not in frame]
    assert sorted(frame["id"] for frame in responses) == [1, 2]
    assert not [frame for frame in c.frames if "error" in frame]
    c.check_frames(legacy=True)


def test_legacy_list_changes_of_a_call_reach_the_client_before_its_result(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    with listen_stream_opened() as opened:
        initialize(c)
        c.send(notification("notifications/initialized"))
        assert opened.wait(WAIT), "the listen stream did not open"
    # A change of a list that the client has not asked for yet does not reach it.
    assert "result" in c.call(request(99, "tools/list"))
    for n in range(20):
        request_id = 100 + n
        before = len([f for f in c.frames if f.get("method") == "notifications/tools/list_changed"])
        enabled = n % 2 == 1
        result = c.call(
            request(request_id, "tools/call", {"name": "toggle", "arguments": {"enabled": enabled}})
        )
        assert first_text(result) == f"tool toggled: {'enabled' if enabled else 'disabled'}"
        at = c.index(lambda f, i=request_id: is_response(f, i))
        changes = [f for f in c.frames[:at] if f.get("method") == "notifications/tools/list_changed"]
        assert len(changes) == before + 1, f"no list change before the result of toggle {n}"
    c.finish()
    c.check_frames(legacy=True)


def test_the_legacy_path_stops_in_bounded_time_with_a_call_a_form_and_a_listen_stream_in_flight(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    with listen_stream_opened() as opened:
        initialize(c)
        c.send(notification("notifications/initialized"))
        assert opened.wait(WAIT), "the listen stream did not open"
    c.send(request(2, "tools/call", {"name": "slow", "arguments": {"ms": 60000}}))
    c.send(request(3, "tools/call", {"name": "ask_form", "arguments": {}}))
    assert c.client_request("elicitation/create")["id"] == "b-1"
    assert c.call(request(4, "ping"))["result"] == {}
    c.finish()
    # At the end of the input the requests in flight had the grace to finish; they did not, so
    # each got input_ended, once; the form of the bridge was withdrawn.
    answers = [f for f in c.frames if "method" not in f and f.get("id") in (2, 3)]
    assert sorted((f["id"], f["error"]["data"]["cause"]) for f in answers) == [
        (2, "input_ended"),
        (3, "input_ended"),
    ]
    cancelled = [f["params"] for f in c.frames if f.get("method") == "notifications/cancelled"]
    assert cancelled == [{"requestId": "b-1", "reason": "the client closed the connection"}]
    # The server has no connection left, so no listen stream.
    assert c.server._connection_list() == []
    c.check_frames(legacy=True)


# ------------------------------------------------------------------------- modern path


def test_discover_then_a_modern_call_select_the_modern_path_and_a_later_initialize_gets_an_error(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    expect_discover_result(c.call(modern(11, "server/discover")))
    tools = c.call(modern(2, "tools/list"))["result"]["tools"]
    assert "add" in {tool["name"] for tool in tools}
    assert first_text(c.call(modern(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))) == "5"
    # The connection stays on the modern path: the server refuses initialize.
    refused = c.call(request(1, "initialize", INITIALIZE))
    assert refused["error"]["code"] == -32022
    c.finish()
    c.check_frames(legacy=False)


def test_a_modern_request_first_selects_the_modern_path_also_with_discover_refuse(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded(discover="refuse")
    assert c.call(modern(11, "server/discover"))["error"]["code"] == -32601
    tools = c.call(modern(2, "tools/list"))["result"]["tools"]
    assert "add" in {tool["name"] for tool in tools}
    assert c.call(request(1, "initialize", INITIALIZE))["error"]["code"] == -32022
    c.finish()
    c.check_frames(legacy=False)


def test_a_notification_first_selects_the_modern_path(embedded: Callable[..., Embedded]) -> None:
    c = embedded()
    c.send(notification("notifications/initialized"))
    assert first_text(c.call(modern(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))) == "5"
    c.finish()
    assert len(c.frames) == 1  # the notification got no response
    c.check_frames(legacy=False)


def test_malformed_json_first_selects_the_modern_path_and_gets_a_parse_error(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"initialize"\n')
    error = c.wait_for(lambda f: "error" in f, "the parse error")
    assert error["error"]["code"] == -32700 and error["error"]["message"] == "Parse error"
    assert error.get("id") is None
    assert first_text(c.call(modern(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))) == "5"
    c.finish()
    c.check_frames(legacy=False)


def test_a_line_that_is_not_utf_8_first_selects_the_modern_path_and_gets_a_parse_error(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}\n')
    error = c.wait_for(lambda f: "error" in f, "the parse error")
    assert error["error"]["code"] == -32700
    assert first_text(c.call(modern(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))) == "5"
    c.finish()
    c.check_frames(legacy=False)


def test_initialize_only_inside_a_string_selects_the_modern_path(embedded: Callable[..., Embedded]) -> None:
    c = embedded()
    # A 2025-11-25 request that names initialize in its params: the server wants _meta.
    refused = c.call(request(1, "tools/call", {"name": "initialize", "arguments": {}}))
    assert refused["error"]["code"] == -32602
    c.finish()
    c.check_frames(legacy=False)


def test_discover_and_a_modern_call_in_one_chunk_are_both_answered(embedded: Callable[..., Embedded]) -> None:
    c = embedded()
    c.send(
        modern(11, "server/discover"), modern(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
    )
    expect_discover_result(c.response(11))
    assert first_text(c.response(3)) == "5"
    assert c.index(lambda f: is_response(f, 11)) < c.index(lambda f: is_response(f, 3))
    c.finish()
    c.check_frames(legacy=False)


def test_the_end_of_the_input_after_a_discover_selects_no_path(embedded: Callable[..., Embedded]) -> None:
    c = embedded()
    expect_discover_result(c.call(modern(11, "server/discover")))
    c.finish()
    assert len(c.frames) == 1
    assert c.server._connection_list() == []


def test_the_modern_path_ends_listen_streams_at_the_end_and_cancels_a_call_after_the_grace(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded()
    c.send(modern(5, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    c.wait_for(lambda f: f.get("method") == "notifications/subscriptions/acknowledged", "the acknowledgment")
    c.send(modern(6, "tools/call", {"name": "slow", "arguments": {"ms": 60000}}))
    # A call that changes a list: its event precedes its result on the modern path too.
    toggled = c.call(modern(7, "tools/call", {"name": "toggle", "arguments": {"enabled": False}}))
    assert first_text(toggled) == "tool toggled: disabled"
    changed = c.index(lambda f: f.get("method") == "notifications/tools/list_changed")
    assert changed < c.index(lambda f: is_response(f, 7))
    c.finish()
    ended = c.response(5)
    assert "result" in ended
    cancelled = [f["params"] for f in c.frames if f.get("method") == "notifications/cancelled"]
    assert cancelled == [{"requestId": 5, "reason": "the server is shutting down"}]
    assert not [f for f in c.frames if is_response(f, 6)]
    assert c.server._connection_list() == []
    c.check_frames(legacy=False)


def test_a_modern_call_that_ends_within_the_grace_still_writes_its_result(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded(fixture_server(shutdown_grace=2.5))
    c.send(modern(6, "tools/call", {"name": "slow", "arguments": {"ms": 300}}))
    c.finish()
    assert first_text(c.response(6)) == "slept 300 ms"
    c.check_frames(legacy=False)


def test_the_modern_reader_answers_a_request_over_the_limit_at_once(
    embedded: Callable[..., Embedded],
) -> None:
    c = embedded(fixture_server(max_in_flight=1))
    c.send(modern(6, "tools/call", {"name": "slow", "arguments": {"ms": 60000}}))
    full = c.call(modern(7, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))
    assert full["error"]["code"] == -32603
    c.finish()
    assert len(c.frames) == 1
    c.check_frames(legacy=False)


def test_an_unknown_discover_option_is_refused() -> None:
    with pytest.raises(ValueError, match="discover"):
        serve_stdio_auto(fixture_server(), discover="maybe")  # type: ignore[arg-type]


# ----------------------------------------------------------- the example server process


def notes_bridge(*options: str) -> Bridge:
    return Bridge([*TRACED_NOTES_SERVER, *options])


def start_legacy(bridge: Bridge, params: dict[str, Any] | None = None) -> None:
    """Initialize on the legacy path, and wait until the listen stream is open."""
    response = bridge.request("initialize", params or INITIALIZE, timeout=30.0)
    expect_legacy_initialize(response, name="notes")
    bridge.notify("notifications/initialized")
    bridge.wait_stderr(LISTEN_OPEN)


def legacy_call(bridge: Bridge, name: str, arguments: dict[str, Any]) -> Any:
    return bridge.request_async("tools/call", {"name": name, "arguments": arguments})


def tools_changes_before(bridge: Bridge, request_id: Any) -> int:
    """The tools list changes the bridge wrote before its response to ``request_id`` (``None``: so far)."""
    count = 0
    for frame in bridge.seen:
        if request_id is not None and is_response(frame, request_id):
            return count
        count += frame.get("method") == "notifications/tools/list_changed"
    assert request_id is None, f"no response to {request_id!r} yet"
    return count


def check_process_frames(bridge: Bridge, *, legacy: bool, modern_ids: tuple[Any, ...] = ()) -> None:
    for raw in bridge.raw_lines:
        frame = json.loads(raw)
        if not legacy or ("method" not in frame and frame.get("id") in modern_ids):
            validate_modern_frame(frame)
        else:
            validate_legacy_frame(frame)


def stop_process(bridge: Bridge) -> int:
    """End stdin; the exit code, which must come within :data:`PROCESS_STOP_BOUND`."""
    bridge.close_stdin()
    return bridge.wait_exit(PROCESS_STOP_BOUND)


def test_the_example_server_serves_vs_code_with_list_changes_before_results_and_a_confirmation_form() -> None:
    with notes_bridge() as bridge:
        start_legacy(bridge)
        names = {tool["name"] for tool in bridge.request("tools/list")["result"]["tools"]}
        assert {"add_note", "remind"} <= names and "delete_note" not in names
        before = tools_changes_before(bridge, None)
        add = legacy_call(bridge, "add_note", {"title": "groceries", "text": "milk"})
        assert text_of(bridge.wait_response(add)) == "Saved the note 'groceries' (1 notes)."
        assert tools_changes_before(bridge, add) == before + 1
        names = {tool["name"] for tool in bridge.request("tools/list")["result"]["tools"]}
        assert "delete_note" in names
        delete = legacy_call(bridge, "delete_note", {"title": "groceries"})
        form = bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        assert form["id"] == "b-1" and form["params"]["message"] == "Delete the note 'groceries'?"
        bridge.send(
            {
                "jsonrpc": "2.0",
                "id": "b-1",
                "result": {"action": "accept", "content": {"continue": "Continue"}},
            }
        )
        assert text_of(bridge.wait_response(delete)) == "Deleted the note 'groceries'."
        assert tools_changes_before(bridge, delete) == before + 2
        read = bridge.request("resources/read", {"uri": "notes://all"})
        assert read["result"]["contents"][0]["text"] == "No notes yet."
        assert stop_process(bridge) == 0
        check_process_frames(bridge, legacy=True)


def test_the_example_server_with_refuse_discover_serves_the_copilot_flow_on_the_legacy_path() -> None:
    with notes_bridge("--refuse-discover") as bridge:
        refused = bridge.request("server/discover", {"_meta": META})
        assert refused["error"]["code"] == -32601
        start_legacy(bridge, COPILOT_INITIALIZE)
        bridge.wait_response(legacy_call(bridge, "add_note", {"title": "plan", "text": "ship it"}))
        delete = legacy_call(bridge, "delete_note", {"title": "plan"})
        assert bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")["id"] == "b-1"
        bridge.send({"jsonrpc": "2.0", "id": "b-1", "result": {"action": "decline"}})
        assert text_of(bridge.wait_response(delete)) == "Kept the note 'plan'."
        assert stop_process(bridge) == 0
        check_process_frames(bridge, legacy=True)


def test_the_example_server_serves_our_modern_client_with_an_input_round_progress_and_a_listen_stream() -> (
    None
):
    from mcpbridge.mcp.client import Client
    from mcpbridge.mcp.transports.stdio import StdioChildTransport

    transport = StdioChildTransport(NOTES_SERVER, max_line_bytes=1024 * 1024)
    client = Client(transport, client_info={"name": "mcpbridge-test", "version": "0.1.0"})
    client.start()
    events: queue.Queue[str] = queue.Queue()
    try:
        discovered = client.discover(timeout=WAIT)
        assert discovered["supportedVersions"] == ["2026-07-28"]
        assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "notes"
        stream = client.listen({"toolsListChanged": True}, on_event=lambda event: events.put(event.method))
        assert stream.wait_acknowledged(WAIT) == {"toolsListChanged": True}
        added = client.request(
            "tools/call", {"name": "add_note", "arguments": {"title": "a", "text": "b"}}, timeout=WAIT
        )
        assert added["content"][0]["text"] == "Saved the note 'a' (1 notes)."
        assert events.get(timeout=WAIT) == "notifications/tools/list_changed"
        call = {"name": "delete_note", "arguments": {"title": "a"}}
        capabilities = {"elicitation": {"form": {}}}
        first = client.request(
            "tools/call", call, timeout=WAIT, capabilities=capabilities, allow_input_required=True
        )
        assert first["resultType"] == "input_required"
        assert first["inputRequests"]["confirm"]["params"]["message"] == "Delete the note 'a'?"
        retry = dict(call, inputResponses={"confirm": {"action": "accept", "content": {}}})
        second = client.request("tools/call", retry, timeout=WAIT, capabilities=capabilities)
        assert second["content"][0]["text"] == "Deleted the note 'a'."
        assert events.get(timeout=WAIT) == "notifications/tools/list_changed"
        progress: list[float] = []
        reminded = client.request(
            "tools/call",
            {"name": "remind", "arguments": {"text": "stand up", "seconds": 1}},
            timeout=WAIT,
            on_progress=lambda params: progress.append(params["progress"]),
        )
        assert reminded["content"][0]["text"] == "Reminder: stand up"
        assert progress == [0, 1]
        stream.cancel()
    finally:
        client.close()
    assert client.exit_status == "code 0"


def test_the_example_server_exits_0_in_bounded_time_at_eof_with_work_in_flight_on_the_legacy_path() -> None:
    with notes_bridge() as bridge:
        start_legacy(bridge)
        bridge.wait_response(legacy_call(bridge, "add_note", {"title": "a", "text": "b"}))
        remind = legacy_call(bridge, "remind", {"text": "later", "seconds": 60})
        delete = legacy_call(bridge, "delete_note", {"title": "a"})
        bridge.wait_frame(lambda f: f.get("method") == "elicitation/create")
        assert stop_process(bridge) == 0
        rest = bridge.drain()
        # The calls in flight at the end of the input had the grace to finish; they did not, so
        # each got input_ended, once.
        answers = [f for f in bridge.seen if "method" not in f and f.get("id") in (remind, delete)]
        assert sorted((f["id"], f["error"]["data"]["cause"]) for f in answers) == sorted(
            [(remind, "input_ended"), (delete, "input_ended")]
        )
        assert {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "b-1", "reason": "the client closed the connection"},
        } in rest
        check_process_frames(bridge, legacy=True)


def test_the_example_server_exits_0_in_bounded_time_at_eof_with_work_in_flight_on_the_modern_path() -> None:
    with notes_bridge() as bridge:
        bridge.send(modern(5, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
        bridge.wait_frame(lambda f: f.get("method") == "notifications/subscriptions/acknowledged")
        bridge.send(
            modern(6, "tools/call", {"name": "remind", "arguments": {"text": "later", "seconds": 60}})
        )
        added = bridge.request(
            "tools/call", {"name": "add_note", "arguments": {"title": "a", "text": "b"}, "_meta": META}
        )
        assert text_of(added) == "Saved the note 'a' (1 notes)."
        assert stop_process(bridge) == 0
        bridge.drain()
        assert "result" in bridge.wait_response(5)
        assert not [f for f in bridge.seen if is_response(f, 6)]
        check_process_frames(bridge, legacy=False)


# ------------------------------------------------------------------------------ interop


@pytest.mark.interop
@pytest.mark.slow
def test_the_python_sdk_2026_client_uses_the_example_server_with_an_input_round_and_a_list_change() -> None:
    import anyio
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.session import ClientRequestContext
    from mcp.client.subscriptions import ToolsListChanged

    seen: dict[str, Any] = {}
    asked: list[str] = []

    async def confirm(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={})

    def text(result: types.CallToolResult) -> str:
        return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))

    async def exercise() -> None:
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["-m", "mcpbridge.examples.notes_server"],
            env=dict(os.environ),
            cwd=REPO_ROOT,
        )
        with anyio.fail_after(6 * WAIT):
            async with Client(
                parameters,
                mode="auto",
                elicitation_callback=confirm,
                client_info=types.Implementation(name="python-sdk-interop", version="2.3.0"),
            ) as client:
                seen["version"] = client.protocol_version
                seen["server"] = client.server_info.name if client.server_info else None
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                async with client.listen(tools_list_changed=True) as stream:
                    seen["add"] = text(await client.call_tool("add_note", {"title": "a", "text": "b"}))
                    with anyio.fail_after(WAIT):
                        async for event in stream:
                            seen["event"] = event
                            break
                seen["delete"] = text(await client.call_tool("delete_note", {"title": "a"}))
                seen["notes"] = (await client.read_resource("notes://all")).contents[0].text  # type: ignore[union-attr]
                prompt = await client.get_prompt("summarize_notes", {"style": "short"})
                seen["prompt"] = prompt.messages[0].content.text  # type: ignore[union-attr]

    anyio.run(exercise)
    assert seen["version"] == "2026-07-28"
    assert seen["server"] == "notes"
    assert {"add_note", "remind"} <= set(seen["tools"])
    assert seen["add"] == "Saved the note 'a' (1 notes)."
    assert seen["event"] == ToolsListChanged()
    assert asked == ["Delete the note 'a'?"]
    assert seen["delete"] == "Deleted the note 'a'."
    assert seen["notes"] == "No notes yet."
    assert seen["prompt"].startswith("Summarize these notes in a short style.")


TS_SCRIPT = REPO_ROOT / "tests" / "interop" / "legacy_client.mjs"
TS_STEPS: list[dict[str, Any]] = [
    {"id": "add", "kind": "call", "name": "add_note", "arguments": {"title": "groceries", "text": "milk"}},
    {"id": "delete", "kind": "call", "name": "delete_note", "arguments": {"title": "groceries"}},
    {
        "id": "add_again",
        "kind": "call",
        "name": "add_note",
        "arguments": {"title": "plan", "text": "ship it"},
    },
    {"id": "all", "kind": "read", "uri": "notes://all"},
    {"id": "one", "kind": "read", "uri": "notes://note/plan"},
    {"id": "summary", "kind": "prompt", "name": "summarize_notes", "arguments": {"style": "short"}},
    {
        "id": "remind",
        "kind": "call",
        "name": "remind",
        "arguments": {"text": "stand up", "seconds": 1},
        "progress": True,
    },
    {"id": "subscribe", "kind": "subscribe", "uri": "notes://all"},
    {"id": "add_idea", "kind": "call", "name": "add_note", "arguments": {"title": "idea", "text": "nap"}},
    {"id": "unsubscribe", "kind": "unsubscribe", "uri": "notes://all"},
]


def _between(summary: dict[str, Any], event: str, step_before: str, step: str) -> bool:
    """Whether ``event`` arrived after the response of ``step_before`` and before the response of ``step``."""
    events: list[str] = summary["events"]
    start = events.index(f"response {summary['steps'][step_before]['requestIds'][-1]}")
    end = events.index(f"response {summary['steps'][step]['requestIds'][-1]}")
    return event in events[start + 1 : end]


@pytest.mark.interop
@pytest.mark.slow
def test_the_typescript_sdk_legacy_client_uses_the_example_server_with_a_form_and_list_changes(
    node: NodePeers,
) -> None:
    plan = {
        "command": sys.executable,
        "args": ["-m", "mcpbridge.examples.notes_server"],
        "cwd": str(REPO_ROOT),
        "timeoutMs": 20000,
        "exitMs": 3000,
        "steps": TS_STEPS,
    }
    completed = subprocess.run(
        node.command(TS_SCRIPT, json.dumps(plan)),
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=150.0,
        check=False,
    )
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    assert lines, f"the script printed nothing: {completed.stderr.decode()[-2000:]}"
    summary: dict[str, Any] = json.loads(lines[-1])
    assert summary.get("ok") is True and completed.returncode == 0, summary.get("error") or summary
    steps = summary["steps"]
    for step_id, record in steps.items():
        assert "error" not in record, f"{step_id}: {record['error']}"
    assert summary["protocolVersion"] == "2025-11-25"
    assert summary["serverInfo"] == {"name": "notes", "title": "Notes", "version": "0.1.0"}
    assert {"add_note", "remind"} <= set(summary["tools"]["names"])
    assert summary["tools"]["invalidSchemas"] == []
    assert steps["add"]["text"] == "Saved the note 'groceries' (1 notes)."
    assert steps["delete"]["text"] == "Deleted the note 'groceries'."
    assert steps["add_again"]["text"] == "Saved the note 'plan' (1 notes)."
    # Deleting the last note hides delete_note, the next note shows it: each list change
    # arrives before the result of the call that made it.
    changed = "notification notifications/tools/list_changed"
    assert _between(summary, changed, "add", "delete")
    assert _between(summary, changed, "delete", "add_again")
    forms = [r["params"] for r in summary["requests"] if r["method"] == "elicitation/create"]
    assert [form["message"] for form in forms] == ["Delete the note 'groceries'?"]
    assert steps["all"]["text"] == "# plan\n\nship it"
    assert steps["one"]["contents"] == [
        {"uri": "notes://note/plan", "mimeType": "text/plain", "text": "ship it"}
    ]
    assert steps["summary"]["text"].startswith("Summarize these notes in a short style.")
    assert steps["remind"]["text"] == "Reminder: stand up"
    assert [p["progress"] for p in steps["remind"]["progress"]] == [0, 1]
    assert _between(summary, "notification notifications/resources/updated", "subscribe", "add_idea")
    assert not [n for n in summary["notifications"] if n["method"] == "notifications/cancelled"]
    assert summary["exit"] == {"code": 0, "signal": None}
