"""The 2026-07-28 server core, driven with raw messages over the memory link and over real pipes.

Every frame the server writes is checked against the 2026-07-28 schema.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from conftest import WAIT, bounded, read_line
from fixtures.fixture_server import NOTES_TEXT, NOTES_URI, build
from mcpbridge.mcp import jsonrpc, protocol
from mcpbridge.mcp.jsonrpc import Message
from mcpbridge.mcp.server import Server
from mcpbridge.mcp.server.connection import Context, ServerConnection
from mcpbridge.mcp.server.results import ToolError, elicit_form, missing_capabilities
from mcpbridge.mcp.state import StateSigner
from mcpbridge.mcp.transports.memory import memory_pair
from mcpbridge.mcp.transports.stdio import StdioServerTransport
from schema import FrameInvalid, validate_modern, validate_modern_frame

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fixture_server.py"
ALL_INPUTS: dict[str, Any] = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
SUBSCRIPTION_ID = protocol.META_SUBSCRIPTION_ID


def meta(
    capabilities: dict[str, Any] | None = None,
    *,
    log_level: str | None = None,
    progress: Any = None,
    version: str = protocol.MODERN,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        protocol.META_PROTOCOL_VERSION: version,
        protocol.META_CLIENT_CAPABILITIES: capabilities if capabilities is not None else {},
        protocol.META_CLIENT_INFO: {"name": "test-client", "version": "1.0"},
    }
    if log_level is not None:
        out[protocol.META_LOG_LEVEL] = log_level
    if progress is not None:
        out["progressToken"] = progress
    return out


def check_frame(frame: dict[str, Any], request_method: str | None) -> None:
    """Validate one frame of the server; an error without a readable id has ``id: null``."""
    if "error" in frame and frame.get("id") is None:
        validate_modern({k: v for k, v in frame.items() if k != "id"}, "JSONRPCErrorResponse")
        return
    validate_modern_frame(frame, request_method=request_method)
    if "error" in frame:
        code = frame["error"]["code"]
        if code == jsonrpc.MISSING_CLIENT_CAPABILITY:
            validate_modern(frame, "MissingRequiredClientCapabilityError")
        if code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION:
            validate_modern(frame, "UnsupportedProtocolVersionError")
    if "result" in frame:
        result = frame["result"]
        assert result["resultType"] in ("complete", "input_required")
        assert "io.modelcontextprotocol/serverInfo" in result["_meta"]
        if request_method in protocol.CACHEABLE_METHODS and result["resultType"] == "complete":
            assert result["ttlMs"] >= 0 and result["cacheScope"] in ("public", "private")


class Peer:
    """The client side of a test: sends raw frames, collects and validates the server's frames."""

    def __init__(self) -> None:
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.methods: dict[Any, str] = {}
        self.invalid: list[str] = []
        self._next_id = 0

    def received(self, frame: dict[str, Any]) -> None:
        try:
            check_frame(frame, self.methods.get(frame.get("id")) if "method" not in frame else None)
        except FrameInvalid as exc:
            self.invalid.append(f"{exc} in {json.dumps(frame)[:300]}")
        self.frames.put(frame)

    def write(self, frame: dict[str, Any]) -> None:
        raise NotImplementedError

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        log_level: str | None = None,
        progress: Any = None,
        id: Any = None,
        raw_params: bool = False,
    ) -> Any:
        if id is None:
            self._next_id += 1
            id = self._next_id
        body = dict(params or {})
        if not raw_params:
            body["_meta"] = meta(capabilities, log_level=log_level, progress=progress)
        self.methods[id] = method
        self.write({"jsonrpc": "2.0", "id": id, "method": method, "params": body})
        return id

    def call(self, method: str, params: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        return self.wait_response(self.request(method, params, **options))

    def result(self, method: str, params: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        response = self.call(method, params, **options)
        assert "result" in response, response
        return response["result"]  # type: ignore[no-any-return]

    def error(self, method: str, params: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
        response = self.call(method, params, **options)
        assert "error" in response, response
        return response["error"]  # type: ignore[no-any-return]

    def tool_text(self, name: str, arguments: dict[str, Any] | None = None, **options: Any) -> str:
        result = self.result("tools/call", {"name": name, "arguments": arguments or {}}, **options)
        assert result["resultType"] == "complete", result
        return str(result["content"][0]["text"])

    def cancel(self, request_id: Any, reason: str = "test") -> None:
        self.write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": reason},
            }
        )

    def next_frame(self, timeout: float = WAIT) -> dict[str, Any]:
        try:
            frame = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError("no frame from the server") from None
        if frame is None:
            self.frames.put(None)
            raise EOFError("the server closed the connection")
        self.seen.append(frame)
        return frame

    def wait_frame(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            frame = self.next_frame(max(0.0, deadline - time.monotonic()))
            if predicate(frame):
                return frame

    def wait_response(self, request_id: Any, timeout: float = WAIT) -> dict[str, Any]:
        for frame in self.seen:
            if frame.get("id") == request_id and "method" not in frame:
                return frame
        return self.wait_frame(lambda f: f.get("id") == request_id and "method" not in f, timeout)

    def quiet(self, timeout: float = 0.2) -> list[dict[str, Any]]:
        """The frames that arrive within ``timeout`` (to show that nothing else comes)."""
        out: list[dict[str, Any]] = []
        while True:
            try:
                out.append(self.next_frame(timeout))
            except (TimeoutError, EOFError):
                return out

    def assert_valid(self) -> None:
        assert not self.invalid, "\n".join(self.invalid)


class MemoryPeer(Peer):
    """A server on the memory link, in this process."""

    def __init__(self, server: Server) -> None:
        super().__init__()
        self.server = server
        self.client_transport, server_transport = memory_pair()
        self.client_transport.start(self._on_message, self._on_frame_error, self._on_closed)
        self.connection: ServerConnection = server.start(server_transport)

    def _on_message(self, message: Message) -> None:
        # Round-trip through JSON: what a client on a real pipe would see.
        self.received(json.loads(jsonrpc.serialize(message)))

    def _on_frame_error(self, error: object) -> None:
        self.invalid.append(f"frame error on the memory link: {error!r}")

    def _on_closed(self, error: object = None) -> None:
        self.frames.put(None)

    def write(self, frame: dict[str, Any]) -> None:
        self.client_transport.send(jsonrpc.from_obj(frame))

    def close(self) -> None:
        self.connection.close()
        self.client_transport.close()


class StdioPeer(Peer):
    """The fixture server as a child process on real pipes."""

    def __init__(self, *args: str) -> None:
        super().__init__()
        self.proc = subprocess.Popen(
            [sys.executable, str(FIXTURE), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.raw: list[bytes] = []
        self.stderr = b""
        self._reader = threading.Thread(target=self._read, name="test-fixture-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self.received(json.loads(line))
        self.frames.put(None)

    def write(self, frame: dict[str, Any]) -> None:
        self.write_bytes(json.dumps(frame).encode() + b"\n")

    def write_bytes(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait_exit(self, timeout: float = WAIT) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.close_stdin()
            try:
                self.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=WAIT)
        self._reader.join(WAIT)
        assert self.proc.stderr is not None
        self.stderr = bounded(self.proc.stderr.read, "the end of the server's stderr")
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()


@pytest.fixture
def peer() -> Iterator[MemoryPeer]:
    p = MemoryPeer(build(many_tools=5, page_size=4))
    yield p
    p.close()
    p.assert_valid()


def serve(server: Server) -> Iterator[MemoryPeer]:
    p = MemoryPeer(server)
    yield p
    p.close()
    p.assert_valid()


@pytest.fixture
def stdio() -> Iterator[StdioPeer]:
    p = StdioPeer()
    yield p
    p.stop()
    p.assert_valid()


# ------------------------------------------------------------------ discover


def test_discover_describes_the_server_from_what_is_registered(peer: MemoryPeer) -> None:
    result = peer.result("server/discover")
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"] == {
        "completions": {},
        "logging": {},
        "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "tools": {"listChanged": True},
    }
    assert result["instructions"] == "The upstream server of the mcpbridge tests."
    assert result["ttlMs"] == 0 and result["cacheScope"] == "public"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": "bridge-fixture-server",
        "version": "0.0.0",
    }
    validate_modern(result, "DiscoverResult")


def test_a_server_without_features_declares_only_logging() -> None:
    for p in serve(Server("bare", "1", title="Bare")):
        result = p.result("server/discover")
        assert result["capabilities"] == {"logging": {}}
        assert "instructions" not in result
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["title"] == "Bare"
        for method in ("tools/list", "prompts/list", "resources/list", "completion/complete"):
            assert p.error(method)["code"] == jsonrpc.METHOD_NOT_FOUND


# ------------------------------------------------------------------ _meta rules


def test_a_request_without_meta_is_invalid_params(peer: MemoryPeer) -> None:
    error = peer.error("tools/list", {}, raw_params=True)
    assert error["code"] == jsonrpc.INVALID_PARAMS
    assert "_meta" in error["message"]


def test_a_request_without_client_capabilities_is_invalid_params(peer: MemoryPeer) -> None:
    params = {"_meta": {protocol.META_PROTOCOL_VERSION: protocol.MODERN}}
    error = peer.error("tools/list", params, raw_params=True)
    assert error["code"] == jsonrpc.INVALID_PARAMS
    assert "clientCapabilities" in error["message"]


def test_an_unknown_protocol_version_names_the_supported_ones(peer: MemoryPeer) -> None:
    params = {"_meta": meta(version="2099-01-01")}
    error = peer.error("server/discover", params, raw_params=True)
    assert error["code"] == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}


def test_initialize_is_answered_with_the_supported_versions(peer: MemoryPeer) -> None:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    error = peer.error("initialize", params, raw_params=True)
    assert error["code"] == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}


def test_an_unknown_log_level_is_invalid_params(peer: MemoryPeer) -> None:
    assert peer.error("tools/list", log_level="loud")["code"] == jsonrpc.INVALID_PARAMS


def test_an_unknown_method_is_method_not_found(peer: MemoryPeer) -> None:
    for method in ("tasks/list", "ping", "resources/subscribe", "logging/setLevel"):
        error = peer.error(method)
        assert error["code"] == jsonrpc.METHOD_NOT_FOUND
        assert error["message"] == f"Method not found: {method}"


def test_a_string_request_id_is_echoed(peer: MemoryPeer) -> None:
    response = peer.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, id="req-1")
    assert response["id"] == "req-1"


