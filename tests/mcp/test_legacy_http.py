"""The Streamable HTTP transport of 2025-11-25 against a scripted server on 127.0.0.1.

The server plays a 2025-era endpoint: ``initialize`` mints a session, the session
can expire (404), a GET stream may be refused (405), a call may hang until the
client gives up. The transport runs under :class:`LegacyPeer`, as in the bridge.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import WAIT
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.client.legacypeer import LegacyPeer
from mcpbridge.mcp.errors import Cancelled, Closed
from mcpbridge.mcp.jsonrpc import Notification, Request, Response
from mcpbridge.mcp.transports.http import HttpStatusError
from mcpbridge.mcp.transports.legacy_http import LegacyHttpTransport, SessionExpired

INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


class Endpoint:
    """The scripted 2025-era endpoint and what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, str | None, str | None]] = []
        self.sessions = 0
        self.expired: set[str] = set()
        self.expire_next_list = False
        #: The methods whose messages get 404 in every session: a server that forgets sessions.
        self.forget_for: set[str] = set()
        self.release = threading.Event()
        self.hanging = threading.Event()
        self.lock = threading.Lock()

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        session = handler.headers.get("Mcp-Session-Id")
        version = handler.headers.get("MCP-Protocol-Version")
        if handler.command != "POST":
            with self.lock:
                self.seen.append((handler.command, session, version, None))
            handler.send_response(405 if handler.command == "GET" else 200)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        length = int(handler.headers.get("Content-Length", "0"))
        message = json.loads(handler.rfile.read(length))
        method = message.get("method")
        with self.lock:
            self.seen.append(("POST", session, version, method))
            if session is not None and (session in self.expired or method in self.forget_for):
                self._empty(handler, 404)
                return
            if method == "initialize":
                self.sessions += 1
                self._json(
                    handler,
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "result": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "scripted", "version": "1"},
                        },
                    },
                    session=f"s{self.sessions}",
                )
                return
            if method == "tools/list" and self.expire_next_list:
                self.expire_next_list = False
                assert session is not None
                self.expired.add(session)
                self._empty(handler, 404)
                return
        if "id" not in message:
            self._empty(handler, 202)
            return
        if method == "tools/call":
            self.hanging.set()
            self.release.wait(WAIT)
            self._empty(handler, 500)
            return
        events = [
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}},
            {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [{"name": "t"}]}},
        ]
        body = "".join(f"data: {json.dumps(event)}\n\n" for event in events).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _json(self, handler: BaseHTTPRequestHandler, obj: Any, session: str) -> None:
        body = json.dumps(obj).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Mcp-Session-Id", session)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _empty(self, handler: BaseHTTPRequestHandler, status: int) -> None:
        handler.send_response(status)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    def posts(self) -> list[tuple[str | None, str | None]]:
        with self.lock:
            return [(method, session) for verb, session, _v, method in self.seen if verb == "POST"]


@pytest.fixture
def endpoint() -> Iterator[tuple[Endpoint, str]]:
    script = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            script.handle(self)

        def do_GET(self) -> None:
            script.handle(self)

        def do_DELETE(self) -> None:
            script.handle(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="test-endpoint", daemon=True)
    thread.start()
    try:
        yield script, f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        script.release.set()
        server.shutdown()
        server.server_close()
        thread.join(WAIT)


def open_peer(url: str, notifications: list[Notification]) -> LegacyPeer:
    peer = LegacyPeer(
        LegacyHttpTransport(url), on_request=lambda _r: None, on_notification=notifications.append
    )
    peer.start()
    answer = peer.request("initialize", INIT_PARAMS, timeout=WAIT)
    assert isinstance(answer, Response) and answer.result["protocolVersion"] == "2025-06-18"
    peer.notify("notifications/initialized")
    return peer


