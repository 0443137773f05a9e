"""The Streamable HTTP transport against real servers on loopback.

Two kinds of peers: the official Python SDK (``mcp==2.3.0``) under uvicorn, which shows
that the transport speaks revision 2026-07-28 as the reference does, and a scripted raw
server (:mod:`tests.peers.scripted_http`), which shows each failure and that the next
request still works.
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import select
import socket
import ssl
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.errors import (
    Cancelled,
    Closed,
    ConnectFailed,
    InvalidRequest,
    InvalidResponse,
    McpError,
    NotConnected,
    TransportFailed,
)
from mcpbridge.mcp.jsonrpc import HEADER_MISMATCH, ErrorResponse, Message, Notification, Request, Response
from mcpbridge.mcp.transports.http import (
    CaFileError,
    HttpStatusError,
    HttpTransport,
    InvalidMarking,
    encode_header_value,
    filter_tools,
    header_markings,
    param_headers,
    proxy_for,
    tls_context,
)
from tests.conftest import WAIT
from tests.peers import running_py_http_server
from tests.peers.scripted_http import Exchange, Script, ScriptedServer

#: How long a send may take to return after its cancellation or its abort: at once, not after an answer.
CANCEL_BOUND = 2.0

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1.0"},
}


def call(request_id: Any, tool: str, arguments: dict[str, Any] | None = None, **meta: Any) -> Request:
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}, "_meta": {**META, **meta}}
    return Request(request_id, "tools/call", params)


def text_of(message: Message) -> str:
    assert isinstance(message, Response), message
    return str(message.result["content"][0]["text"])


class Inbox:
    """Collects what the transport delivers; tests wait on it with a bound."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._changed = threading.Condition()

    def __call__(self, message: Message) -> None:
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[Message], bool], timeout: float = WAIT) -> Message:
        with self._changed:
            found: list[Message] = []

            def seen() -> bool:
                found[:] = [m for m in self.messages if predicate(m)]
                return bool(found)

            if not self._changed.wait_for(seen, timeout):
                raise TimeoutError("no such message")
            return found[0]

    def clear(self) -> None:
        with self._changed:
            self.messages.clear()


class Sender:
    """``transport.send`` on its own thread, as the client does for HTTP."""

    def __init__(self, transport: HttpTransport, message: Message, cancel: CancelToken | None = None) -> None:
        self.error: BaseException | None = None
        self.done = threading.Event()

        def run() -> None:
            try:
                transport.send(message, cancel=cancel)
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                self.error = exc
            finally:
                self.done.set()

        self.thread = threading.Thread(target=run, name="test-sender", daemon=True)
        self.thread.start()

    def join(self, timeout: float = WAIT) -> BaseException | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "send did not return"
        return self.error


class LogLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def log_lines() -> Iterator[LogLines]:
    handler = LogLines()
    logger = logging.getLogger("mcpbridge.http")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def assert_no_url(text: str, url: str) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    assert url not in text
    assert f":{parts.port}" not in text
    assert parts.path not in text or parts.path in ("", "/")


def open_transport(url: str, inbox: Inbox, **options: Any) -> HttpTransport:
    transport = HttpTransport(url, **options)
    transport.start(inbox, lambda error: None, lambda error: None)
    return transport


# ---------------------------------------------------------------------------------------------
# The Python SDK server
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdk_url() -> Iterator[str]:
    with running_py_http_server() as url:
        yield url


@pytest.fixture
def sdk(sdk_url: str) -> Iterator[tuple[HttpTransport, Inbox]]:
    inbox = Inbox()
    transport = open_transport(sdk_url, inbox)
    yield transport, inbox
    transport.close()


def test_discover_gets_the_json_result_of_the_sdk_server(sdk):
    transport, inbox = sdk
    transport.send(Request(1, "server/discover", {"_meta": META}))
    (message,) = inbox.messages
    assert isinstance(message, Response) and message.id == 1
    assert message.result["supportedVersions"] == ["2026-07-28"]


def test_a_quick_call_gets_a_json_body(sdk):
    transport, inbox = sdk
    transport.send(call(2, "echo", {"text": "hello"}))
    assert [text_of(m) for m in inbox.messages] == ["hello"]


def test_progress_and_log_messages_of_an_sse_answer_come_in_order_before_the_result(sdk):
    transport, inbox = sdk
    meta = {"progressToken": "p-3", "io.modelcontextprotocol/logLevel": "debug"}
    transport.send(call(3, "steps", {"count": 3}, **meta))
    kinds = [m.method if isinstance(m, Notification) else "result" for m in inbox.messages]
    assert kinds == ["notifications/progress", "notifications/message"] * 3 + ["result"]
    progress = [
        m.params["progress"]
        for m in inbox.messages
        if isinstance(m, Notification) and m.method == "notifications/progress" and m.params
    ]
    assert progress == [1, 2, 3]
    assert text_of(inbox.messages[-1]) == "done 3"


def count_of(transport: HttpTransport, inbox: Inbox, tool: str, at_least: int = 0) -> int:
    """The count of the peer's tool (``waiting`` or ``cancelled``), once it is at least ``at_least``."""
    inbox.clear()
    transport.send(call(f"{tool}-{at_least}", tool, {"at_least": at_least}))
    (message,) = inbox.messages
    return int(text_of(message))


def test_cancel_closes_the_response_stream_and_the_server_sees_it(sdk):
    transport, inbox = sdk
    before = count_of(transport, inbox, "cancelled")
    cancel = CancelToken()
    sender = Sender(transport, call(5, "wait_for_cancel", progressToken=5), cancel)
    inbox.wait_for(lambda m: isinstance(m, Notification) and m.method == "notifications/progress")
    cancel.cancel("the client canceled")
    error = sender.join(CANCEL_BOUND)
    assert isinstance(error, Cancelled) and error.detail == "the client canceled"
    assert count_of(transport, inbox, "cancelled", before + 1) == before + 1


def test_cancel_while_the_server_holds_back_the_response_head_returns_at_once(sdk):
    transport, inbox = sdk
    before = count_of(transport, inbox, "waiting")
    cancel = CancelToken()
    sender = Sender(transport, call(7, "wait_for_cancel"), cancel)
    assert count_of(transport, inbox, "waiting", before + 1) == before + 1
    assert not sender.done.is_set()
    cancel.cancel("timeout")
    assert isinstance(sender.join(CANCEL_BOUND), Cancelled)