# ------------------------------------------------------------------ lists


def test_tools_list_pages_with_opaque_cursors_until_the_last_page(peer: MemoryPeer) -> None:
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        result = peer.result("tools/list", {"cursor": cursor} if cursor is not None else {})
        pages += 1
        assert len(result["tools"]) <= 4
        names += [tool["name"] for tool in result["tools"]]
        if "nextCursor" not in result:
            break
        cursor = result["nextCursor"]
        assert isinstance(cursor, str) and cursor
    # 22 fixture tools (without crash and shutdown) and tool_0 .. tool_4.
    assert len(names) == len(set(names)) == 27
    assert pages == 7
    assert names[:2] == ["echo", "add"] and names[-1] == "tool_4"
    assert "crash" not in names and "shutdown" not in names


def test_an_invalid_cursor_is_invalid_params(peer: MemoryPeer) -> None:
    first = peer.result("tools/list")
    prompts_cursor = first["nextCursor"].replace("dG9vbHM", "cHJvbXB0cw")  # another list's prefix
    for cursor in ("", "nope", "!!!", 5, None, prompts_cursor, first["nextCursor"] + "A"):
        error = peer.error("tools/list", {"cursor": cursor})
        assert error["code"] == jsonrpc.INVALID_PARAMS, cursor


def test_inferred_input_schemas_follow_the_annotations(peer: MemoryPeer) -> None:
    tools = {t["name"]: t for t in _all(peer, "tools/list", "tools")}
    assert tools["add"]["inputSchema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    assert tools["progress"]["inputSchema"]["required"] == ["count"]
    assert tools["echo"]["annotations"] == {"readOnlyHint": True}
    assert tools["echo"]["description"] == "Send the text back"
    assert tools["structured"]["outputSchema"]["type"] == "object"
    assert tools["array_output"]["outputSchema"] == {"type": "array", "items": {"type": "integer"}}
    assert tools["bare_array"]["inputSchema"]["properties"]["pair"]["items"] is False


def test_prompts_resources_and_templates_are_listed(peer: MemoryPeer) -> None:
    prompts = peer.result("prompts/list")["prompts"]
    assert [p["name"] for p in prompts] == ["greet", "ask_name", "toggled"]
    assert prompts[0]["arguments"] == [
        {"name": "name", "description": "The name of the person", "required": True}
    ]
    resources = peer.result("resources/list")["resources"]
    assert resources == [{"uri": NOTES_URI, "name": "notes", "mimeType": "text/plain"}]
    templates = peer.result("resources/templates/list")["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "file:///fixture/blob/{bytes}"


def test_registration_options_become_definitions_in_order_and_wrong_ones_are_refused() -> None:
    server = Server("options", "1")

    @server.tool("named", title="Named", annotations={"readOnlyHint": True}, meta={"k": 1})
    def tool_fn(ctx: Context) -> str:
        """The docstring."""
        return ""

    server.prompt(description="Given")(lambda ctx: "hi")
    server.resource("demo://a", name="a", size=3, mime_type="text/plain")(lambda ctx: "abc")
    tool = server._tools["named"].definition
    assert list(tool) == ["name", "title", "description", "inputSchema", "annotations", "_meta"]
    assert tool["description"] == "The docstring." and tool["_meta"] == {"k": 1}
    assert server._prompts["<lambda>"].definition == {"name": "<lambda>", "description": "Given"}
    resource = server._resources["demo://a"].definition
    assert list(resource) == ["uri", "name", "mimeType", "size"]
    with pytest.raises(TypeError, match="'mime_type'"):
        server.tool(mime_type="text/plain")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="'input_schema'"):
        server.add_prompt(lambda ctx: "", input_schema={})  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="'name'"):
        server.resource("demo://b", title="b")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="given twice"):
        server.tool("one", name="two")
    with pytest.raises(ValueError, match="a tool named 'named' exists"):
        server.add_tool(tool_fn, name="named")