def test_an_expired_session_is_initialized_again_once_and_the_request_repeated(endpoint) -> None:
    script, url = endpoint
    notifications: list[Notification] = []
    peer = open_peer(url, notifications)
    try:
        script.expire_next_list = True
        answer = peer.request("tools/list", None, timeout=WAIT)
        assert isinstance(answer, Response) and answer.result == {"tools": [{"name": "t"}]}
        assert [n.method for n in notifications] == ["notifications/message"]
    finally:
        peer.close()
    assert script.posts() == [
        ("initialize", None),
        ("notifications/initialized", "s1"),
        ("tools/list", "s1"),
        ("initialize", None),
        ("notifications/initialized", "s2"),
        ("tools/list", "s2"),
    ]
    later = [entry for entry in script.seen if entry[1] is not None]
    assert all(version == "2025-06-18" for _verb, _session, version, _method in later)
    assert ("DELETE", "s2", "2025-06-18", None) in script.seen
    # Each session's GET stream is answered before its notifications/initialized goes out.
    opening = [(verb, session, method) for verb, session, _v, method in script.seen if method != "tools/list"]
    assert opening == [
        ("POST", None, "initialize"),
        ("GET", "s1", None),
        ("POST", "s1", "notifications/initialized"),
        ("POST", None, "initialize"),
        ("GET", "s2", None),
        ("POST", "s2", "notifications/initialized"),
        ("DELETE", "s2", None),
    ]


@pytest.mark.parametrize(
    "forgotten",
    [{"tools/list"}, {"tools/list", "notifications/initialized"}],
    ids=["the-request-again", "initialized-too"],
)
def test_a_new_session_that_expires_at_once_too_ends_the_new_sessions(endpoint, forgotten) -> None:
    script, url = endpoint
    peer = open_peer(url, [])
    try:
        assert isinstance(peer.request("tools/list", None, timeout=WAIT), Response)  # the session works
        script.forget_for = forgotten
        for _ in range(2):
            with pytest.raises(SessionExpired) as info:
                peer.request("tools/list", None, timeout=WAIT)
            assert info.value.cause == "session_expired"
    finally:
        peer.close()
    first = [("initialize", None), ("notifications/initialized", "s1"), ("tools/list", "s1")]
    renewal = [("tools/list", "s1"), ("initialize", None), ("notifications/initialized", "s2")]
    if "notifications/initialized" not in forgotten:
        renewal.append(("tools/list", "s2"))  # the request once more, in the new session
    # The second request is not sent: the bridge starts no more sessions.
    assert script.posts() == first + renewal


def test_a_refused_get_stream_leaves_the_requests_working(endpoint) -> None:
    script, url = endpoint
    peer = open_peer(url, [])
    try:
        for _ in range(3):
            assert isinstance(peer.request("tools/list", None, timeout=WAIT), Response)
    finally:
        peer.close()
    gets = [entry for entry in script.seen if entry[0] == "GET"]
    assert len(gets) == 1 and gets[0][1] == "s1"


def test_a_canceled_request_stops_at_once_and_the_server_gets_notifications_cancelled(endpoint) -> None:
    script, url = endpoint
    peer = open_peer(url, [])
    token = CancelToken()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            peer.request("tools/call", {"name": "hang", "arguments": {}}, timeout=WAIT * 3, cancel=token)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    caller = threading.Thread(target=run, name="test-caller")
    caller.start()
    try:
        assert script.hanging.wait(WAIT)
        token.cancel("the user stopped it")
        caller.join(WAIT)
        assert not caller.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], Cancelled)
    finally:
        script.release.set()
        peer.close()
    assert ("notifications/cancelled", "s1") in script.posts()


def test_requests_wait_for_the_notifications_queued_before_them(endpoint) -> None:
    script, url = endpoint
    transport = LegacyHttpTransport(url)
    delivered: list[Any] = []
    transport.start(delivered.append, lambda _e: None, lambda _e: None)
    try:
        transport.send(Request(1, "initialize", INIT_PARAMS))
        for n in range(5):
            transport.send(Notification("notifications/roots/list_changed", {"n": n}))
        transport.send(Request(2, "tools/list", None))
    finally:
        transport.close()
    methods = [method for method, _session in script.posts()]
    assert methods == ["initialize", *["notifications/roots/list_changed"] * 5, "tools/list"]
    assert [type(m).__name__ for m in delivered] == ["Response", "Notification", "Response"]


