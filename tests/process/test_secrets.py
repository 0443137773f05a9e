"""Secrets never reach stderr or an error: header values, the URL, upstream error data, client answers.

Each test puts unique markers where a secret lives and runs the real executable at
``--log-level debug``:

* the values of ``--header-env`` (a static ``Authorization`` and an ``X-Api-Key``) and
  of a literal ``--header``, and the path and the query of the upstream URL, against a
  tiny loopback HTTP server that answers errors of many kinds (the server records what
  it got, so the test knows that the secrets were in use);
* the ``data`` of an upstream JSON-RPC error, and the content of tool calls;
* the answers of the client to input requests (form content, a sampling text, roots),
  also answers that the bridge refuses.

A marker must not be on stderr, nor in the message or ``data.detail`` of any error the
bridge writes. (An upstream JSON-RPC error goes to the client unchanged, ``data`` and
all, by design; it carries no secret of the bridge.) At the end of the session a final
scan looks for every marker in each stderr text that the harness captured
(``harness.CAPTURED``).
"""

from __future__ import annotations

import http.server
import json
import re
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness import CAPTURED, WAIT, Bridge, bridge_command, fixture_command, text_of
from schema import validate_legacy_frame

BAD_UPSTREAM = Path(__file__).resolve().parents[1] / "peers" / "bad_upstream.py"

HEADER_SECRET = "MCPB-SECRET-header-3f9a"
API_KEY_SECRET = "MCPB-SECRET-apikey-81c2"
LITERAL_SECRET = "MCPB-SECRET-literal-0d4e"
PATH_SECRET = "MCPB-SECRET-path-5b17"
QUERY_SECRET = "MCPB-SECRET-query-c6e0"
DATA_SECRET = "MCPB-SECRET-data-77a1"
ANSWER_SECRET = "MCPB-SECRET-answer-e2b8"
CONTENT_SECRET = "MCPB-SECRET-content-9c03"
#: Every marker of this file, and the content markers of other files, for the final scan.
MARKERS = (
    HEADER_SECRET,
    API_KEY_SECRET,
    LITERAL_SECRET,
    PATH_SECRET,
    QUERY_SECRET,
    DATA_SECRET,
    ANSWER_SECRET,
    CONTENT_SECRET,
    "FUZZ-CONTENT-5e1a",  # test_fuzz_bridge.py
    "CONTENT-MARKER-41c9",  # test_bridge_process.py
    "MCPB-SECRET-dump-",  # test_thread_dump.py
)
BRIDGE_SECRETS = (HEADER_SECRET, API_KEY_SECRET, LITERAL_SECRET, PATH_SECRET, QUERY_SECRET)

#: How the loopback server answers each POST, one initialize each.
HTTP_MODES = (
    "status-500",
    "status-404",
    "status-401",
    "status-403",
    "status-429",
    "rpc-error",
    "invalid-json",
    "sse-error",
    "sse-garbage",
    "drop",
    "serve",
)


def scan(text: str, markers: tuple[str, ...] = MARKERS) -> list[str]:
    return [marker for marker in markers if marker in text]


@pytest.fixture(scope="session")
def final_scan() -> Iterator[None]:
    """At the end of the session: no marker in any stderr text the harness captured."""
    yield
    found = sorted({marker for text in CAPTURED for marker in scan(text)})
    assert not found, f"markers on stderr somewhere in the suite: {found}"