# ------------------------------------------------------------------ calls


def test_tool_calls_return_their_text(peer: MemoryPeer) -> None:
    assert peer.tool_text("echo", {"text": "hello"}) == "hello"
    assert peer.tool_text("add", {"a": 2, "b": 3}) == "5"
    assert peer.tool_text("tool_3") == "tool_3"
    assert peer.tool_text("bare_array", {"values": [1, "x", None]}) == "3 values"


def test_structured_results_carry_a_text_mirror(peer: MemoryPeer) -> None:
    structured = peer.result("tools/call", {"name": "structured", "arguments": {"text": "abc"}})
    assert structured["structuredContent"] == {"text": "abc", "length": 3}
    assert structured["content"] == [{"type": "text", "text": "3 bytes"}]
    array = peer.result("tools/call", {"name": "array_output", "arguments": {}})
    assert array["structuredContent"] == [1, 2, 3]
    assert array["content"] == [{"type": "text", "text": "[1,2,3]"}]


def test_an_unknown_tool_is_invalid_params(peer: MemoryPeer) -> None:
    error = peer.error("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert error["code"] == jsonrpc.INVALID_PARAMS
    assert error["message"] == "Unknown tool: no_such_tool"
    assert peer.error("tools/call", {"arguments": {}})["code"] == jsonrpc.INVALID_PARAMS
    assert peer.error("tools/call", {"name": "echo", "arguments": [1]})["code"] == jsonrpc.INVALID_PARAMS


def test_arguments_that_do_not_fit_give_an_error_result(peer: MemoryPeer) -> None:
    cases = {
        "the argument 'b' is missing": {"a": 1},
        "the argument 'b' must be of type integer": {"a": 1, "b": "2"},
        "the argument 'c' is unknown": {"a": 1, "b": 2, "c": 3},
    }
    for problem, arguments in cases.items():
        result = peer.result("tools/call", {"name": "add", "arguments": arguments})
        assert result["isError"] is True
        assert result["content"][0]["text"] == f"Invalid arguments for the tool add: {problem}."
    bool_for_int = peer.result("tools/call", {"name": "add", "arguments": {"a": True, "b": 2}})
    assert bool_for_int["isError"] is True


def test_schema_inference_covers_lists_optionals_and_defaults() -> None:
    server = Server("infer", "1")

    @server.tool()
    def search(
        ctx: Context,
        names: list[str],
        limit: int | None = None,
        ratio: float = 0.5,
        options: dict[str, Any] | None = None,
        anything: Any = "x",
    ) -> str:
        """Search for names."""
        return f"{names} {limit} {ratio} {options} {anything}"

    for p in serve(server):
        tool = p.result("tools/list")["tools"][0]
        assert tool["description"] == "Search for names."
        assert tool["inputSchema"] == {
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "integer"},
                "ratio": {"type": "number"},
                "options": {"type": "object"},
                "anything": {},
            },
            "required": ["names"],
            "additionalProperties": False,
        }
        assert p.tool_text("search", {"names": ["a"], "limit": None, "ratio": 1}) == "['a'] None 1 None x"
        assert p.tool_text("search", {"names": [], "anything": [1]}) == "[] None 0.5 None [1]"
        refused = p.result("tools/call", {"name": "search", "arguments": {"names": None}})
        assert refused["isError"] is True
        assert "'names' must be of type array" in refused["content"][0]["text"]