def test_a_kill_ends_the_idle_poster_thread_without_a_close(endpoint) -> None:
    _script, url = endpoint
    transport = LegacyHttpTransport(url)
    transport.start(lambda _m: None, lambda _e: None, lambda _e: None)
    try:
        transport.send(Request(1, "initialize", INIT_PARAMS))
        poster = transport._posts.thread
        assert poster.name == LegacyHttpTransport.POSTER and poster.is_alive()
        transport.kill()
        poster.join(WAIT)
        assert not poster.is_alive(), "the poster thread waits for work after the kill"
        with pytest.raises(Closed):
            transport.send(Notification("notifications/initialized"))
    finally:
        transport.close()


def test_last_event_id_goes_only_on_a_get_that_resumes_the_same_stream() -> None:
    from tests.peers.scripted_http import ScriptedServer

    gets: list[str | None] = []
    third_get = threading.Event()
    lock = threading.Lock()

    def server(ex: Any) -> None:
        request = ex.request
        if request.method == "GET":
            with lock:
                gets.append(request.header("Last-Event-ID"))
                count = len(gets)
            ex.start_sse()
            ex.send(b"retry: 10\n\n")
            if count == 1:
                # The first GET stream: one event with an id, then the stream ends.
                ex.send(b'id: get-1\ndata: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n')
            elif count == 3:
                third_get.set()
            ex.close()
            return
        if request.rpc_method == "initialize":
            # The answer to initialize comes on an SSE stream whose events carry ids.
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"},
            }
            answer = json.dumps({"jsonrpc": "2.0", "id": request.rpc_id, "result": result})
            ex.head(200, [("Content-Type", "text/event-stream"), ("Mcp-Session-Id", "s1")])
            ex.send(f"id: post-7\ndata: {answer}\n\n".encode())
            ex.close()
            return
        ex.body(202, b"", "application/json")

    notifications: list[Notification] = []
    with ScriptedServer(server) as scripted:
        peer = LegacyPeer(
            LegacyHttpTransport(scripted.url()),
            on_request=lambda _r: None,
            on_notification=notifications.append,
        )
        peer.start()
        try:
            answer = peer.request("initialize", INIT_PARAMS, timeout=WAIT)
            assert isinstance(answer, Response)
            peer.notify("notifications/initialized")
            assert third_get.wait(WAIT)
        finally:
            peer.close()
    # The first GET carries none (not the id of the POST stream); the next resume the GET stream.
    assert gets[:3] == [None, "get-1", "get-1"]
    assert [n.method for n in notifications][:1] == ["notifications/tools/list_changed"]


def _busy_then_tools(answers: Iterator[str], busy: Callable[[Any], None]) -> Callable[[Any], None]:
    """A server that answers each POST as ``answers`` says: ``busy`` writes a busy answer."""

    def server(ex: Any) -> None:
        if ex.request.method != "POST":
            ex.body(405, b"", "text/plain")
            return
        if next(answers) == "busy":
            busy(ex)
            return
        ex.json({"jsonrpc": "2.0", "id": ex.request.rpc_id, "result": {"tools": []}})

    return server


@contextlib.contextmanager
def _started(url: str) -> Iterator[tuple[LegacyHttpTransport, list[Any]]]:
    """A started 2025-era transport to ``url`` and the messages it delivers; closed at the end."""
    transport = LegacyHttpTransport(url)
    delivered: list[Any] = []
    transport.start(delivered.append, lambda _e: None, lambda _e: None)
    try:
        yield transport, delivered
    finally:
        transport.close()


