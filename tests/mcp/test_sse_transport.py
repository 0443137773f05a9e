"""The HTTP+SSE transport of 2024-11-05 against a scripted server on 127.0.0.1.

The happy path against a real server (FastMCP of ``mcp==1.30.0``) is in
``tests/interop/test_interop_sse.py``; here are the failures a real server rarely shows: an
endpoint of another origin, no endpoint at all, a stream that ends, a refused stream.
"""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from conftest import WAIT
from mcpbridge.bridge.rules.errortable import error_from_mcp, error_object
from mcpbridge.bridge.sessions.passthrough import LegacyPeer
from mcpbridge.bridge.sessions.upstream import UrlTransport, url_transports
from mcpbridge.mcp.errors import Closed, McpError, ResponseTooLarge
from mcpbridge.mcp.transports import Transport
from mcpbridge.mcp.transports.http import HttpStatusError
from mcpbridge.mcp.transports.httpwire import tls_context
from mcpbridge.mcp.transports.sse_transport import (
    ForeignEndpoint,
    NoEndpoint,
    SseTransport,
    StreamEnded,
    endpoint_url,
)

INIT_PARAMS = {
    "protocolVersion": "2024-11-05",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


class OldServer:
    """A scripted HTTP+SSE server: ``GET /sse`` opens the stream, ``POST`` answers on it.

    ``endpoint`` is the data of the endpoint event (``None``: the stream sends none);
    ``end_after`` ends the stream after that many answers; ``stream_status`` refuses the GET;
    ``prelude`` is written on the stream before the endpoint event. ``tools/call`` gets a text
    of ``arguments.size`` characters.
    ``tokens``, by verb: the bearer token that the GET or a POST must carry, else 401 with
    the challenge ``Bearer scope="<verb>"``.
    """

    def __init__(
        self,
        endpoint: str | None = "/messages/?session_id={session}",
        *,
        end_after: int | None = None,
        stream_status: int = 200,
        prelude: str = "",
    ) -> None:
        self.endpoint = endpoint
        self.prelude = prelude
        self.end_after = end_after
        self.stream_status = stream_status
        self.tokens: dict[str, str] = {}
        #: The messages for the stream of each session (the endpoint names its session).
        self.outboxes: dict[str, queue.Queue[dict[str, Any] | None]] = {}
        self.posts: list[tuple[str, Any]] = []
        self.stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def challenged(self, verb: str) -> bool:
                token = server.tokens.get(verb)
                if token is None or self.headers.get("Authorization") == f"Bearer {token}":
                    return False
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Bearer scope="{verb}"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True

            def do_GET(self) -> None:  # noqa: N802 - the name of http.server
                if self.challenged("GET"):
                    return
                if server.stream_status != 200:
                    self.send_response(server.stream_status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                session = str(len(server.outboxes) + 1)
                outbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
                server.outboxes[session] = outbox
                if server.prelude:
                    self.wfile.write(server.prelude.encode())
                    self.wfile.flush()
                if server.endpoint is not None:
                    endpoint = server.endpoint.format(session=session)
                    self.wfile.write(f"event: endpoint\ndata: {endpoint}\n\n".encode())
                    self.wfile.flush()
                answered = 0
                while not server.stop.is_set():
                    try:
                        message = outbox.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    if message is None:
                        return
                    self.wfile.write(f"event: message\ndata: {json.dumps(message)}\n\n".encode())
                    self.wfile.flush()
                    answered += 1
                    if server.end_after is not None and answered >= server.end_after:
                        return

            def do_POST(self) -> None:  # noqa: N802 - the name of http.server
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                if self.challenged("POST"):
                    return
                server.posts.append((self.path, body))
                if self.path == "/sse":  # the stream takes no POST: Streamable HTTP is refused
                    self.send_response(405)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                outbox = server.outboxes[self.path.rpartition("=")[2]]
                if body.get("method") == "initialize":
                    result = {
                        "protocolVersion": "2024-11-05",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "old", "version": "1"},
                    }
                    outbox.put({"jsonrpc": "2.0", "id": body["id"], "result": result})
                elif body.get("method") == "tools/call":
                    text = "x" * body["params"]["arguments"]["size"]
                    result = {"content": [{"type": "text", "text": text}]}
                    outbox.put({"jsonrpc": "2.0", "id": body["id"], "result": result})
                elif "id" in body and "method" in body:
                    outbox.put({"jsonrpc": "2.0", "id": body["id"], "result": {"tools": []}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="test-old-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/sse"

    def __enter__(self) -> OldServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(WAIT)


def peer_of_transport(transport: Transport) -> LegacyPeer:
    peer = LegacyPeer(transport, on_request=lambda _r: None, on_notification=lambda _n: None)
    peer.start()
    return peer


peer_of = peer_of_transport


def initialize(transport: Transport) -> Any:
    """Send ``initialize`` through ``transport`` on a peer of its own, closed after the answer or
    the error; the answer."""
    peer = peer_of(transport)
    try:
        return peer.request("initialize", INIT_PARAMS, timeout=WAIT)
    finally:
        peer.close(1.0)


def test_requests_go_to_the_endpoint_and_their_answers_come_on_the_stream() -> None:
    with OldServer() as server:
        transport = SseTransport(server.url)
        peer = peer_of(transport)
        try:
            answer = peer.request("initialize", INIT_PARAMS, timeout=WAIT)
            assert answer.result["serverInfo"] == {"name": "old", "version": "1"}  # type: ignore[union-attr]
            assert not transport.gone
            peer.notify("notifications/initialized")
            listed = peer.request("tools/list", None, timeout=WAIT)
            assert listed.result == {"tools": []}  # type: ignore[union-attr]
        finally:
            peer.close(1.0)
        paths = {path for path, _body in server.posts}
        assert paths == {"/messages/?session_id=1"}
        assert [body.get("method") for _p, body in server.posts] == [
            "initialize",
            "notifications/initialized",
            "tools/list",
        ]
        threads = {t.name for t in threading.enumerate()}
        assert not threads & {"mcpbridge-sse-stream", "mcpbridge-sse-poster"}


@pytest.mark.parametrize(
    "endpoint", ["http://other.invalid/messages/", "https://127.0.0.1:{port}/messages/", "//evil.invalid/m"]
)
def test_an_endpoint_of_another_origin_is_refused_with_a_named_error(endpoint: str) -> None:
    with OldServer() as server:
        server.endpoint = endpoint.format(port=server.httpd.server_address[1])
        with pytest.raises(ForeignEndpoint):
            initialize(SseTransport(server.url))
        assert server.posts == []


def test_no_endpoint_event_in_time_is_a_named_error() -> None:
    with OldServer(endpoint=None) as server:
        with pytest.raises(NoEndpoint):
            initialize(SseTransport(server.url, connect_timeout=0.5))
        assert server.posts == []


def test_a_refused_stream_fails_the_request_with_its_status() -> None:
    with OldServer(stream_status=405) as server:
        with pytest.raises(HttpStatusError) as caught:
            initialize(SseTransport(server.url))
        assert caught.value.http_status == 405


class ScopeAuthorizer:
    """Sends the token of the scope of the last challenge; ``retry``: whether it asks for a retry."""

    def __init__(self, retry: bool = True) -> None:
        self.retry = retry
        self.token = "none"
        self.challenges: list[tuple[int, str | None]] = []

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def on_challenge(self, status: int, www_authenticate: str | None) -> bool:
        self.challenges.append((status, www_authenticate))
        self.token = (www_authenticate or "").partition('scope="')[2].rstrip('"') + "-token"
        return self.retry


def test_the_stream_and_a_post_go_once_more_after_a_challenge_that_the_authorizer_answered() -> None:
    with OldServer() as server:
        server.tokens = {"GET": "GET-token", "POST": "POST-token"}
        authorizer = ScopeAuthorizer()
        answer = initialize(SseTransport(server.url, authorizer=authorizer))
        assert answer.result["serverInfo"] == {"name": "old", "version": "1"}
        assert authorizer.challenges == [(401, 'Bearer scope="GET"'), (401, 'Bearer scope="POST"')]
        assert [body["method"] for _path, body in server.posts] == ["initialize"]


def test_a_post_refused_again_after_its_challenge_fails_with_the_status() -> None:
    with OldServer() as server:
        server.tokens = {"POST": "other-token"}
        authorizer = ScopeAuthorizer()
        with pytest.raises(HttpStatusError) as caught:
            initialize(SseTransport(server.url, authorizer=authorizer))
        assert caught.value.http_status == 401
        assert authorizer.challenges == [(401, 'Bearer scope="POST"')]
        assert server.posts == []


def test_the_end_of_the_stream_ends_the_connection() -> None:
    with OldServer(end_after=1) as server:
        ended: queue.Queue[McpError | None] = queue.Queue()
        transport = SseTransport(server.url)
        peer = peer_of(transport)
        inner = transport._on_closed
        assert inner is not None

        def on_closed(error: McpError | None) -> None:
            ended.put(error)
            inner(error)

        transport._on_closed = on_closed
        try:
            peer.request("initialize", INIT_PARAMS, timeout=WAIT)
            assert isinstance(ended.get(timeout=WAIT), StreamEnded)
            assert transport.gone
            with pytest.raises(Closed):  # at once: not the timeout of a request that waits
                peer.request("tools/list", None, timeout=WAIT)
        finally:
            peer.close(1.0)


def test_an_event_over_the_limit_before_the_endpoint_fails_the_request_as_too_large() -> None:
    with OldServer(prelude=f"data: {'x' * 1000}\n\n") as server:
        with pytest.raises(ResponseTooLarge) as caught:
            initialize(SseTransport(server.url, max_response_bytes=500))
        detail = "an event longer than 500 bytes"
        assert (caught.value.cause, caught.value.detail) == ("response_too_large", detail)
        assert (caught.value.limit, caught.value.over_http) == (500, True)
        # The words of the client's error name --max-response-bytes.
        assert error_from_mcp(caught.value) == error_object("response_too_large", detail)
        assert server.posts == []


def test_an_answer_over_the_limit_fails_its_request_as_too_large_and_ends_the_session() -> None:
    with OldServer() as server:
        transport = SseTransport(server.url, max_response_bytes=2000)
        peer = peer_of(transport)
        try:
            peer.request("initialize", INIT_PARAMS, timeout=WAIT)
            small = peer.request("tools/call", {"name": "t", "arguments": {"size": 100}}, timeout=WAIT)
            assert small.result["content"][0]["text"] == "x" * 100  # type: ignore[union-attr]
            with pytest.raises(ResponseTooLarge) as caught:
                peer.request("tools/call", {"name": "t", "arguments": {"size": 5000}}, timeout=WAIT)
            detail = "an event longer than 2000 bytes"
            assert (caught.value.cause, caught.value.detail) == ("response_too_large", detail)
            assert (caught.value.limit, caught.value.over_http) == (2000, True)
            assert error_from_mcp(caught.value) == error_object("response_too_large", detail)
            assert transport.gone
            with pytest.raises(Closed):  # the session ended with the stream
                peer.request("tools/list", None, timeout=WAIT)
        finally:
            peer.close(1.0)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("/messages/?session_id=1", "http://127.0.0.1:8000/messages/?session_id=1"),
        ("messages?x=1#frag", "http://127.0.0.1:8000/mcp/messages?x=1"),
        ("http://127.0.0.1:8000/m", "http://127.0.0.1:8000/m"),
        ("HTTP://127.0.0.1:8000/m", "http://127.0.0.1:8000/m"),
    ],
)
def test_the_endpoint_is_resolved_against_the_url_of_the_server(data: str, expected: str) -> None:
    assert endpoint_url("http://127.0.0.1:8000/mcp/sse", data) == expected


def test_a_default_port_is_the_same_origin_as_none() -> None:
    assert (
        endpoint_url("https://example.invalid/sse", "https://example.invalid:443/m")
        == "https://example.invalid:443/m"
    )
    with pytest.raises(ForeignEndpoint):
        endpoint_url("https://example.invalid/sse", "https://example.invalid:8443/m")
    with pytest.raises(ForeignEndpoint):
        endpoint_url("https://example.invalid/sse", "http://example.invalid/m")


@pytest.mark.parametrize("setting", [UrlTransport.AUTO, UrlTransport.HTTP_SSE])
def test_a_refused_post_falls_back_to_the_stream_and_later_connections_use_it_at_once(
    setting: UrlTransport,
) -> None:
    with OldServer() as server:
        _modern, legacy = url_transports(
            server.url, headers=[], max_response_bytes=1 << 20, ssl_context=tls_context, transport=setting
        )
        assert legacy.found is None
        for _connection in range(2):
            answer = initialize(legacy())
            assert answer.result["protocolVersion"] == "2024-11-05"
            assert legacy.found is UrlTransport.HTTP_SSE
        refused = [path for path, _body in server.posts if path == "/sse"]
        # auto: one POST of initialize to the URL, refused, and none on the second connection.
        assert len(refused) == (1 if setting is UrlTransport.AUTO else 0)
        assert [body["method"] for path, body in server.posts if path != "/sse"] == ["initialize"] * 2


def test_with_streamable_http_chosen_a_refused_post_is_the_error() -> None:
    with OldServer() as server:
        _modern, legacy = url_transports(
            server.url,
            headers=[],
            max_response_bytes=1 << 20,
            ssl_context=tls_context,
            transport=UrlTransport.STREAMABLE_HTTP,
        )
        with pytest.raises(HttpStatusError) as caught:
            initialize(legacy())
        assert caught.value.http_status == 405
        assert legacy.found is None