def test_return_values_become_results() -> None:
    server = Server("returns", "1")
    server.tool(name="text")(lambda ctx: "plain")
    server.tool(name="number")(lambda ctx: 42)
    server.tool(name="nothing")(lambda ctx: None)
    server.tool(name="as_is")(lambda ctx: {"content": [{"type": "text", "text": "mine"}], "isError": False})
    server.tool(name="mapping")(lambda ctx: {"a": 1})

    @server.tool()
    def failing(ctx: Context) -> str:
        raise ToolError("the disk is full; free some space and call again")

    @server.tool()
    def broken(ctx: Context) -> str:
        raise RuntimeError("a bug")

    for p in serve(server):
        assert p.result("tools/call", {"name": "text"})["content"] == [{"type": "text", "text": "plain"}]
        number = p.result("tools/call", {"name": "number"})
        assert number["structuredContent"] == 42 and number["content"][0]["text"] == "42"
        assert p.result("tools/call", {"name": "nothing"})["content"] == []
        assert p.result("tools/call", {"name": "as_is"})["content"][0]["text"] == "mine"
        assert p.result("tools/call", {"name": "mapping"})["structuredContent"] == {"a": 1}
        failed = p.result("tools/call", {"name": "failing"})
        assert failed["isError"] is True
        assert failed["content"][0]["text"] == "the disk is full; free some space and call again"
        error = p.error("tools/call", {"name": "broken"})
        assert error == {"code": jsonrpc.INTERNAL_ERROR, "message": "Internal error"}


def test_prompts_resources_and_completions_answer(peer: MemoryPeer) -> None:
    greet = peer.result("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
    assert greet["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello, Ada."}}]
    assert greet["description"] == "A greeting"
    assert peer.error("prompts/get", {"name": "greet"})["code"] == jsonrpc.INVALID_PARAMS
    assert peer.error("prompts/get", {"name": "nope"})["code"] == jsonrpc.INVALID_PARAMS
    assert (
        peer.error("prompts/get", {"name": "greet", "arguments": {"name": 5}})["code"]
        == jsonrpc.INVALID_PARAMS
    )
    read = peer.result("resources/read", {"uri": NOTES_URI})
    assert read["contents"] == [{"uri": NOTES_URI, "mimeType": "text/plain", "text": NOTES_TEXT}]
    blob = peer.result("resources/read", {"uri": "file:///fixture/blob/300"})["contents"][0]
    assert blob["mimeType"] == "application/octet-stream" and len(blob["blob"]) == 400
    completion = peer.result(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}},
    )
    assert completion["completion"] == {"values": ["alpha", "beta"], "total": 2, "hasMore": False}


def test_reading_an_unknown_resource_is_invalid_params_with_the_uri(peer: MemoryPeer) -> None:
    for uri in ("file:///fixture/missing.txt", "file:///fixture/blob/many"):
        error = peer.error("resources/read", {"uri": uri})
        assert error["code"] == jsonrpc.INVALID_PARAMS
        assert error["data"] == {"uri": uri}


# ------------------------------------------------------------------ progress and logs


def test_progress_goes_to_the_token_before_the_result(peer: MemoryPeer) -> None:
    call = peer.request("tools/call", {"name": "progress", "arguments": {"count": 3}}, progress="p1")
    frames = [peer.next_frame() for _ in range(4)]
    assert [f.get("method") for f in frames[:3]] == ["notifications/progress"] * 3
    for step, frame in enumerate(frames[:3], start=1):
        assert frame["params"] == {
            "progressToken": "p1",
            "progress": step,
            "total": 3,
            "message": f"Step {step} of 3",
        }
    assert frames[3]["id"] == call
    assert frames[3]["result"]["content"][0]["text"] == "sent 3 progress notifications"


def test_no_progress_without_a_token(peer: MemoryPeer) -> None:
    peer.tool_text("progress", {"count": 3})
    assert not [f for f in peer.seen if f.get("method") == "notifications/progress"]


def test_progress_token_zero_is_a_token(peer: MemoryPeer) -> None:
    peer.tool_text("progress", {"count": 2}, progress=0)
    assert [f["params"]["progressToken"] for f in peer.seen if "method" in f] == [0, 0]


@pytest.mark.parametrize(
    ("level", "expected"),
    [(None, []), ("debug", ["debug", "info", "warning", "error"]), ("warning", ["warning", "error"])],
)
def test_log_messages_follow_the_level_of_the_request(
    peer: MemoryPeer, level: str | None, expected: list[str]
) -> None:
    assert peer.tool_text("log", log_level=level) == "logged 4 messages"
    logs = [f["params"] for f in peer.seen if f.get("method") == "notifications/message"]
    assert [m["level"] for m in logs] == expected
    for message in logs:
        assert message == {
            "level": message["level"],
            "logger": "fixture",
            "data": f"a message at the level {message['level']}",
        }


# ------------------------------------------------------------------ input rounds