def bridge_errors(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The error objects that the bridge wrote itself (they carry data.cause)."""
    out = []
    for frame in frames:
        error = frame.get("error")
        if isinstance(error, dict) and isinstance(error.get("data"), dict) and "cause" in error["data"]:
            out.append(error)
    return out


def assert_clean(bridge: Bridge, frames: list[dict[str, Any]], markers: tuple[str, ...]) -> None:
    assert not scan(bridge.stderr_text, markers), bridge.stderr_text
    for frame in frames:
        error = frame.get("error")
        if isinstance(error, dict):
            assert not scan(error.get("message", ""), markers), error
    for error in bridge_errors(frames):
        assert not scan(json.dumps(error), markers), error
    for raw in bridge.raw_lines:
        validate_legacy_frame(json.loads(raw))


# --------------------------------------------------------------------------- the URL form


class Upstream(http.server.BaseHTTPRequestHandler):
    """The loopback upstream: answers each POST as ``server.mode`` says."""

    protocol_version = "HTTP/1.1"
    server: LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(("GET", self.path, dict(self.headers)))
        self._send(405, b"", "text/plain")

    do_DELETE = do_GET

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.server.seen.append(("POST", self.path, dict(self.headers)))
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        request_id = request.get("id") if isinstance(request, dict) else None
        method = request.get("method") if isinstance(request, dict) else None
        mode = self.server.mode
        error = {"code": -32603, "message": "the upstream failed", "data": {"token": DATA_SECRET}}
        if mode.startswith("status-"):
            headers = {"www-authenticate": 'Bearer error="invalid_token"'} if mode == "status-401" else {}
            self._send(int(mode[7:]), f"refused: {DATA_SECRET}".encode(), "text/plain", headers)
        elif mode == "rpc-error":
            self._send(
                200,
                json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode(),
                "application/json",
            )
        elif mode == "invalid-json":
            self._send(
                200,
                b'{"jsonrpc":"2.0","id":'
                + json.dumps(request_id).encode()
                + b',"result":'
                + DATA_SECRET.encode(),
                "application/json",
            )
        elif mode == "sse-error":
            event = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error})
            self._send(200, f"event: message\ndata: {event}\n\n".encode(), "text/event-stream")
        elif mode == "sse-garbage":
            self._send(200, f"data: {DATA_SECRET}\n\ndata: {{\n\n".encode(), "text/event-stream")
        elif mode == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif method == "initialize":
            # A server of 2026-07-28 only, as the revision says it refuses initialize.
            refusal = {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-07-28"]},
            }
            self._send(
                400,
                json.dumps({"jsonrpc": "2.0", "id": request_id, "error": refusal}).encode(),
                "application/json",
            )
        elif method == "server/discover":
            result: dict[str, Any] = {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "loopback", "version": "0"}},
            }
            self._send(
                200,
                json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode(),
                "application/json",
            )
        elif method == "tools/call" and request["params"].get("name") == "fail":
            self._send(
                200,
                json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode(),
                "application/json",
            )
        elif method == "tools/call":
            text = json.dumps(request["params"].get("arguments"))
            result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
            self._send(
                200,
                json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode(),
                "application/json",
            )
        elif request_id is None:
            self._send(202, b"", "text/plain")
        else:
            self._send(404, b"", "text/plain")

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


class LoopbackServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Upstream)
        self.mode = "serve"
        self.seen: list[tuple[Any, ...]] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a connection that the bridge reset or that "drop" closed


@contextmanager
def loopback() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    thread = threading.Thread(target=server.serve_forever, name="test-secrets-http", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


@pytest.mark.parametrize("protocol", ["auto", "2026-07-28"])
def test_header_values_and_the_url_never_reach_stderr_or_an_error(final_scan: None, protocol: str) -> None:
    with loopback() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp/{PATH_SECRET}?key={QUERY_SECRET}"
        command = bridge_command(
            "--log-level", "debug",
            "--protocol", protocol,
            "--discover-timeout", "5",
            "--header-env", "Authorization=MCPB_TEST_AUTHORIZATION",
            "--header-env", "X-Api-Key=MCPB_TEST_API_KEY",
            "--header", f"X-Literal:{LITERAL_SECRET}",
            url,
        )  # fmt: skip
        env = {"MCPB_TEST_AUTHORIZATION": f"Bearer {HEADER_SECRET}", "MCPB_TEST_API_KEY": API_KEY_SECRET}
        with Bridge(command, env=env) as bridge:
            responses = []
            for mode in HTTP_MODES:
                server.mode = mode
                response = bridge.initialize()
                responses.append(response)
                assert ("result" in response) == (mode == "serve"), (mode, response)
            # Served: a tool call's content and an upstream error's data stay out of the log.
            ok = bridge.request("tools/call", {"name": "echo", "arguments": {"text": CONTENT_SECRET}})
            assert CONTENT_SECRET in text_of(ok)
            failed = bridge.request("tools/call", {"name": "fail", "arguments": {}})
            assert failed["error"]["data"] == {"token": DATA_SECRET}  # passed unchanged, by design
            bridge.close_stdin()
            assert bridge.wait_exit() == 0
            frames = bridge.seen + bridge.drain()
    # The secrets were in use: every POST carried them.
    posts = [entry for entry in server.seen if entry[0] == "POST"]
    assert posts and all(PATH_SECRET in path and QUERY_SECRET in path for _, path, _ in posts)
    assert all(h.get("Authorization") == f"Bearer {HEADER_SECRET}" for _, _, h in posts)
    assert all(
        h.get("X-Api-Key") == API_KEY_SECRET and h.get("X-Literal") == LITERAL_SECRET for _, _, h in posts
    )
    assert_clean(bridge, frames + responses, BRIDGE_SECRETS + (CONTENT_SECRET,))
    assert not scan(bridge.stderr_text, (DATA_SECRET,))
    for error in bridge_errors(frames + responses):
        assert not scan(json.dumps(error), (DATA_SECRET,)), error


def test_a_url_secret_is_not_in_the_diagnostic_of_a_command_line_error(final_scan: None) -> None:
    command = bridge_command(
        "--header-env",
        "X-Api-Key=MCPB_TEST_UNSET_VARIABLE",
        f"http://127.0.0.1:9/mcp/{PATH_SECRET}?key={QUERY_SECRET}",
    )
    with Bridge(command) as bridge:
        assert bridge.wait_exit() == 2
    assert "MCPB_TEST_UNSET_VARIABLE" in bridge.stderr_text
    assert not scan(bridge.stderr_text, BRIDGE_SECRETS)


# --------------------------------------------------------------------------- the command form


def test_upstream_error_data_and_call_content_never_reach_stderr(final_scan: None) -> None:
    upstream = [sys.executable, str(BAD_UPSTREAM)]
    with Bridge(bridge_command("--log-level", "debug", upstream=upstream)) as bridge:
        bridge.initialize()
        arguments = {"code": -32000, "message": "refused", "data": {"token": DATA_SECRET}}
        failed = bridge.request("tools/call", {"name": "error", "arguments": arguments})
        assert failed["error"] == {"code": -32000, "message": "refused", "data": {"token": DATA_SECRET}}
        ok = bridge.request("tools/call", {"name": "ok", "arguments": {"text": CONTENT_SECRET}})
        assert text_of(ok) == CONTENT_SECRET
        bad = bridge.request("tools/call", {"name": "result", "arguments": {"value": [DATA_SECRET]}})
        assert bad["error"]["data"]["cause"] == "invalid_response"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        frames = bridge.seen + bridge.drain()
    assert_clean(bridge, frames, (CONTENT_SECRET,))
    assert not scan(bridge.stderr_text, (DATA_SECRET,))
    for error in bridge_errors(frames):
        assert not scan(json.dumps(error), (DATA_SECRET,))


def _next_request(bridge: Bridge) -> dict[str, Any]:
    return bridge.wait_frame(lambda frame: "method" in frame and "id" in frame)


def test_answers_of_the_client_never_reach_stderr_or_an_error(final_scan: None) -> None:
    with Bridge(bridge_command("--log-level", "debug", upstream=fixture_command())) as bridge:
        bridge.initialize()
        # A valid form answer goes upstream (and back in the tool's text, by design).
        call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
        request = _next_request(bridge)
        content = {"name": ANSWER_SECRET, "age": 36}
        bridge.send(
            {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": content}}
        )
        assert ANSWER_SECRET in text_of(bridge.wait_response(call))
        # Answers that the bridge refuses: the error names the rule, never the content.
        for bad in (
            {"action": "accept", "content": {"name": ANSWER_SECRET, "age": ANSWER_SECRET}},
            {"action": "accept", "content": {"age": 36, "color": ANSWER_SECRET}},
            {"action": ANSWER_SECRET},
        ):
            call = bridge.request_async("tools/call", {"name": "ask_form", "arguments": {}})
            request = _next_request(bridge)
            bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": bad})
            error = bridge.wait_response(call)["error"]
            assert error["data"]["cause"] == "invalid_client_answer"
        # A sampling text and the roots.
        call = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = _next_request(bridge)
        sampled = {"role": "assistant", "content": {"type": "text", "text": ANSWER_SECRET}, "model": "m"}
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": sampled})
        assert ANSWER_SECRET in text_of(bridge.wait_response(call))
        call = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = _next_request(bridge)
        bridge.send(
            {"jsonrpc": "2.0", "id": request["id"], "result": {"role": "nobody", "content": ANSWER_SECRET}}
        )
        assert bridge.wait_response(call)["error"]["data"]["cause"] == "invalid_client_answer"
        call = bridge.request_async("tools/call", {"name": "list_roots", "arguments": {}})
        request = _next_request(bridge)
        roots = {"roots": [{"uri": f"file:///{ANSWER_SECRET}"}, {"uri": f"https://{ANSWER_SECRET}.example"}]}
        bridge.send({"jsonrpc": "2.0", "id": request["id"], "result": roots})
        assert text_of(bridge.wait_response(call)) == f"roots: file:///{ANSWER_SECRET}"
        # An answer line that is not valid JSON, with the secret in it.
        call = bridge.request_async("tools/call", {"name": "sample", "arguments": {}})
        request = _next_request(bridge)
        bridge.send(
            b'{"jsonrpc":"2.0","id":"%s","result":{"text":"%s\\ud800"}}\n'
            % (request["id"].encode(), ANSWER_SECRET.encode())
        )
        assert bridge.wait_response(call)["error"]["data"]["cause"] == "invalid_client_answer"
        bridge.close_stdin()
        assert bridge.wait_exit() == 0
        frames = bridge.seen + bridge.drain()
    assert_clean(bridge, frames, (ANSWER_SECRET,))


def test_no_marker_is_on_any_stderr_captured_so_far(final_scan: None) -> None:
    """The scan of the session's end, also now: it covers this file when it runs alone."""
    found = sorted({marker for text in CAPTURED for marker in scan(text)})
    assert not found, found


def test_each_test_that_security_rst_names_exists() -> None:
    """SECURITY.rst proves each claim with a test: every ``file::test`` it names must exist."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "SECURITY.rst").read_text(encoding="utf-8")
    named = re.findall(r"``(tests/[\w/]+\.py)::(test_\w+)``", text)
    assert len(named) >= 30
    for path, name in named:
        source = (root / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{path}::{name} does not exist"
    for path in re.findall(r"``(tests/[\w/]+\.py)``", text):
        assert (root / path).is_file(), path