def test_a_token_canceled_before_the_send_sends_nothing(sdk):
    transport, inbox = sdk
    cancel = CancelToken()
    cancel.cancel("early")
    with pytest.raises(Cancelled):
        transport.send(call(8, "echo", {"text": "x"}), cancel=cancel)
    assert inbox.messages == []


def test_the_listen_stream_delivers_its_acknowledgment_and_events_until_canceled(sdk):
    transport, inbox = sdk
    listen = Request(20, "subscriptions/listen", {"_meta": META, "notifications": {"toolsListChanged": True}})
    cancel = CancelToken()
    sender = Sender(transport, listen, cancel)
    ack = inbox.wait_for(
        lambda m: isinstance(m, Notification) and m.method == "notifications/subscriptions/acknowledged"
    )
    assert isinstance(ack, Notification) and ack.params is not None
    assert ack.params["_meta"]["io.modelcontextprotocol/subscriptionId"] == 20
    transport.send(call(21, "change_tools"))
    event = inbox.wait_for(
        lambda m: isinstance(m, Notification) and m.method == "notifications/tools/list_changed"
    )
    assert isinstance(event, Notification) and event.params is not None
    assert event.params["_meta"]["io.modelcontextprotocol/subscriptionId"] == 20
    assert not sender.done.is_set()
    cancel.cancel("the bridge replaced the listen stream")
    assert isinstance(sender.join(), Cancelled)


def test_an_input_required_round_passes_and_its_retry_completes(sdk):
    transport, inbox = sdk
    transport.send(call(30, "ask_name"))
    (first,) = inbox.messages
    assert isinstance(first, Response)
    assert first.result["resultType"] == "input_required"
    assert first.result["inputRequests"]["name"]["method"] == "elicitation/create"
    retry = call(31, "ask_name")
    assert retry.params is not None
    retry.params["inputResponses"] = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    retry.params["requestState"] = first.result["requestState"]
    transport.send(retry)
    assert text_of(inbox.messages[-1]) == "hello Ada"


def test_marked_arguments_go_as_headers_that_the_sdk_server_accepts(sdk):
    transport, inbox = sdk
    transport.send(Request(40, "tools/list", {"_meta": META}))
    inbox.clear()
    transport.send(call(41, "located", {"region": " eu wést\t", "count": 12, "flag": True}))
    assert [text_of(m) for m in inbox.messages] == [" eu wést\t|12|True"]


def test_a_header_mismatch_refreshes_the_tool_list_once_and_retries(sdk, log_lines):
    transport, inbox = sdk
    # A fresh transport has seen no tool list: its first call lacks the Mcp-Param headers.
    transport.send(call(42, "located", {"region": "north", "count": 3}))
    assert [text_of(m) for m in inbox.messages] == ["north|3|False"]
    assert any("refreshed the tool list" in line for line in log_lines.lines)


def test_a_json_body_over_the_limit_fails_alone(sdk_url):
    inbox = Inbox()
    transport = open_transport(sdk_url, inbox, max_response_bytes=2000)
    try:
        with pytest.raises(InvalidResponse) as info:
            transport.send(call(50, "big", {"size": 5000}))
        assert info.value.detail == "a response longer than 2000 bytes"
        transport.send(call(51, "big", {"size": 10}))
        assert text_of(inbox.messages[-1]) == "x" * 10
    finally:
        transport.close()


# ---------------------------------------------------------------------------------------------
# The scripted server: each bad answer fails alone
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    script = Script(
        tools=[
            {"name": "ok", "inputSchema": {"type": "object"}},
            {
                "name": "routed",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"},
                        "zone": {
                            "type": "object",
                            "properties": {"id": {"type": "integer", "x-mcp-header": "Zone"}},
                        },
                    },
                },
            },
            {
                "name": "number_marked",
                "inputSchema": {
                    "type": "object",
                    "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
                },
            },
            {
                "name": "items_marked",
                "inputSchema": {
                    "type": "object",
                    "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}},
                },
            },
        ]
    )
    with ScriptedServer(script) as server:
        yield server


@pytest.fixture
def scripted_transport(scripted: ScriptedServer) -> Iterator[tuple[HttpTransport, Inbox, ScriptedServer]]:
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, read_timeout=5.0)
    yield transport, inbox, scripted
    scripted.release.set()
    transport.close()


def then_ok(transport: HttpTransport, inbox: Inbox) -> None:
    inbox.clear()
    transport.send(call("after", "ok"))
    assert [text_of(m) for m in inbox.messages] == ["ok"]


@pytest.mark.parametrize("status", [500, 502, 503, 504, 501, 404, 400, 408])
def test_a_status_without_a_json_rpc_body_is_an_http_status_error(scripted_transport, status):
    transport, inbox, server = scripted_transport
    with pytest.raises(HttpStatusError) as info:
        transport.send(call(1, "status", {"status": status}))
    assert info.value.detail == f"HTTP status {status}"
    assert info.value.http_status == status
    assert info.value.cause == "invalid_response"
    assert info.value.transient is (status in (408, 500, 502, 503, 504))
    assert_no_url(str(info.value), server.url())
    then_ok(transport, inbox)


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_over_30_s_is_not_waited_for_and_the_error_names_the_wait(scripted_transport, status):
    transport, inbox, server = scripted_transport
    with pytest.raises(HttpStatusError) as info:
        transport.send(call(1, "retry_after", {"status": status, "seconds": 120}))
    assert info.value.http_status == status and info.value.retry_after == 120.0 and info.value.transient
    assert info.value.detail == f"HTTP status {status}, retry after 120 s"
    assert len(server.received) == 1  # sent once, no wait
    then_ok(transport, inbox)


#: ``Retry-After`` values that give no usable wait: the busy answer fails at once, named by its
#: status alone.
NO_USABLE_WAIT = {
    "superscript-digit": "\u00b2",
    "400-digits": "1" + "0" * 399,
    "5000-nines": "9" * 5000,
    "far-future-date": "Fri, 31 Dec 9999 23:59:59 GMT",
    "text": "soon",
}