def test_a_form_round_then_the_answer(peer: MemoryPeer) -> None:
    first = peer.result("tools/call", {"name": "ask_form"}, capabilities=ALL_INPUTS)
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first and "requestState" not in first
    request = first["inputRequests"]["profile"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Tell us about you."
    assert request["params"]["requestedSchema"]["required"] == ["name"]
    validate_modern(first, "InputRequiredResult")
    answer = {"action": "accept", "content": {"name": "Ada", "age": 36, "subscribe": True, "color": "green"}}
    final = peer.result(
        "tools/call", {"name": "ask_form", "inputResponses": {"profile": answer}}, capabilities=ALL_INPUTS
    )
    assert final["content"][0]["text"] == (
        'form: accept {"name":"Ada","age":36,"subscribe":true,"color":"green"}'
    )
    declined = peer.result(
        "tools/call",
        {"name": "ask_form", "inputResponses": {"profile": {"action": "decline"}}},
        capabilities=ALL_INPUTS,
    )
    assert declined["content"][0]["text"] == "form: decline"


def test_a_state_round_trip_over_three_rounds(peer: MemoryPeer) -> None:
    params: dict[str, Any] = {"name": "ask_url_twice", "arguments": {}}
    first = peer.result("tools/call", params, capabilities=ALL_INPUTS)
    assert first["inputRequests"]["auth"]["params"] == {
        "mode": "url",
        "message": "Sign in to continue.",
        "url": "https://example.com/auth",
    }
    state_1 = first["requestState"]
    accept = {"auth": {"action": "accept"}}
    second = peer.result(
        "tools/call", {**params, "inputResponses": accept, "requestState": state_1}, capabilities=ALL_INPUTS
    )
    assert second["resultType"] == "input_required" and second["requestState"] != state_1
    third = peer.result(
        "tools/call",
        {**params, "inputResponses": accept, "requestState": second["requestState"]},
        capabilities=ALL_INPUTS,
    )
    assert third["content"][0]["text"] == "url twice: accept"


def test_a_tampered_or_foreign_request_state_is_refused(peer: MemoryPeer) -> None:
    params: dict[str, Any] = {"name": "ask_url_twice", "arguments": {}}
    token = peer.result("tools/call", params, capabilities=ALL_INPUTS)["requestState"]
    flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    other_server = StateSigner().sign(1)  # well formed, signed with another key
    other_arguments = {"name": "ask_url_twice", "arguments": {"complete": True}, "requestState": token}
    other_tool = {"name": "ask_form", "requestState": token}
    for bad in (
        {**params, "requestState": flipped},
        {**params, "requestState": other_server},
        {**params, "requestState": 7},
        other_arguments,
        other_tool,
    ):
        error = peer.error("tools/call", bad, capabilities=ALL_INPUTS)
        assert error == {"code": jsonrpc.INVALID_PARAMS, "message": "the requestState is not valid"}


def test_a_prompt_asks_for_input_too(peer: MemoryPeer) -> None:
    first = peer.result("prompts/get", {"name": "ask_name"}, capabilities=ALL_INPUTS)
    assert first["inputRequests"]["name"]["params"]["message"] == "Your name?"
    answered = peer.result(
        "prompts/get",
        {"name": "ask_name", "inputResponses": {"name": {"action": "accept", "content": {"name": "Bo"}}}},
        capabilities=ALL_INPUTS,
    )
    assert answered["messages"][0]["content"]["text"] == "Hello, Bo."


def test_sampling_roots_and_several_inputs_in_one_round(peer: MemoryPeer) -> None:
    sample = peer.result("tools/call", {"name": "sample"}, capabilities=ALL_INPUTS)
    assert sample["inputRequests"]["model"] == {
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello."}}],
            "maxTokens": 50,
        },
    }
    answer = {"model": {"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"}}
    done = peer.result("tools/call", {"name": "sample", "inputResponses": answer}, capabilities=ALL_INPUTS)
    assert done["content"][0]["text"] == "model: Hello"
    roots = {"roots": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}}
    listed = peer.result(
        "tools/call", {"name": "list_roots", "inputResponses": roots}, capabilities=ALL_INPUTS
    )
    assert listed["content"][0]["text"] == "roots: file:///a\nfile:///b"
    multi = peer.result("tools/call", {"name": "multi"}, capabilities=ALL_INPUTS)
    assert sorted(multi["inputRequests"]) == ["name", "roots"]
    many = peer.result("tools/call", {"name": "many_inputs"}, capabilities={"roots": {}})
    assert len(many["inputRequests"]) == 17


@pytest.mark.parametrize(
    ("tool", "capabilities", "required"),
    [
        ("ask_form", {}, {"elicitation": {"form": {}}}),
        ("ask_form", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("ask_url", {"elicitation": {}}, {"elicitation": {"url": {}}}),
        ("ask_url", {"elicitation": {"form": {}}}, {"elicitation": {"url": {}}}),
        ("sample", {"roots": {}}, {"sampling": {}}),
        ("sample_tools", {"sampling": {}}, {"sampling": {"tools": {}}}),
        ("list_roots", {"elicitation": {}}, {"roots": {}}),
        ("multi", {}, {"elicitation": {"form": {}}, "roots": {}}),
    ],
)
def test_an_input_kind_the_client_did_not_declare_is_refused_with_32021(
    peer: MemoryPeer, tool: str, capabilities: dict[str, Any], required: dict[str, Any]
) -> None:
    error = peer.error("tools/call", {"name": tool}, capabilities=capabilities)
    assert error["code"] == jsonrpc.MISSING_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": required}


def test_an_empty_elicitation_capability_admits_forms() -> None:
    assert (
        missing_capabilities(
            {"k": elicit_form("m", {"type": "object", "properties": {}})}, {"elicitation": {}}
        )
        == {}
    )


def test_sampling_with_tools_reaches_a_client_that_declared_them(peer: MemoryPeer) -> None:
    result = peer.result("tools/call", {"name": "sample_tools"}, capabilities={"sampling": {"tools": {}}})
    assert result["inputRequests"]["model"]["params"]["tools"][0]["name"] == "lookup"


# ------------------------------------------------------------------ listen


def listen(p: Peer, notifications: dict[str, Any], **options: Any) -> tuple[Any, dict[str, Any]]:
    listen_id = p.request("subscriptions/listen", {"notifications": notifications}, **options)
    ack = p.wait_frame(lambda f: f.get("method") == protocol.LISTEN_ACKNOWLEDGED)
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: listen_id}
    return listen_id, ack["params"]["notifications"]


def test_listen_is_acknowledged_first_with_what_the_server_honours() -> None:
    server = Server("tools-only", "1")
    server.tool(name="t")(lambda ctx: "t")
    for p in serve(server):
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
            "resourceSubscriptions": ["file:///x"],
        }
        listen_id = p.request("subscriptions/listen", {"notifications": wanted})
        ack = p.next_frame()
        assert ack["method"] == protocol.LISTEN_ACKNOWLEDGED
        assert ack["params"] == {
            "_meta": {SUBSCRIPTION_ID: listen_id},
            "notifications": {"toolsListChanged": True},
        }