def test_a_busy_answer_with_a_short_retry_after_is_waited_for_once() -> None:
    from tests.peers.scripted_http import ScriptedServer

    def busy(ex: Any) -> None:
        ex.body(503, b"busy\n", "text/plain", [("Retry-After", "1")])

    with ScriptedServer(_busy_then_tools(iter(["busy", "ok", "busy", "busy"]), busy)) as scripted:
        with _started(scripted.url()) as (transport, delivered):
            transport.send(Request(1, "tools/list", None))
            with pytest.raises(HttpStatusError) as info:
                transport.send(Request(2, "tools/list", None))
    assert [m.id for m in delivered] == [1]
    assert info.value.detail == "HTTP status 503, retry after 1 s"
    assert [r.rpc_id for r in scripted.received] == [1, 1, 2, 2]


def test_a_busy_answer_whose_json_body_is_no_message_is_waited_for_once_too() -> None:
    from tests.peers.scripted_http import ScriptedServer

    def busy(ex: Any) -> None:
        ex.json({"error": "overloaded"}, 503, [("Retry-After", "1")])

    with ScriptedServer(_busy_then_tools(iter(["busy", "ok"]), busy)) as scripted:
        with _started(scripted.url()) as (transport, delivered):
            transport.send(Request(1, "tools/list", None))
    assert [m.id for m in delivered] == [1]
    assert [r.rpc_id for r in scripted.received] == [1, 1]


@pytest.mark.parametrize(
    "value", ["\u00b2", "9" * 5000, "Fri, 31 Dec 9999 23:59:59 GMT"], ids=["digit", "nines", "date"]
)
def test_a_busy_answer_with_no_usable_wait_fails_at_once_with_the_status(value: str) -> None:
    from tests.peers.scripted_http import ScriptedServer

    def busy(ex: Any) -> None:
        ex.body(429, b"slow down\n", "text/plain", [("Retry-After", value)])

    with ScriptedServer(_busy_then_tools(iter(["busy", "ok"]), busy)) as scripted:
        with _started(scripted.url()) as (transport, delivered):
            with pytest.raises(HttpStatusError) as info:
                transport.send(Request(1, "tools/list", None))
            transport.send(Request(2, "tools/list", None))
    assert info.value.detail == "HTTP status 429" and info.value.retry_after is None
    assert [m.id for m in delivered] == [2]
    assert [r.rpc_id for r in scripted.received] == [1, 2]


def test_a_close_ends_the_pause_before_a_stream_is_resumed() -> None:
    from mcpbridge.mcp.errors import Closed
    from tests.peers.scripted_http import ScriptedServer

    stream_ended = threading.Event()
    gets: list[str | None] = []

    def server(ex: Any) -> None:
        request = ex.request
        if request.method == "GET":
            gets.append(request.header("Last-Event-ID"))
            ex.body(405, b"", "application/json")
            return
        if request.rpc_method == "tools/list":
            # An event with an id and the longest retry time, then the stream ends without the answer.
            ex.start_sse()
            ex.send(b"retry: 30000\n\nid: p-1\ndata: \n\n")
            ex.close()
            stream_ended.set()
            return
        ex.body(202, b"", "application/json")

    outcome: list[BaseException] = []
    with ScriptedServer(server) as scripted:
        transport = LegacyHttpTransport(scripted.url())
        transport.start(lambda _m: None, lambda _e: None, lambda _e: None)

        def call() -> None:
            try:
                # The bridge's requests carry a cancel token, which the close does not cancel.
                transport.send(Request(2, "tools/list", None), cancel=CancelToken())
            except BaseException as exc:  # noqa: BLE001 - the outcome is asserted below
                outcome.append(exc)

        caller = threading.Thread(target=call, name="test-caller")
        caller.start()
        try:
            assert stream_ended.wait(WAIT)
        finally:
            transport.close()
        # The pause of 30 s before the resumption ends with the close: the call ends, nothing resumes.
        caller.join(WAIT)
        assert not caller.is_alive(), "the call still waits out the pause after the close"
    assert len(outcome) == 1 and isinstance(outcome[0], Closed), outcome
    assert "p-1" not in gets
