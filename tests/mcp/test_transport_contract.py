"""One contract, every client transport: stdio child, memory link, HTTP 2026-07-28, HTTP 2025-era,
HTTP+SSE 2024-11-05.

Each transport runs under the raw JSON-RPC peer (:class:`~mcpbridge.mcp.client.legacypeer.LegacyPeer`),
which adds nothing to the messages, against a real server of its kind: the
fixture server as a child process and in this process, the Python SDK 2.3.0 under
uvicorn, and the 2025-era peer written with the Python SDK 1.30.0 (on Streamable HTTP and on
the HTTP+SSE transport of ``run("sse")``). The contract:

* the opening request of the server's revision gets its result, matched by id;
* requests sent together from several threads each get their own answer;
* an unknown method gets the server's JSON-RPC error for its own id (-32601; the
  Python SDK 1.x answers -32602);
* the peer is not ``gone`` while the server runs;
* after the close, a request fails at once with ``Closed``, and the send of the
  transport raises an :class:`~mcpbridge.mcp.errors.McpError` instead of hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import WAIT
from fixtures.fixture_server import build
from harness import fixture_command
from mcpbridge.mcp.client.legacypeer import LegacyPeer
from mcpbridge.mcp.errors import Closed, McpError
from mcpbridge.mcp.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, ErrorResponse, Request, Response
from mcpbridge.mcp.transports import Transport
from mcpbridge.mcp.transports.http import HttpTransport
from mcpbridge.mcp.transports.legacy_http import LegacyHttpTransport
from mcpbridge.mcp.transports.memory import memory_pair
from mcpbridge.mcp.transports.sse_transport import SseTransport
from mcpbridge.mcp.transports.stdio import StdioChildTransport
from peers import running_py_http_server
from peers.legacy import running_legacy_http_server, running_legacy_sse_server

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "contract", "version": "1.0"},
}
LEGACY_INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "contract", "version": "1.0"},
}


@dataclass
class Subject:
    """One transport under test and the requests of its revision."""

    transport: Transport
    #: The opening request (method, params) and the member its result must have.
    opening: tuple[str, dict[str, Any]]
    result_key: str
    #: The params of any later request of the revision (the modern one carries ``_meta``).
    params: Callable[[], dict[str, Any]]
    after_opening: Callable[[LegacyPeer], None] = lambda peer: None
    #: The error code of the server for an unknown method.
    unknown_method_code: int = METHOD_NOT_FOUND


def modern(transport: Transport) -> Subject:
    return Subject(
        transport,
        ("server/discover", {"_meta": dict(MODERN_META)}),
        "capabilities",
        lambda: {"_meta": dict(MODERN_META)},
    )


def legacy(transport: Transport) -> Subject:
    return Subject(
        transport,
        ("initialize", dict(LEGACY_INITIALIZE)),
        "protocolVersion",
        lambda: {},
        lambda peer: peer.notify("notifications/initialized"),
        # The Python SDK 1.x answers an unknown method with -32602.
        INVALID_PARAMS,
    )


@pytest.fixture(params=["stdio", "memory", "http-2026", "http-2025", "sse-2024"])
def subject(request: pytest.FixtureRequest) -> Iterator[Subject]:
    kind = request.param
    if kind == "stdio":
        yield modern(StdioChildTransport(fixture_command(), stderr_sink=lambda line: None))
    elif kind == "memory":
        server = build()
        client_end, server_end = memory_pair()
        connection = server.start(server_end)
        yield modern(client_end)
        client_end.close()
        assert connection.wait_shutdown(WAIT)
    elif kind == "http-2026":
        with running_py_http_server() as url:
            yield modern(HttpTransport(url))
    elif kind == "http-2025":
        with running_legacy_http_server() as url:
            yield legacy(LegacyHttpTransport(url))
    else:
        with running_legacy_sse_server() as url:
            yield legacy(SseTransport(url))


@pytest.fixture
def peer(subject: Subject) -> Iterator[LegacyPeer]:
    opened = LegacyPeer(subject.transport, on_request=lambda _r: None, on_notification=lambda _n: None)
    opened.start()
    try:
        yield opened
    finally:
        opened.close()


def open_session(peer: LegacyPeer, subject: Subject) -> dict[str, Any]:
    method, params = subject.opening
    answer = peer.request(method, params, timeout=WAIT)
    assert isinstance(answer, Response), answer
    assert isinstance(answer.result, dict) and subject.result_key in answer.result
    subject.after_opening(peer)
    return answer.result


def test_the_opening_request_gets_its_result(peer: LegacyPeer, subject: Subject) -> None:
    open_session(peer, subject)
    assert not peer.gone


def test_requests_from_several_threads_each_get_their_own_answer(peer: LegacyPeer, subject: Subject) -> None:
    open_session(peer, subject)
    answers: dict[int, Any] = {}
    lock = threading.Lock()

    def ask(n: int) -> None:
        answer = peer.request("tools/list", subject.params(), timeout=WAIT)
        with lock:
            answers[n] = answer

    threads = [threading.Thread(target=ask, args=(n,), name=f"test-contract-{n}") for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(answers) == [0, 1, 2, 3]
    for answer in answers.values():
        assert isinstance(answer, Response), answer
        assert isinstance(answer.result["tools"], list) and answer.result["tools"]


def test_an_unknown_method_gets_method_not_found(peer: LegacyPeer, subject: Subject) -> None:
    open_session(peer, subject)
    answer = peer.request("contract/unknown", subject.params(), timeout=WAIT)
    assert isinstance(answer, ErrorResponse), answer
    assert answer.error.code == subject.unknown_method_code


def test_after_the_close_a_request_fails_at_once(peer: LegacyPeer, subject: Subject) -> None:
    open_session(peer, subject)
    peer.close()
    with pytest.raises(Closed):
        peer.request("tools/list", subject.params(), timeout=WAIT)
    with pytest.raises(McpError):
        subject.transport.send(Request(99, "tools/list", subject.params()))