def test_list_changes_reach_the_stream_before_the_call_result(peer: MemoryPeer) -> None:
    listen_id, honored = listen(peer, {"toolsListChanged": True, "promptsListChanged": True})
    assert honored == {"toolsListChanged": True, "promptsListChanged": True}
    for enabled in (False, True, False, True):
        call = peer.request("tools/call", {"name": "toggle", "arguments": {"enabled": enabled}})
        change = peer.next_frame()
        assert change == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION_ID: listen_id}},
        }
        response = peer.next_frame()
        assert response["id"] == call
        assert (
            response["result"]["content"][0]["text"]
            == f"tool toggled: {'enabled' if enabled else 'disabled'}"
        )
    call = peer.request("tools/call", {"name": "toggle", "arguments": {"enabled": True}})
    assert peer.next_frame()["id"] == call  # no change, no event
    assert peer.tool_text("toggle", {"enabled": False, "target": "prompt"}) == "prompt toggled: disabled"
    assert peer.seen[-2]["method"] == "notifications/prompts/list_changed"
    assert "toggled" not in [p["name"] for p in peer.result("prompts/list")["prompts"]]


def test_resource_updates_reach_only_the_streams_that_subscribed(peer: MemoryPeer) -> None:
    notes_stream, honored = listen(peer, {"resourceSubscriptions": [NOTES_URI]})
    assert honored == {"resourceSubscriptions": [NOTES_URI]}
    dir_stream, _ = listen(peer, {"resourceSubscriptions": ["file:///dir"]})
    peer.tool_text("touch", {"uri": NOTES_URI})
    updates = [f for f in peer.seen if f.get("method") == "notifications/resources/updated"]
    assert updates == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"_meta": {SUBSCRIPTION_ID: notes_stream}, "uri": NOTES_URI},
        }
    ]
    peer.tool_text("touch", {"uri": "file:///dir/sub/file.txt"})
    last_update = [f for f in peer.seen if f.get("method") == "notifications/resources/updated"][-1]
    assert last_update["params"]["_meta"] == {SUBSCRIPTION_ID: dir_stream}
    peer.tool_text("touch", {"uri": "file:///directory"})
    assert len([f for f in peer.seen if f.get("method") == "notifications/resources/updated"]) == 2


def test_a_canceled_stream_gets_no_response_and_no_more_events(peer: MemoryPeer) -> None:
    listen_id, _ = listen(peer, {"toolsListChanged": True})
    peer.cancel(listen_id)
    peer.tool_text("toggle", {"enabled": False})
    peer.tool_text("toggle", {"enabled": True})
    assert [f for f in peer.seen if f.get("method") == "notifications/tools/list_changed"] == []
    assert not [f for f in peer.seen if f.get("id") == listen_id and "method" not in f]


def test_the_server_ends_its_streams_with_a_result_and_a_cancellation(peer: MemoryPeer) -> None:
    first, _ = listen(peer, {"toolsListChanged": True})
    second, _ = listen(peer, {"resourceSubscriptions": [NOTES_URI]}, id="listen-2")
    peer.server.end_listen_streams()
    frames = [peer.next_frame() for _ in range(4)]
    for listen_id in (first, second):
        ended = [
            f for f in frames if f.get("id") == listen_id or f.get("params", {}).get("requestId") == listen_id
        ]
        result, cancelled = ended
        assert result["result"]["resultType"] == "complete"
        assert result["result"]["_meta"][SUBSCRIPTION_ID] == listen_id
        validate_modern(result["result"], "SubscriptionsListenResult")
        assert cancelled["method"] == "notifications/cancelled" and cancelled["params"]["reason"]
    peer.tool_text("toggle", {"enabled": False})
    assert not [f for f in peer.seen if f.get("method") == "notifications/tools/list_changed"]


def test_an_invalid_filter_is_invalid_params(peer: MemoryPeer) -> None:
    filters: list[Any] = [None, [], {"toolsListChanged": "yes"}, {"resourceSubscriptions": [1]}]
    for notifications in filters:
        error = peer.error("subscriptions/listen", {"notifications": notifications})
        assert error["code"] == jsonrpc.INVALID_PARAMS


def test_a_tool_added_at_run_time_is_announced(peer: MemoryPeer) -> None:
    listen_id, _ = listen(peer, {"toolsListChanged": True})
    peer.server.add_tool(lambda ctx: "new", name="late")
    change = peer.next_frame()
    assert change["method"] == "notifications/tools/list_changed"
    assert peer.tool_text("late") == "new"
    assert peer.server.remove_tool("late") is True
    assert peer.next_frame()["method"] == "notifications/tools/list_changed"
    assert peer.server.remove_tool("late") is False
    assert peer.error("tools/call", {"name": "late"})["code"] == jsonrpc.INVALID_PARAMS


# ------------------------------------------------------------------ cancellation and limits


def test_a_canceled_call_gets_no_response_and_its_handler_sees_the_cancel() -> None:
    started, stopped = threading.Event(), threading.Event()
    server = Server("cancel", "1")

    @server.tool()
    def wait(ctx: Context) -> str:
        started.set()
        ctx.cancel.wait(WAIT)
        if ctx.cancel.cancelled:
            stopped.set()
        ctx.progress(1)  # dropped: the request was canceled
        ctx.log("error", "dropped")
        return "late"

    for p in serve(server):
        call = p.request("tools/call", {"name": "wait"}, progress="t", log_level="debug")
        assert started.wait(WAIT)
        p.cancel(call)
        assert stopped.wait(WAIT)
        p.cancel(987654)  # unknown: ignored
        assert p.result("server/discover")["resultType"] == "complete"
        assert not [f for f in p.seen + p.quiet() if f.get("id") == call or "method" in f]


def test_the_fixture_slow_tool_stops_at_a_cancellation(peer: MemoryPeer) -> None:
    call = peer.request("tools/call", {"name": "slow", "arguments": {"ms": 60000}})
    peer.cancel(call)
    assert peer.tool_text("echo", {"text": "after"}) == "after"
    assert not [f for f in peer.seen if f.get("id") == call]