@pytest.mark.parametrize("value", NO_USABLE_WAIT.values(), ids=NO_USABLE_WAIT.keys())
def test_a_retry_after_that_is_no_usable_wait_fails_at_once_with_the_status(scripted_transport, value):
    transport, inbox, server = scripted_transport
    with pytest.raises(HttpStatusError) as info:
        transport.send(call(1, "retry_after", {"status": 429, "seconds": value}))
    assert info.value.detail == "HTTP status 429"
    assert info.value.retry_after is None and info.value.transient
    assert len(server.received) == 1  # sent once, no wait
    then_ok(transport, inbox)


def test_a_retry_after_of_1_s_is_waited_for_once_then_the_request_goes_again(
    scripted: ScriptedServer, log_lines
):
    answers = iter(["busy", "ok"])

    def busy_then_ok(ex: Exchange) -> None:
        if next(answers) == "busy":
            ex.body(429, b"slow down\n", "text/plain", [("Retry-After", "1")])
        else:
            ex.text_result("ok")

    scripted.handler = busy_then_ok
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        transport.send(call(1, "ok"))
    finally:
        transport.close()
    assert [text_of(m) for m in inbox.messages] == ["ok"]
    assert [r.rpc_id for r in scripted.received] == [1, 1]
    assert any("HTTP status 429, thus the bridge waits 1 s" in line for line in log_lines.lines)


def test_a_second_busy_answer_fails_with_the_status_and_a_cancel_ends_the_wait(scripted: ScriptedServer):
    scripted.handler = lambda ex: ex.body(503, b"busy\n", "text/plain", [("Retry-After", "1")])
    transport = open_transport(scripted.url(), Inbox())
    try:
        with pytest.raises(HttpStatusError) as info:
            transport.send(call(1, "ok"))
        assert info.value.detail == "HTTP status 503, retry after 1 s"
        assert len(scripted.received) == 2  # once, then once more after the wait
        scripted.handler = lambda ex: ex.body(503, b"busy\n", "text/plain", [("Retry-After", "30")])
        cancel = CancelToken()
        sender = Sender(transport, call(2, "ok"), cancel)
        scripted.wait_requests(3)
        cancel.cancel("stop")
        assert isinstance(sender.join(5.0), Cancelled)
        assert len(scripted.received) == 3
    finally:
        transport.close()


def test_a_json_rpc_error_body_is_delivered_whatever_the_status(scripted_transport):
    transport, inbox, _server = scripted_transport
    transport.send(call(1, "rpc_error"))
    transport.send(call(2, "rpc_error_no_id"))
    first, second = inbox.messages
    assert isinstance(first, ErrorResponse) and first.id == 1 and first.error.code == -32603
    assert isinstance(second, ErrorResponse) and second.id == 2 and second.error.code == -32700


@pytest.mark.parametrize("tool", ["bad_json", "html", "redirect"])
def test_a_body_that_is_not_a_message_is_an_invalid_response(scripted_transport, tool):
    transport, inbox, server = scripted_transport
    with pytest.raises(InvalidResponse) as info:
        transport.send(call(1, tool))
    assert_no_url(str(info.value), server.url())
    if tool == "redirect":
        assert info.value.http_status == 307
        assert all(r.target == "/mcp" for r in server.received)
    then_ok(transport, inbox)


def test_an_sse_answer_with_comments_and_crlf_delivers_progress_then_the_result(scripted_transport):
    transport, inbox, _server = scripted_transport
    transport.send(call(1, "sse", progressToken=1))
    progress, result = inbox.messages
    assert isinstance(progress, Notification) and progress.method == "notifications/progress"
    assert text_of(result) == "ok"


def test_an_sse_event_over_the_limit_fails_alone(scripted: ScriptedServer):
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, max_response_bytes=1000)
    try:
        with pytest.raises(InvalidResponse) as info:
            transport.send(call(1, "big_event", {"size": 2000}))
        assert info.value.detail == "an event longer than 1000 bytes"
        then_ok(transport, inbox)
    finally:
        transport.close()


def test_the_limit_applies_to_each_event_and_not_to_the_whole_stream(scripted: ScriptedServer):
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, max_response_bytes=1000)
    try:
        transport.send(call(1, "many_events", {"count": 200, "size": 500}))
        assert len(inbox.messages) == 201
        assert isinstance(inbox.messages[-1], Response)
    finally:
        transport.close()


def test_a_json_body_over_the_limit_is_refused_by_its_content_length(scripted: ScriptedServer):
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, max_response_bytes=1000)
    try:
        with pytest.raises(InvalidResponse):
            transport.send(call(1, "big_json", {"size": 5000}))
        then_ok(transport, inbox)
    finally:
        transport.close()


def test_a_stalled_stream_fails_after_the_read_timeout(scripted: ScriptedServer):
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, read_timeout=0.3)
    try:
        # The read timeout ends the send, well before the stall would end.
        error = Sender(transport, call(1, "stall_body")).join(3.0)
        assert isinstance(error, TransportFailed) and error.detail == "read: no data in 300 ms"
        then_ok(transport, inbox)
    finally:
        scripted.release.set()
        transport.close()


def test_a_stalled_response_head_fails_after_the_read_timeout(scripted: ScriptedServer):
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, read_timeout=0.3)
    try:
        with pytest.raises(TransportFailed) as info:
            transport.send(call(1, "stall_head"))
        assert info.value.detail == "read: no data in 300 ms"
        then_ok(transport, inbox)
    finally:
        scripted.release.set()
        transport.close()


@pytest.mark.parametrize("tool", ["drop", "drop_stream"])
def test_a_dropped_connection_fails_the_request_alone(scripted_transport, tool):
    transport, inbox, server = scripted_transport
    with pytest.raises(TransportFailed) as info:
        transport.send(call(1, tool, progressToken=1))
    assert_no_url(str(info.value), server.url())
    then_ok(transport, inbox)


def test_cancel_during_a_stalled_body_closes_the_stream_at_once(scripted_transport):
    transport, inbox, server = scripted_transport
    cancel = CancelToken()
    sender = Sender(transport, call(1, "stall_body"), cancel)
    server.wait_stalls(1)
    assert not sender.done.is_set()
    cancel.cancel("stop")
    assert isinstance(sender.join(CANCEL_BOUND), Cancelled)
    then_ok(transport, inbox)