def test_requests_over_the_limit_are_refused_at_once() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)
    server = Server("limit", "1", max_in_flight=2)

    @server.tool()
    def hold(ctx: Context) -> str:
        entered.release()
        release.wait(WAIT)
        return "released"

    for p in serve(server):
        first = p.request("tools/call", {"name": "hold"})
        second = p.request("tools/call", {"name": "hold"})
        assert entered.acquire(timeout=WAIT) and entered.acquire(timeout=WAIT)
        error = p.error("tools/call", {"name": "hold"})
        assert error == {"code": jsonrpc.INTERNAL_ERROR, "message": "Too many requests in flight"}
        release.set()
        assert p.wait_response(first)["result"]["content"][0]["text"] == "released"
        assert p.wait_response(second)["result"]["content"][0]["text"] == "released"


def test_an_id_in_flight_cannot_be_reused() -> None:
    release = threading.Event()
    server = Server("ids", "1")
    server.tool(name="hold")(lambda ctx: "done" if release.wait(WAIT) else "timeout")
    for p in serve(server):
        p.request("tools/call", {"name": "hold"}, id=7)
        p.request("tools/call", {"name": "hold"}, id=7)
        refusal = p.next_frame()
        release.set()
        assert refusal["id"] == 7 and refusal["error"]["code"] == jsonrpc.INVALID_REQUEST
        assert p.next_frame()["result"]["content"][0]["text"] == "done"


def test_closing_cancels_what_does_not_finish_within_the_grace() -> None:
    seen_cancel = threading.Event()
    server = Server("grace", "1", shutdown_grace=0.2)

    @server.tool()
    def stubborn(ctx: Context) -> str:
        if ctx.cancel.wait(WAIT):
            seen_cancel.set()
        return "late"

    p = MemoryPeer(server)
    call = p.request("tools/call", {"name": "stubborn"})
    bounded(p.close, "the close", 5.0)  # grace 0.2 s, twice, plus the joins
    assert seen_cancel.is_set()
    assert not [f for f in p.seen + p.quiet(0.05) if f.get("id") == call]
    p.assert_valid()


def test_a_started_connection_shuts_down_by_itself_when_the_link_closes() -> None:
    server = build()
    frames: queue.Queue[Message] = queue.Queue()
    client_transport, server_transport = memory_pair()
    client_transport.start(frames.put, lambda error: None, lambda error: None)
    connection = server.start(server_transport)
    params = {"name": "echo", "arguments": {"text": "x"}, "_meta": meta()}
    client_transport.send(jsonrpc.Request(1, "tools/call", params))
    assert isinstance(frames.get(timeout=WAIT), jsonrpc.Response)
    assert [t for t in threading.enumerate() if t.name.startswith("mcpbridge-server")]
    client_transport.close()
    assert connection.wait_shutdown(WAIT)
    assert connection.closed


# ------------------------------------------------------------------ over real pipes


def test_the_fixture_serves_over_stdio(stdio: StdioPeer) -> None:
    assert stdio.result("server/discover")["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == (
        "bridge-fixture-server"
    )
    assert stdio.tool_text("add", {"a": 40, "b": 2}) == "42"
    call = stdio.request("tools/call", {"name": "progress", "arguments": {"count": 2, "ms": 1}}, progress=5)
    response = stdio.wait_response(call)
    assert [f["params"]["progress"] for f in stdio.seen if f.get("method") == "notifications/progress"] == [
        1,
        2,
    ]
    assert stdio.seen.index(response) == len(stdio.seen) - 1
    for line in stdio.raw:
        assert line.endswith(b"\n") and line.count(b"\n") == 1


def test_over_stdio_an_event_is_written_before_the_call_result(stdio: StdioPeer) -> None:
    listen_id, _ = listen(stdio, {"toolsListChanged": True})
    for i in range(20):
        call = stdio.request("tools/call", {"name": "toggle", "arguments": {"enabled": i % 2 == 1}})
        first = stdio.wait_frame(partial(_is_event_or_response, call))
        assert first.get("method") == "notifications/tools/list_changed", f"round {i}"
        assert first["params"]["_meta"] == {SUBSCRIPTION_ID: listen_id}
        stdio.wait_response(call)


def test_over_stdio_a_canceled_call_gets_no_response(stdio: StdioPeer) -> None:
    call = stdio.request("tools/call", {"name": "slow", "arguments": {"ms": 60000}})
    stdio.cancel(call)
    assert stdio.tool_text("echo", {"text": "after"}) == "after"
    stdio.close_stdin()
    assert stdio.wait_exit() == 0
    assert not [f for f in stdio.seen + stdio.quiet(0) if f.get("id") == call]