def test_close_aborts_the_requests_in_flight(scripted: ScriptedServer):
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    sender = Sender(transport, call(1, "stall_head"))
    scripted.wait_stalls(1)
    # The close waits up to its grace for the requests in flight: the abort, not the grace, ends this one.
    closer = threading.Thread(target=transport.close, kwargs={"grace": WAIT}, name="test-close")
    closer.start()
    error = sender.join(CANCEL_BOUND)
    closer.join(WAIT)
    assert not closer.is_alive(), "close did not return"
    assert isinstance(error, Closed)
    assert isinstance(error.__cause__, McpError)  # the read of the head that the close broke
    with pytest.raises(Closed):
        transport.send(call(2, "ok"))
    scripted.release.set()


def test_kill_aborts_the_requests_in_flight_without_waiting(scripted: ScriptedServer):
    transport = open_transport(scripted.url(), Inbox())
    sender = Sender(transport, call(1, "stall_head"))
    scripted.wait_requests(1)
    transport.kill()
    assert isinstance(sender.join(CANCEL_BOUND), Closed)
    transport.close()
    scripted.release.set()


def test_a_message_that_is_not_json_or_a_send_before_start_is_refused(scripted: ScriptedServer):
    transport = HttpTransport(scripted.url())
    try:
        with pytest.raises(NotConnected):
            transport.send(call(1, "ok"))
        transport.start(Inbox(), lambda error: None, lambda error: None)
        with pytest.raises(InvalidRequest):
            transport.send(call(2, "ok", {"x": float("nan")}))
        assert scripted.received == []
    finally:
        transport.close()


def test_a_refused_connection_is_a_transport_failure_without_the_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/secret-path"
    transport = open_transport(url, Inbox())
    try:
        with pytest.raises(TransportFailed) as info:
            transport.send(call(1, "ok"))
        assert info.value.detail == (
            f"connect: nothing listens at the host 127.0.0.1, port {port} (the connection was refused)"
        )
        assert_no_url(str(info.value), url)
    finally:
        transport.close()


def test_json_answers_reuse_one_keep_alive_connection(scripted_transport):
    transport, inbox, server = scripted_transport
    for request_id in range(5):
        transport.send(call(request_id, "ok"))
    assert len(inbox.messages) == 5
    assert server.connections == 1


def test_concurrent_requests_each_get_their_own_answer(scripted_transport):
    transport, inbox, _server = scripted_transport
    senders = [Sender(transport, call(n, "sse" if n % 2 else "ok", progressToken=n)) for n in range(16)]
    assert all(s.join() is None for s in senders)
    answered = sorted(m.id for m in inbox.messages if isinstance(m, Response))
    assert answered == list(range(16))


def test_32_concurrent_calls_reuse_their_pooled_connections(scripted: ScriptedServer):
    together = threading.Barrier(32)

    def all_at_once(ex: Exchange) -> None:
        together.wait(WAIT)  # each answer waits until 32 requests are in flight
        ex.text_result("ok")

    scripted.handler = all_at_once
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        for wave in range(3):
            senders = [Sender(transport, call(wave * 100 + n, "ok")) for n in range(32)]
            assert all(s.join() is None for s in senders)
    finally:
        transport.close()
    assert len([m for m in inbox.messages if isinstance(m, Response)]) == 96
    assert scripted.connections == 32


def test_a_connection_that_the_server_closed_while_idle_is_not_used_again(scripted: ScriptedServer):
    closed = threading.Event()

    def answer_then_close(ex: Exchange) -> None:
        ex.text_result("ok")
        ex.sock.shutdown(socket.SHUT_RDWR)
        ex.keep_alive = False
        closed.set()

    scripted.handler = answer_then_close
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        transport.send(call(1, "ok"))
        assert closed.wait(WAIT)
        transport.send(call(2, "ok"))  # the closed connection is dropped, a new one answers
    finally:
        transport.close()
    assert [text_of(m) for m in inbox.messages] == ["ok", "ok"]
    assert scripted.connections == 2


def _raw_answer(ex: Exchange, head: list[tuple[str, str]], body: bytes, *, close: bool = False) -> None:
    ex.head(200, head)
    ex.send(body)
    if close:
        ex.keep_alive = False


def _result_bytes(ex: Exchange, text: str) -> bytes:
    result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": ex.request.rpc_id, "result": result}).encode()


def test_chunked_gzip_and_close_delimited_bodies_are_read_whole(scripted: ScriptedServer):
    def framing(ex: Exchange) -> None:
        tool = ex.request.params.get("name")
        body = _result_bytes(ex, f"{tool} " + "y" * 70000)
        if tool == "chunked":
            pieces = [body[i : i + 4000] for i in range(0, len(body), 4000)]
            framed = (
                b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\nX-Trailer: 1\r\n\r\n"
            )
            _raw_answer(ex, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], framed)
        elif tool == "gzip":
            packed = gzip.compress(body)
            head = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]
            _raw_answer(ex, [*head, ("Content-Length", str(len(packed)))], packed)
        else:
            head = [("Content-Type", "application/json"), ("Connection", "close")]
            _raw_answer(ex, head, body, close=True)
        if tool != "until_close":
            return

    scripted.handler = framing
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        for n, tool in enumerate(["chunked", "gzip", "until_close", "chunked"]):
            transport.send(call(n, tool))
    finally:
        transport.close()
    texts = [text_of(m) for m in inbox.messages]
    assert [t.split()[0] for t in texts] == ["chunked", "gzip", "until_close", "chunked"]
    assert all(t.endswith("y" * 70000) for t in texts)
    assert scripted.connections == 2  # only the answer without a length ended its connection


def test_a_compressed_body_is_limited_by_its_decoded_size(scripted: ScriptedServer):
    def bomb(ex: Exchange) -> None:
        packed = gzip.compress(b" " * 5_000_000 + _result_bytes(ex, "ok"))
        head = [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]
        _raw_answer(ex, [*head, ("Content-Length", str(len(packed)))], packed)

    scripted.handler = bomb
    transport = open_transport(scripted.url(), Inbox(), max_response_bytes=1_000_000)
    try:
        with pytest.raises(InvalidResponse) as info:
            transport.send(call(1, "ok"))
        assert info.value.detail == "a response longer than 1000000 bytes"
    finally:
        transport.close()


def test_an_sse_answer_in_chunks_delivers_its_events_and_keeps_its_connection(scripted: ScriptedServer):
    def chunked_sse(ex: Exchange) -> None:
        ex.head(200, [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")])
        progress = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1},
        }
        for event in (progress, json.loads(_result_bytes(ex, "done"))):
            data = b"data: " + json.dumps(event).encode() + b"\n\n"
            end = b"0\r\n\r\n" if "result" in event else b""  # the stream ends with the response
            ex.send(b"%x\r\n%s\r\n%s" % (len(data), data, end))

    scripted.handler = chunked_sse
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        transport.send(call(7, "sse", progressToken=1))
        transport.send(call(8, "sse", progressToken=1))
    finally:
        transport.close()
    kinds = [m.method if isinstance(m, Notification) else text_of(m) for m in inbox.messages]
    assert kinds == ["notifications/progress", "done"] * 2
    assert scripted.connections == 1


def test_an_event_with_bytes_that_are_not_utf8_is_read_with_replacement_characters(scripted: ScriptedServer):
    def bad_bytes(ex: Exchange) -> None:
        ex.start_sse()
        text = _result_bytes(ex, "caf-XX-e").replace(b"-XX-", b"\xff")
        ex.send(b"data: " + text + b"\n\n")

    scripted.handler = bad_bytes
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        transport.send(call(1, "sse"))
    finally:
        transport.close()
    assert [text_of(m) for m in inbox.messages] == ["caf\ufffde"]


def test_a_header_value_with_a_line_break_is_refused_before_sending(scripted: ScriptedServer):
    class BadAuthorizer(RecordingAuthorizer):
        def headers(self) -> dict[str, str]:
            return {"Authorization": "Bearer a\r\nX-Injected: 1"}

    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, authorizer=BadAuthorizer(retry=False))
    try:
        with pytest.raises(InvalidRequest) as info:
            transport.send(call(1, "ok"))
        assert info.value.detail == "a header of the request cannot be sent over HTTP"
        # The cause is kept, without the value it would quote (a header value may be a token).
        assert isinstance(info.value.__cause__, ValueError)
        told = "".join(traceback.format_exception(info.value))
        assert "Bearer" not in told and "X-Injected" not in told
    finally:
        transport.close()
    assert scripted.received == []


def test_a_notification_is_not_sent_over_http(scripted_transport):
    transport, inbox, server = scripted_transport
    transport.send(Notification("notifications/cancelled", {"requestId": 1}))
    transport.send(call(2, "ok"))
    assert [r.rpc_method for r in server.received] == ["tools/call"]


# ---------------------------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------------------------


def test_each_post_carries_the_protocol_headers_and_the_user_headers(scripted: ScriptedServer):
    inbox = Inbox()
    secret = "s3cr\udcc3\udca9t"  # the bytes b"s3cr\xc3\xa9t" of an environment variable
    transport = open_transport(scripted.url(), inbox, headers=[("X-Api-Key", secret), ("X-Team", "blue")])
    try:
        transport.send(call(1, "ok"))
        transport.send(Request(2, "prompts/get", {"name": "p", "_meta": META}))
        transport.send(Request(3, "resources/read", {"uri": "file:///ü.txt", "_meta": META}))
        transport.send(Request(4, "tools/list", {"_meta": META}))
        for number, method in enumerate(("tasks/get", "tasks/update", "tasks/cancel"), start=5):
            transport.send(Request(number, method, {"taskId": f"task-{number}", "_meta": META}))
    finally:
        transport.close()
    first, prompt, read, listing, *task_requests = scripted.received
    assert first.header("Content-Type") == "application/json"
    assert first.header("Accept") == "application/json, text/event-stream"
    assert first.header("MCP-Protocol-Version") == "2026-07-28"
    assert first.header("Mcp-Method") == "tools/call"
    assert first.header("Mcp-Name") == "ok"
    assert first.header("X-Api-Key") == "s3cr\xc3\xa9t"  # latin-1 view of the raw bytes
    assert first.header("X-Team") == "blue"
    assert "cookie" not in first.header_names() and "authorization" not in first.header_names()
    assert prompt.header("Mcp-Name") == "p"
    expected = "=?base64?" + base64.b64encode("file:///ü.txt".encode()).decode() + "?="
    assert read.header("Mcp-Name") == expected
    assert listing.header("Mcp-Method") == "tools/list" and listing.header("Mcp-Name") is None
    # The requests of the Tasks extension name their task, for the routing of a load balancer.
    assert [(r.header("Mcp-Method"), r.header("Mcp-Name")) for r in task_requests] == [
        ("tasks/get", "task-5"),
        ("tasks/update", "task-6"),
        ("tasks/cancel", "task-7"),
    ]


def test_marked_arguments_become_mcp_param_headers_with_the_base64_form(scripted_transport):
    transport, inbox, server = scripted_transport
    transport.send(Request(1, "tools/list", {"_meta": META}))
    transport.send(call(2, "routed", {"region": "Zürich", "zone": {"id": 42}}))
    transport.send(call(3, "routed", {"region": "plain text", "zone": None}))
    second, third = server.received[1:]
    assert (
        second.header("Mcp-Param-Region") == "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="
    )
    assert second.header("Mcp-Param-Zone") == "42"
    assert third.header("Mcp-Param-Region") == "plain text"
    assert third.header("Mcp-Param-Zone") is None


def test_tools_with_invalid_markings_are_removed_from_the_list_with_a_warning(scripted_transport, log_lines):
    transport, inbox, _server = scripted_transport
    transport.send(Request(1, "tools/list", {"_meta": META}))
    (listing,) = inbox.messages
    assert isinstance(listing, Response)
    assert [t["name"] for t in listing.result["tools"]] == ["ok", "routed"]
    # The server repeats them with each list: the first names its tool, the close counts the rest.
    transport.close()
    warnings = [line for line in log_lines.lines if "x-mcp-header" in line]
    assert len(warnings) == 2
    assert "number_marked" in warnings[0]
    assert warnings[1].endswith("that is not valid since the last such line: 1 more")