def test_over_stdio_bad_lines_get_json_rpc_errors(stdio: StdioPeer) -> None:
    stdio.write_bytes(b"{not json\n")
    assert stdio.next_frame() == {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
    stdio.write_bytes(b'{"jsonrpc":"1.0","id":4,"method":"tools/list"}\n')
    error = stdio.next_frame()
    assert error["id"] == 4 and error["error"]["code"] == jsonrpc.INVALID_REQUEST
    stdio.write_bytes(b'{"jsonrpc":"2.0","id":5,"result":{}}\n')  # a response: nothing to answer
    stdio.write_bytes(b"\n")
    assert stdio.tool_text("echo", {"text": "still here"}) == "still here"


def exchange_on_pipes(server: Server, lines: list[bytes]) -> list[dict[str, Any]]:
    """Serve ``lines`` on in-process pipes with the real stdio transport; one answer per line."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    with open(in_read, "rb") as stdin, open(out_write, "wb") as stdout, open(in_write, "wb") as feed:
        with open(out_read, "rb") as output:
            transport = StdioServerTransport(
                stdin, stdout, max_line_bytes=server.max_line_bytes, max_depth=server.max_depth
            )
            connection = server.start(transport)
            feed.write(b"\n".join(lines) + b"\n")
            feed.flush()
            frames = [json.loads(read_line(output, f"the answer to line {n}")) for n in range(len(lines))]
            feed.close()
            assert connection.wait_shutdown(WAIT)
    for frame in frames:
        check_frame(frame, "tools/call" if "result" in frame else None)
    return frames


def test_too_long_and_too_deep_lines_get_invalid_request_with_their_id() -> None:
    server = Server("limits", "1", max_line_bytes=200, max_depth=5)
    text = b'"text":"' + b"x" * 300 + b'"'
    frames = exchange_on_pipes(
        server,
        [
            b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{' + text + b"}}",
            b'{"jsonrpc":"2.0","method":"tools/call","params":{' + text + b'},"id":"tail"}',
            # The id after the method: the head still names it (an id inside params would not).
            b'{"jsonrpc":"2.0","method":"tools/call","id":13,"params":{' + text + b"}}",
            b'{"jsonrpc":"2.0","method":"x","params":{"a":[[[[[1]]]]]},"id":12}',
            b"\xff\xfe",
        ],
    )
    assert [(f.get("id"), f["error"]["code"]) for f in frames] == [
        (11, jsonrpc.INVALID_REQUEST),
        ("tail", jsonrpc.INVALID_REQUEST),
        (13, jsonrpc.INVALID_REQUEST),
        (12, jsonrpc.INVALID_REQUEST),
        (None, jsonrpc.PARSE_ERROR),
    ]
    assert frames[0]["error"]["message"] == "Invalid Request: the line is too long (limit: 200 bytes)"
    assert frames[3]["error"]["message"] == "Invalid Request: too deep (limit: 5 levels)"


def test_a_message_with_a_method_member_is_a_request_even_with_a_result(stdio: StdioPeer) -> None:
    stdio.write_bytes(b'{"jsonrpc":"2.0","id":21,"method":null,"result":{}}\n')
    stdio.write_bytes(b'{"jsonrpc":"2.0","id":22,"method":"ping","result":{}}\n')
    for request_id in (21, 22):
        assert stdio.wait_response(request_id)["error"]["code"] == jsonrpc.INVALID_REQUEST


def test_refused_requests_give_one_log_line_and_then_a_count() -> None:
    p = StdioPeer()
    try:
        call = {"name": "slow", "arguments": {"ms": 60_000}, "_meta": meta()}
        same = json.dumps({"jsonrpc": "2.0", "id": "held", "method": "tools/call", "params": call}).encode()
        p.write_bytes(b"\n".join([same] * 101) + b"\n")
        for _ in range(100):
            refused = p.wait_frame(lambda f: f.get("id") == "held" and "error" in f)
            assert refused["error"]["code"] == jsonrpc.INVALID_REQUEST
        p.cancel("held")
        p.close_stdin()
        assert p.wait_exit() == 0
    finally:
        p.stop()
    lines = [line for line in p.stderr.decode().splitlines() if "the id is in use" in line]
    assert len(lines) == 2, lines
    assert lines[0].endswith(
        "rejected request 'held' (tools/call): Invalid Request: the id is in use by a request in flight"
    )
    assert lines[1].endswith("since the last such line: 99 more")


def test_a_result_that_is_not_json_becomes_an_internal_error() -> None:
    server = Server("not-json", "1")
    server.tool(name="odd")(lambda ctx: {"content": [], "structuredContent": {1, 2}})
    server.tool(name="fine")(lambda ctx: "fine")
    lines = [
        jsonrpc.dumps(jsonrpc.to_obj(jsonrpc.Request(i, "tools/call", {"name": name, "_meta": meta()})))
        for i, name in ((1, "odd"), (2, "fine"))
    ]
    first, second = sorted(exchange_on_pipes(server, lines), key=lambda f: int(f["id"]))  # run concurrently
    assert first == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": jsonrpc.INTERNAL_ERROR, "message": "Internal error"},
    }
    assert second["result"]["content"][0]["text"] == "fine"


def test_over_stdio_end_of_input_ends_streams_and_lets_calls_finish_within_the_grace(
    stdio: StdioPeer,
) -> None:
    listen_id, _ = listen(stdio, {"toolsListChanged": True})
    call = stdio.request("tools/call", {"name": "slow", "arguments": {"ms": 300}})
    stdio.close_stdin()
    assert stdio.wait_exit() == 0
    frames = stdio.seen + stdio.quiet(0)
    ended = next(f for f in frames if f.get("id") == listen_id and "result" in f)
    assert ended["result"]["_meta"][SUBSCRIPTION_ID] == listen_id
    assert next(f for f in frames if f.get("id") == call)["result"]["content"][0]["text"] == "slept 300 ms"


def test_the_fixture_shutdown_tool_ends_streams_then_exits() -> None:
    p = StdioPeer()
    try:
        listen_id, _ = listen(p, {"toolsListChanged": True})
        assert p.tool_text("shutdown", {"after_ms": 100}).startswith("the server ended its listen streams")
        assert p.wait_exit() == 0
        methods = [f.get("method") for f in p.seen]
        assert "notifications/cancelled" in methods
        assert any(f.get("id") == listen_id and "result" in f for f in p.seen)
    finally:
        p.stop()
    p.assert_valid()


def test_the_fixture_crash_tool_exits_with_code_3() -> None:
    p = StdioPeer()
    try:
        p.request("tools/call", {"name": "crash"})
        assert p.wait_exit() == 3
    finally:
        p.stop()


def test_the_fixture_with_close_stdout_keeps_running_until_its_input_ends() -> None:
    p = StdioPeer("--close-stdout")
    try:
        with pytest.raises(EOFError):
            p.next_frame()
        assert p.proc.poll() is None
        p.close_stdin()
        assert p.wait_exit() == 0
    finally:
        p.stop()


def _is_event_or_response(request_id: Any, frame: dict[str, Any]) -> bool:
    return frame.get("id") == request_id or "method" in frame


def _all(p: Peer, method: str, member: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        result = p.result(method, {"cursor": cursor} if cursor else {})
        items += result[member]
        cursor = result.get("nextCursor")
        if cursor is None:
            return items