def test_the_header_mismatch_retry_happens_once(scripted: ScriptedServer):
    calls = []

    def mismatch(ex: Exchange) -> None:
        calls.append(ex.request.rpc_method)
        if ex.request.rpc_method == "tools/list":
            ex.result({"resultType": "complete", "tools": [], "nextCursor": None})
        else:
            ex.error(HEADER_MISMATCH, "Mcp-Param-Region header is missing", 400)

    scripted.handler = mismatch
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox)
    try:
        transport.send(call(1, "routed", {"region": "x"}))
    finally:
        transport.close()
    assert calls == ["tools/call", "tools/list", "tools/call"]
    (answer,) = inbox.messages
    assert isinstance(answer, ErrorResponse) and answer.id == 1 and answer.error.code == HEADER_MISMATCH


class RecordingAuthorizer:
    def __init__(self, retry: bool) -> None:
        self.retry = retry
        self.token = "first-token"
        self.challenges: list[tuple[int, str | None]] = []

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def on_challenge(self, status: int, www_authenticate: str | None) -> bool:
        self.challenges.append((status, www_authenticate))
        self.token = "second-token"
        return self.retry


def _auth_script(ex: Exchange) -> None:
    if ex.request.header("Authorization") != "Bearer second-token":
        ex.body(401, b"", "text/plain", [("WWW-Authenticate", 'Bearer resource_metadata="x"')])
    else:
        ex.text_result("ok")


@pytest.mark.parametrize("retry", [True, False])
def test_a_401_goes_to_the_authorizer_which_may_ask_for_one_retry(scripted: ScriptedServer, retry):
    scripted.handler = _auth_script
    authorizer = RecordingAuthorizer(retry)
    inbox = Inbox()
    transport = open_transport(scripted.url(), inbox, authorizer=authorizer)
    try:
        if retry:
            transport.send(call(1, "ok"))
            assert text_of(inbox.messages[0]) == "ok"
        else:
            with pytest.raises(HttpStatusError) as info:
                transport.send(call(1, "ok"))
            assert info.value.http_status == 401
    finally:
        transport.close()
    assert authorizer.challenges == [(401, 'Bearer resource_metadata="x"')]
    assert len(scripted.received) == (2 if retry else 1)


def test_no_log_line_holds_the_url_or_a_header_value(scripted: ScriptedServer, log_lines):
    inbox = Inbox()
    url = scripted.url(path="/mcp/tenant-secret")
    transport = open_transport(url, inbox, headers=[("X-Api-Key", "marker-value-123")])
    try:
        transport.send(Request(1, "tools/list", {"_meta": META}))
        transport.send(call(2, "sse", progressToken=2))
        with pytest.raises(McpError):
            transport.send(call(3, "status", {"status": 503}))
    finally:
        transport.close()
    assert log_lines.lines
    for line in log_lines.lines:
        assert_no_url(line, url)
        assert "marker-value-123" not in line and "tenant-secret" not in line


# ---------------------------------------------------------------------------------------------
# TLS and proxies
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_server(ca: trustme.CA, *names: str) -> ScriptedServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names).configure_cert(context)
    return ScriptedServer(Script(), ssl_context=context)


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def test_https_works_with_the_ca_of_ca_file(ca, ca_file):
    with tls_server(ca, "127.0.0.1", "localhost") as server:
        inbox = Inbox()
        transport = open_transport(server.url("localhost"), inbox, ca_file=ca_file)
        try:
            transport.send(call(1, "sse", progressToken=1))
            transport.send(call(2, "ok"))
        finally:
            transport.close()
    assert [text_of(m) for m in inbox.messages if isinstance(m, Response)] == ["ok", "ok"]


def test_cancel_of_an_https_call_shuts_its_tls_connection_at_once(ca, ca_file):
    with tls_server(ca, "127.0.0.1", "localhost") as server:
        inbox = Inbox()
        transport = open_transport(server.url("localhost"), inbox, ca_file=ca_file)
        try:
            transport.send(call(1, "ok"))  # a pooled TLS connection
            for stalls, tool in enumerate(("stall_head", "stall_body"), start=1):
                cancel = CancelToken()
                sender = Sender(transport, call(tool, tool), cancel)
                server.wait_stalls(stalls)
                assert not sender.done.is_set()
                cancel.cancel("stop")
                assert isinstance(sender.join(CANCEL_BOUND), Cancelled)
            inbox.clear()
            transport.send(call(2, "ok"))
            assert [text_of(m) for m in inbox.messages] == ["ok"]
        finally:
            server.release.set()
            transport.close()


def test_an_untrusted_certificate_is_a_transport_failure(ca):
    with tls_server(ca, "127.0.0.1") as server:
        transport = open_transport(server.url(), Inbox())
        try:
            with pytest.raises(TransportFailed) as info:
                transport.send(call(1, "ok"))
        finally:
            transport.close()
    assert info.value.detail == "TLS: the certificate of the server is not trusted"
    assert_no_url(str(info.value), server.url())


def test_a_certificate_for_another_name_is_a_transport_failure(ca, ca_file):
    with tls_server(ca, "other.test") as server:
        transport = open_transport(server.url(), Inbox(), ca_file=ca_file)
        try:
            with pytest.raises(TransportFailed) as info:
                transport.send(call(1, "ok"))
        finally:
            transport.close()
    assert info.value.detail == "TLS: the certificate of the server is not for its host name"


def test_an_unusable_ca_file_is_refused_without_its_path(tmp_path):
    empty = tmp_path / "empty.pem"
    empty.write_text("")
    for path, detail in [
        (tmp_path / "missing.pem", "the file does not exist"),
        (empty, "the file holds no PEM certificate that can be used"),
        (tmp_path, "the file cannot be read: Is a directory"),
    ]:
        with pytest.raises(CaFileError) as info:
            tls_context(str(path))
        assert info.value.detail == detail
        assert info.value.cause == "connect_failed"
        assert str(tmp_path) not in str(info.value)


class ConnectProxy:
    """A proxy on loopback that maps ``fixture.test`` to 127.0.0.1: ``CONNECT`` tunnels, and
    plain requests in absolute form; over TLS with ``ssl_context``."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.ssl_context = ssl_context
        self.heads: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._accepter = threading.Thread(target=self._accept, name="test-proxy", daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(client)
            thread = threading.Thread(
                target=self._tunnel, args=(client,), name="test-proxy-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _tunnel(self, client: socket.socket) -> None:
        if self.ssl_context is not None:
            try:
                client = self.ssl_context.wrap_socket(client, server_side=True)
            except (ssl.SSLError, OSError):
                client.close()
                return
            self._socks.append(client)
        head = b""
        while b"\r\n\r\n" not in head:
            data = client.recv(4096)
            if not data:
                client.close()
                return
            head += data
        self.heads.append(head)
        method, target = head.split(b" ")[:2]
        tunnel = method == b"CONNECT"
        authority = target.decode() if tunnel else target.decode().split("/")[2]
        host, _, port = authority.rpartition(":")
        if host != "fixture.test":
            client.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
            client.close()
            return
        upstream = socket.create_connection(("127.0.0.1", int(port)), timeout=WAIT)
        self._socks.append(upstream)
        if tunnel:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream.sendall(head)  # a plain request goes on as it came
        pair = {client: upstream, upstream: client}
        try:
            while True:
                # Bytes that TLS decrypted already do not wake select.
                readable = [s for s in pair if isinstance(s, ssl.SSLSocket) and s.pending()]
                if not readable:
                    readable, _, _ = select.select(list(pair), [], [], WAIT)
                if not readable:
                    return
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pair[sock].sendall(data)
        except (OSError, ValueError):  # ValueError: close() took the socket away
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        for sock in self._socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._accepter.join(WAIT)
        for thread in self._threads:
            thread.join(WAIT)


def test_an_https_upstream_goes_through_the_connect_proxy_of_https_proxy(ca, ca_file):
    proxy = ConnectProxy()
    try:
        with tls_server(ca, "fixture.test") as server:
            env = {
                "HTTPS_PROXY": f"http://proxy-user:pa%3Ass@127.0.0.1:{proxy.port}",
                "NO_PROXY": "localhost,127.0.0.1,.internal.example",
            }
            inbox = Inbox()
            transport = open_transport(
                server.url("fixture.test"), inbox, ca_file=ca_file, env=env, headers=[("X-Api-Key", "k-1")]
            )
            try:
                transport.send(call(1, "sse", progressToken=1))
                transport.send(call(2, "ok"))
            finally:
                transport.close()
    finally:
        proxy.close()
    assert [text_of(m) for m in inbox.messages if isinstance(m, Response)] == ["ok", "ok"]
    assert proxy.heads
    head = proxy.heads[0].decode("latin-1")
    assert head.startswith(f"CONNECT fixture.test:{server.port} HTTP/1.")
    expected = base64.b64encode(b"proxy-user:pa:ss").decode()
    assert f"Proxy-Authorization: Basic {expected}" in head
    assert "k-1" not in head and "Mcp-Method" not in head
    assert all(r.header("Proxy-Authorization") is None for r in server.received)
    assert all(r.header("X-Api-Key") == "k-1" for r in server.received)


def test_an_https_upstream_goes_through_a_proxy_that_speaks_tls_itself(ca, ca_file):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    proxy = ConnectProxy(context)
    try:
        with tls_server(ca, "fixture.test") as server:
            env = {"HTTPS_PROXY": f"https://u:p@127.0.0.1:{proxy.port}"}
            inbox = Inbox()
            transport = open_transport(server.url("fixture.test"), inbox, ca_file=ca_file, env=env)
            try:
                transport.send(call(1, "sse", progressToken=1))
                transport.send(call(2, "ok"))
            finally:
                transport.close()
    finally:
        proxy.close()
    assert [text_of(m) for m in inbox.messages if isinstance(m, Response)] == ["ok", "ok"]
    # The SSE answer of the scripted server ends its connection: each call has its own tunnel.
    assert [h.split(b" ")[0] for h in proxy.heads] == [b"CONNECT", b"CONNECT"]
    assert all(r.header("Proxy-Authorization") is None for r in server.received)


def test_an_http_upstream_goes_to_the_proxy_in_absolute_form(scripted: ScriptedServer):
    proxy = ConnectProxy()
    port = int(scripted.url().split(":")[2].split("/")[0])
    try:
        env = {"HTTP_PROXY": f"http://user:secret@127.0.0.1:{proxy.port}"}
        inbox = Inbox()
        transport = open_transport(f"http://fixture.test:{port}/mcp?x=1", inbox, env=env)
        try:
            transport.send(call(1, "ok"))
            transport.send(call(2, "ok"))
        finally:
            transport.close()
    finally:
        proxy.close()
    assert [text_of(m) for m in inbox.messages] == ["ok", "ok"]
    head = proxy.heads[0].decode("latin-1")
    assert head.startswith(f"POST http://fixture.test:{port}/mcp?x=1 HTTP/1.1\r\n")
    assert f"Host: fixture.test:{port}" in head
    assert "Proxy-Authorization: Basic " + base64.b64encode(b"user:secret").decode() in head


def test_a_loopback_upstream_never_goes_through_the_proxy(scripted: ScriptedServer):
    inbox = Inbox()
    env = {"HTTP_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9"}
    transport = open_transport(scripted.url(), inbox, env=env)
    try:
        transport.send(call(1, "ok"))
    finally:
        transport.close()
    assert text_of(inbox.messages[0]) == "ok"


@pytest.mark.parametrize(
    ("url", "env", "expected"),
    [
        ("https://mcp.example.com/mcp", {"HTTPS_PROXY": "http://p:3128"}, ("HTTPS_PROXY", "http://p:3128")),
        (
            "https://mcp.example.com/mcp",
            {"https_proxy": "p:1", "HTTPS_PROXY": "http://q:2"},
            ("https_proxy", "http://p:1"),
        ),
        ("https://mcp.example.com/mcp", {"ALL_PROXY": "http://a:1"}, ("ALL_PROXY", "http://a:1")),
        ("https://mcp.example.com/mcp", {"HTTP_PROXY": "http://h:1"}, None),
        ("http://example.com/mcp", {"HTTP_PROXY": "http://h:1"}, ("HTTP_PROXY", "http://h:1")),
        ("https://localhost:8443/mcp", {"HTTPS_PROXY": "http://p:1"}, None),
        ("https://api.localhost/mcp", {"HTTPS_PROXY": "http://p:1"}, ("HTTPS_PROXY", "http://p:1")),
        ("https://127.8.9.10/mcp", {"HTTPS_PROXY": "http://p:1"}, None),
        ("https://[::1]:9/mcp", {"HTTPS_PROXY": "http://p:1"}, None),
        ("https://mcp.example.com/mcp", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"}, None),
        ("https://mcp.example.com/mcp", {"HTTPS_PROXY": "http://p:1", "no_proxy": ".example.com"}, None),
        ("https://mcp.example.com/mcp", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"}, None),
        (
            "https://notexample.com/mcp",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"},
            ("HTTPS_PROXY", "http://p:1"),
        ),
        ("https://10.1.2.3/mcp", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "10.0.0.0/8"}, None),
        (
            "https://mcp.example.com:8443/",
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "mcp.example.com:443"},
            ("HTTPS_PROXY", "http://p:1"),
        ),
        ("https://mcp.example.com/", {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "mcp.example.com:443"}, None),
    ],
)
def test_the_proxy_follows_the_environment_rules(url, env, expected):
    assert proxy_for(url, env) == expected


def test_a_socks_proxy_is_refused_naming_the_variable():
    with pytest.raises(ConnectFailed) as info:
        HttpTransport("https://mcp.example.com/mcp", env={"all_proxy": "socks5://127.0.0.1:1080"})
    assert info.value.detail == "the proxy of ALL_PROXY does not use http or https"


def test_a_url_that_is_not_http_is_refused():
    with pytest.raises(ConnectFailed):
        HttpTransport("ftp://example.com/mcp")


# ---------------------------------------------------------------------------------------------
# The pure helpers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ("inner space ok", "inner space ok"),
        ("", ""),
        (" lead", "=?base64?IGxlYWQ=?="),
        ("trail ", "=?base64?dHJhaWwg?="),
        ("tab\there", "=?base64?dGFiCWhlcmU=?="),
        ("line\r\nbreak", "=?base64?bGluZQ0KYnJlYWs=?="),
        ("日本", "=?base64?5pel5pys?="),
        ("=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="),
    ],
)
def test_header_values_use_the_base64_form_when_not_plain_visible_ascii(value, expected):
    assert encode_header_value(value) == expected


def test_markings_are_found_through_properties_only():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "A"},
            "nested": {"type": "object", "properties": {"b": {"type": "boolean", "x-mcp-header": "B-2"}}},
        },
    }
    assert header_markings(schema) == {("a",): "A", ("nested", "b"): "B-2"}
    assert header_markings({"type": "object"}) == {}
    assert header_markings(None) == {}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "number", "x-mcp-header": "A"}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"], "x-mcp-header": "A"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "has space"}}},
        {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": 7}}},
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"},
            },
        },
        {"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]},
        {"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "D"}}},
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_invalid_markings_are_refused(schema):
    with pytest.raises(InvalidMarking):
        header_markings(schema)


def test_param_headers_render_integers_and_booleans_as_json_and_skip_absent_values():
    markings = {("s",): "S", ("i",): "I", ("b",): "B", ("n",): "N", ("deep", "x"): "X"}
    arguments = {"s": "v", "i": -3, "b": False, "n": None}
    assert param_headers(markings, arguments) == [
        ("Mcp-Param-S", "v"),
        ("Mcp-Param-I", "-3"),
        ("Mcp-Param-B", "false"),
    ]


def test_filter_tools_keeps_a_result_without_tools_unchanged():
    assert filter_tools({"resultType": "complete"}) == ({"resultType": "complete"}, {}, [])


def test_a_call_whose_connection_closes_after_the_post_runs_once_and_fails_as_transport_failed() -> None:
    def close_after_reading(ex: Any) -> None:
        ex.close()  # the server read the whole request, maybe ran it, and answers nothing

    with ScriptedServer(close_after_reading) as server:
        transport = open_transport(server.url(), Inbox(), read_timeout=5.0)
        try:
            for number in range(3):
                with pytest.raises(TransportFailed) as info:
                    transport.send(call(f"c{number}", "ok"))
                assert info.value.cause == "transport_failed"
                assert info.value.detail == "the connection closed before the end of the response"
                assert isinstance(info.value.__cause__, Exception)  # the chain is kept
        finally:
            transport.close()
        assert [r.rpc_id for r in server.received] == ["c0", "c1", "c2"]  # each exactly once


def test_a_call_on_a_reused_connection_that_the_server_closes_is_not_sent_again() -> None:
    answered: set[object] = set()

    def close_on_reuse(ex: Any) -> None:
        # The second request of each connection meets a server that closes it without an answer.
        if ex.sock in answered:
            ex.close()
            return
        answered.add(ex.sock)
        ex.text_result("ok")

    with ScriptedServer(close_on_reuse) as server:
        inbox = Inbox()
        transport = open_transport(server.url(), inbox, read_timeout=5.0)
        try:
            transport.send(call("c0", "ok"))
            with pytest.raises(TransportFailed):
                transport.send(call("c1", "ok"))
            transport.send(call("c2", "ok"))
        finally:
            transport.close()
    assert [text_of(m) for m in inbox.messages] == ["ok", "ok"]
    assert [r.rpc_id for r in server.received] == ["c0", "c1", "c2"]


def test_a_list_whose_connection_broke_is_sent_once_more_with_a_new_id(log_lines) -> None:
    seen: list[Any] = []

    def break_the_first(ex: Any) -> None:
        seen.append(ex.request.rpc_id)
        if len(seen) == 1:
            ex.close()
            return
        ex.result({"resultType": "complete", "tools": []})

    with ScriptedServer(break_the_first) as server:
        inbox = Inbox()
        transport = open_transport(server.url(), inbox, read_timeout=5.0)
        try:
            transport.send(Request("L1", "tools/list", {"_meta": META}))
        finally:
            transport.close()
    assert seen[0] == "L1" and isinstance(seen[1], str) and seen[1] != "L1" and len(seen) == 2
    assert [m.id for m in inbox.messages] == ["L1"]
    assert any("tools/list: the connection broke" in line for line in log_lines.lines)
