"""The HTTP wire (urllib3 under both transports) against scripted bad servers on 127.0.0.1.

Each case is a server that misbehaves in one way; the request fails alone with a named
error (or succeeds when the framing is valid), and the next request still works.
"""

from __future__ import annotations

import contextlib
import email.utils
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import urllib3
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpbridge.mcp.errors import InvalidResponse
from mcpbridge.mcp.jsonrpc import Response, serialize_parts
from mcpbridge.mcp.transports.http import HttpTransport
from mcpbridge.mcp.transports.httpwire import (
    MAX_USABLE_RETRY_AFTER,
    ControlScan,
    ReadTimedOut,
    StreamBroken,
    content_length,
    retry_after,
)
from tests.conftest import WAIT
from tests.mcp.test_http_transport import Inbox, Sender, call, open_transport, text_of
from tests.peers.scripted_http import Exchange, ScriptedServer


def _result(ex: Exchange, text: str) -> bytes:
    result = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    return json.dumps({"jsonrpc": "2.0", "id": ex.request.rpc_id, "result": result}).encode()


def _misbehave(ex: Exchange) -> None:
    tool = ex.request.params.get("name")
    body = _result(ex, f"{tool} " + "w" * 50_000)
    json_head = [("Content-Type", "application/json")]
    if tool == "reset_in_body":
        ex.head(200, [*json_head, ("Content-Length", str(len(body)))])
        ex.send(body[:1000])
        ex.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        ex.close()
    elif tool == "short_body":
        ex.head(200, [*json_head, ("Content-Length", str(len(body)))])
        ex.send(body[:1000])
        ex.close()
    elif tool in ("length_superscript", "length_digits"):
        # Not a length: the body ends with the connection.
        length = "\u00b2" if tool == "length_superscript" else "9" * 400
        ex.head(200, [*json_head, ("Content-Length", length), ("Connection", "close")])
        ex.send(body)
        ex.close()
    elif tool == "stall_in_body":
        ex.head(200, [*json_head, ("Content-Length", str(len(body)))])
        ex.send(body[:1000])
        ex.wait_released()
        ex.close()
    elif tool == "bad_chunk_size":
        ex.head(200, [*json_head, ("Transfer-Encoding", "chunked")])
        ex.send(b"zz\r\n" + body[:10] + b"\r\n0\r\n\r\n")
        ex.keep_alive = False
    elif tool == "short_chunk":
        ex.head(200, [*json_head, ("Transfer-Encoding", "chunked")])
        ex.send(b"%x\r\n%s" % (len(body) + 500, body))
        ex.close()
    elif tool == "gzip":
        packed = gzip.compress(body)
        ex.head(200, [*json_head, ("Content-Encoding", "gzip"), ("Content-Length", str(len(packed)))])
        ex.send(packed)
    elif tool == "bad_gzip":
        packed = b"\x1f\x8b\x08\x00" + b"not gzip at all" * 10
        ex.head(200, [*json_head, ("Content-Encoding", "gzip"), ("Content-Length", str(len(packed)))])
        ex.send(packed)
    elif tool == "interim":
        ex.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        ex.send(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        ex.send(b"HTTP/1.1 102 Processing\r\n\r\n")
        ex.head(200, [*json_head, ("Content-Length", str(len(body)))])
        ex.send(body)
    elif tool in LONG_BODIES:
        text = "long " + "L" * (1024 * 1024)
        long_body = LONG_BODIES[tool](_result(ex, text))
        if tool == "long_chunked":
            ex.head(200, [*json_head, ("Transfer-Encoding", "chunked")])
            for start in range(0, len(long_body), 100_000):
                piece = long_body[start : start + 100_000]
                ex.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            ex.send(b"0\r\n\r\n")
        elif tool == "long_cut":
            ex.head(200, [*json_head, ("Content-Length", str(len(long_body) + 10))])
            ex.send(long_body)
            ex.close()
        else:
            ex.head(200, [*json_head, ("Content-Length", str(len(long_body)))])
            ex.send(long_body)
    elif tool == "huge":
        size = int(ex.request.params["arguments"]["size"])
        ex.head(200, [*json_head, ("Content-Length", str(size))])
        ex.close()  # refused by its length: nothing of the body is needed
    elif tool == "huge_chunked":
        ex.head(200, [*json_head, ("Transfer-Encoding", "chunked")])
        piece = b"x" * (1024 * 1024)
        try:
            while True:
                ex.send(b"%x\r\n%s\r\n" % (len(piece), piece))
        except OSError:
            ex.keep_alive = False
    else:
        ex.text_result("ok")


#: Bodies of more than LONG_BODY bytes: read in pieces into one buffer.
LONG_BODIES = {
    "long": lambda body: body + b"\r\n \n",  # white space with control characters at the end
    "long_chunked": lambda body: body + b"\n",
    "long_cut": lambda body: body,
    "long_pretty": lambda body: body.replace(b'{"jsonrpc"', b'{\n\t"jsonrpc"', 1) + b"\n",
    "long_control": lambda body: body.replace(b"LLLL", b"L\x01LL", 1) + b"\n",
}


@pytest.fixture
def bad() -> Iterator[tuple[HttpTransport, Inbox, ScriptedServer]]:
    with ScriptedServer(_misbehave) as server:
        inbox = Inbox()
        transport = open_transport(server.url(), inbox, read_timeout=5.0)
        try:
            yield transport, inbox, server
        finally:
            server.release.set()
            transport.close()


def _then_ok(transport: HttpTransport, inbox: Inbox) -> None:
    inbox.clear()
    transport.send(call("after", "ok"))
    assert [text_of(m) for m in inbox.messages] == ["ok"]


@pytest.mark.parametrize(
    ("tool", "detail"),
    [
        ("reset_in_body", "the connection was reset"),
        ("short_body", "the connection closed before the end of the response"),
        # http.client reads a chunk size that is not hex as the end of the body.
        ("bad_chunk_size", "the connection closed before the end of the response"),
        ("short_chunk", "the connection closed before the end of the response"),
    ],
)
def test_a_broken_body_fails_the_call_alone_with_a_named_error(bad, tool, detail):
    transport, inbox, server = bad
    with pytest.raises(StreamBroken) as info:
        transport.send(call(1, tool))
    assert info.value.cause == "transport_failed"
    assert info.value.detail in (detail, "the connection was reset")
    if tool != "reset_in_body":
        assert info.value.detail == detail
    assert isinstance(info.value.__cause__, urllib3.exceptions.HTTPError)  # the error of urllib3 is chained
    assert [r.rpc_id for r in server.received] == [1]  # a tools/call is never sent again
    _then_ok(transport, inbox)


def test_a_content_length_that_is_not_a_number_reads_the_body_to_its_end(bad):
    transport, inbox, _server = bad
    transport.send(call(1, "length_superscript"))
    assert [text_of(m) for m in inbox.messages] == ["length_superscript " + "w" * 50_000]
    _then_ok(transport, inbox)


def test_a_content_length_of_hundreds_of_digits_fails_the_call_alone_with_a_named_error(bad):
    transport, inbox, _server = bad
    # urllib3 frames the body by that length: the body ends before it, with the connection.
    with pytest.raises(StreamBroken) as info:
        transport.send(call(1, "length_digits"))
    assert info.value.detail == "the connection closed before the end of the response"
    _then_ok(transport, inbox)


@pytest.mark.parametrize(
    ("value", "length"),
    [
        (None, None),
        ("0", 0),
        ("1024", 1024),
        ("007", 7),
        (str(2**63 - 1), 2**63 - 1),
        (str(2**63), None),
        ("9" * 400, None),
        ("\u00b2", None),  # SUPERSCRIPT TWO: str.isdigit() says yes, int() raises
        ("\u0665", None),  # ARABIC-INDIC DIGIT FIVE: int() reads it
        ("1, 1", None),
        ("-1", None),
        ("1e3", None),
        ("", None),
    ],
)
def test_a_content_length_is_ascii_digits_up_to_the_largest_offset(value, length):
    assert content_length(value) == length


def test_a_stall_in_the_middle_of_the_body_fires_the_read_limit(bad):
    transport, inbox, server = bad
    short = open_transport(server.url(), inbox, read_timeout=0.3)
    try:
        with pytest.raises(ReadTimedOut) as info:
            short.send(call(1, "stall_in_body"))
        assert info.value.cause == "transport_failed"
        assert info.value.detail == "read: no data in 300 ms"
    finally:
        server.release.set()
        short.close()
    _then_ok(transport, inbox)


def test_gzip_and_interim_answers_are_decoded_and_skipped(bad):
    transport, inbox, server = bad
    transport.send(call(1, "gzip"))
    transport.send(call(2, "interim"))
    transport.send(call(3, "gzip"))
    texts = [text_of(m) for m in inbox.messages]
    assert [t.split()[0] for t in texts] == ["gzip", "interim", "gzip"]
    assert all(t.endswith("w" * 50_000) for t in texts)
    assert server.connections == 1  # each answer was read to its end and the connection kept
    assert all(r.header("Accept-Encoding") == "identity" for r in server.received)


def test_a_body_that_does_not_decode_is_an_invalid_response(bad):
    transport, inbox, _server = bad
    with pytest.raises(InvalidResponse) as info:
        transport.send(call(1, "bad_gzip"))
    assert info.value.detail == "the content encoding of the response is not valid"
    _then_ok(transport, inbox)


def test_an_answer_of_64_mib_and_one_byte_is_refused_by_the_limit(bad):
    transport, inbox, _server = bad
    limit = 64 * 1024 * 1024
    with pytest.raises(InvalidResponse) as info:
        transport.send(call(1, "huge", {"size": limit + 1}))
    assert info.value.detail == f"a response longer than {limit} bytes"
    with pytest.raises(InvalidResponse) as info:
        transport.send(call(2, "huge_chunked"))
    assert info.value.detail == f"a response longer than {limit} bytes"
    _then_ok(transport, inbox)


def test_100_concurrent_requests_share_one_pool_without_closing_connections() -> None:
    together = threading.Barrier(100)

    def all_at_once(ex: Exchange) -> None:
        together.wait(WAIT)
        ex.text_result("ok")

    with ScriptedServer(all_at_once) as server:
        inbox = Inbox()
        transport = open_transport(server.url(), inbox)
        try:
            for wave in range(2):
                senders = [Sender(transport, call(wave * 1000 + n, "ok")) for n in range(100)]
                assert all(s.join() is None for s in senders)
        finally:
            transport.close()
    answers = [m for m in inbox.messages if isinstance(m, Response)]
    assert len(answers) == 200
    assert server.connections == 100  # the second wave reused all 100


@pytest.fixture
def clock() -> list[float]:
    """The clock of the pool's idle ages, moved by hand (the transport's ``clock`` reads it)."""
    return [1000.0]


@contextlib.contextmanager
def _misbehaving(clock: list[float]) -> Iterator[tuple[ScriptedServer, HttpTransport, Inbox]]:
    with ScriptedServer(_misbehave) as server:
        inbox = Inbox()
        transport = open_transport(server.url(), inbox, clock=lambda: clock[0])
        try:
            yield server, transport, inbox
        finally:
            transport.close()


def test_a_connection_idle_longer_than_the_reuse_limit_is_not_reused(clock: list[float]) -> None:
    with _misbehaving(clock) as (server, transport, _inbox):
        transport.send(call(1, "ok"))
        clock[0] += 1.0
        transport.send(call(2, "ok"))  # reused: idle 1 s
        clock[0] += 60.0
        transport.send(call(3, "ok"))  # idle 60 s: a new connection
    assert server.connections == 2


def test_at_rest_the_connections_idle_too_long_to_be_reused_are_closed(clock: list[float]) -> None:
    with _misbehaving(clock) as (server, transport, inbox):
        transport.send(call(1, "ok"))
        transport.rest()  # idle 0 s: still good for the next request
        clock[0] += 60.0
        assert server.ended == 0
        transport.rest()
        server.wait_ended(1)  # the server saw the connection close
        transport.send(call(2, "ok"))  # on a new connection
    assert server.connections == 2
    assert [m.id for m in inbox.messages if isinstance(m, Response)] == [1, 2]


def test_the_read_limit_of_an_exchange_is_the_time_limit_of_its_method(monkeypatch) -> None:
    from mcpbridge.mcp.transports import httpwire

    assert httpwire.read_limit("tools/call", None) == 3600.0
    assert httpwire.read_limit("tools/list", None) == 120.0
    assert httpwire.read_limit("server/discover", None) == 60.0
    assert httpwire.read_limit("ping", None) == httpwire.DEFAULT_READ_TIMEOUT
    assert httpwire.read_limit("tools/call", 0.5) == 0.5  # a fixed limit (tests, embedding)
    # The transport applies the limit of the method it sends.
    monkeypatch.setitem(httpwire.METHOD_READ_LIMITS, "tools/call", 0.3)
    with ScriptedServer(_misbehave) as server:
        inbox = Inbox()
        transport = open_transport(server.url(), inbox)
        try:
            with pytest.raises(ReadTimedOut) as info:
                transport.send(call(1, "stall_in_body"))
            assert info.value.detail == "read: no data in 300 ms"
        finally:
            server.release.set()
            transport.close()


class RefusingProxy:
    """A proxy on loopback that answers every CONNECT with 407 and records the heads."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.heads: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, name="test-refusing-proxy", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with client:
                client.settimeout(WAIT)
                head = b""
                while b"\r\n\r\n" not in head:
                    data = client.recv(4096)
                    if not data:
                        break
                    head += data
                self.heads.append(head)
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        self.thread.join(WAIT)


def test_a_proxy_that_refuses_the_tunnel_is_named_with_its_status_and_without_the_url() -> None:
    from mcpbridge.mcp.transports.httpwire import ProxyFailed

    proxy = RefusingProxy()
    url = "https://upstream.example:8443/secret-path"
    try:
        transport = open_transport(url, Inbox(), env={"HTTPS_PROXY": f"http://u:p@127.0.0.1:{proxy.port}"})
        try:
            with pytest.raises(ProxyFailed) as info:
                transport.send(call(1, "ok"))
        finally:
            transport.close()
    finally:
        proxy.close()
    assert info.value.cause == "transport_failed"
    assert info.value.detail == "proxy: the proxy did not open a tunnel (HTTP status 407)"
    assert "secret-path" not in str(info.value) and "upstream.example" not in str(info.value)
    assert proxy.heads[0].startswith(b"CONNECT upstream.example:8443 HTTP/1.")
    assert len(proxy.heads) == 1  # sent once


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_proxy_that_does_not_listen_is_a_proxy_failure(scheme: str) -> None:
    from mcpbridge.mcp.transports.httpwire import ProxyFailed

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{port}", "HTTP_PROXY": f"http://127.0.0.1:{port}"}
    transport = open_transport(f"{scheme}://upstream.example/mcp", Inbox(), env=env)
    try:
        with pytest.raises(ProxyFailed) as info:
            transport.send(call(1, "ok"))
    finally:
        transport.close()
    assert info.value.detail == "proxy: the connection to the proxy failed"


@pytest.mark.parametrize("tool", ["long", "long_chunked", "long_pretty"])
def test_a_long_body_is_parsed_with_its_long_string_as_a_view_of_the_body(bad, tool):
    transport, inbox, server = bad
    transport.send(call(1, tool))
    transport.send(call(2, tool))
    assert len(inbox.messages) == 2
    for message in inbox.messages:
        assert isinstance(message, Response)
        text = text_of(message)
        assert text == "long " + "L" * (1024 * 1024)
        # The long string is recorded with its bytes in the body: it goes out without a copy.
        assert message.raw is not None
        view = message.raw.text_of(text)
        assert view is not None and bytes(view) == text.encode()
        assert any(part is view for part in serialize_parts(message))
    assert server.connections == 1  # each body was read to its end and the connection kept
    _then_ok(transport, inbox)


def test_a_long_body_with_a_control_character_in_a_string_is_refused(bad):
    transport, inbox, _server = bad
    with pytest.raises(InvalidResponse) as info:
        transport.send(call(1, "long_control"))
    assert info.value.detail == "the body is not a valid JSON-RPC message"
    _then_ok(transport, inbox)


def test_a_long_body_shorter_than_its_length_fails_alone(bad):
    transport, inbox, server = bad
    with pytest.raises(StreamBroken) as info:
        transport.send(call(1, "long_cut"))
    assert info.value.detail == "the connection closed before the end of the response"
    assert [r.rpc_id for r in server.received] == [1]
    _then_ok(transport, inbox)


@pytest.mark.parametrize(
    ("pieces", "clean", "body"),
    [
        ([b'{"a":', b'"x"}'], True, b'{"a":"x"}'),
        ([b'{"a":"x"}\r', b"\n", b"  \n"], True, b'{"a":"x"}'),
        ([b'{"a":"x"}\n', b"}"], False, b'{"a":"x"}\n}'),
        ([b'{"a":\n"x"}'], False, b'{"a":\n"x"}'),
        ([b'{"a":"\x01"}'], False, b'{"a":"\x01"}'),
        ([b'{"a":"x"} \n', b"  "], True, b'{"a":"x"}'),
        ([b"\n", b'{"a":"x"}'], False, b'\n{"a":"x"}'),
    ],
)
def test_the_control_scan_allows_only_white_space_at_the_end(pieces, clean, body):
    scan = ControlScan()
    for piece in pieces:
        scan.feed(piece)
    assert scan.clean is clean
    joined = bytearray(b"".join(pieces))
    cut = scan.end_space(joined)
    if cut:
        del joined[-cut:]
    assert bytes(joined) == body


# ---------------------------------------------------------------------------------------------
# Retry-After: a wait of whole seconds up to a day, or none
# ---------------------------------------------------------------------------------------------

#: The time of the answer in the tests of Retry-After: a whole second, as HTTP dates are.
NOW = 1_800_000_000


@settings(max_examples=500, deadline=None)
@given(st.text())
@example("\u00b2")
@example("\u0665")  # ARABIC-INDIC DIGIT FIVE
@example("1" + "0" * 399)
@example("9" * 5000)
@example("Fri, 31 Dec 9999 23:59:59 GMT")
@example("Mon, 01 Jan 99999999999999999999 00:00:00 GMT")
@example("Mon, 01 Jan 2030 00:00:00 +9999")
def test_any_retry_after_value_is_a_wait_of_at_most_a_day_or_none(value: str) -> None:
    wait = retry_after(value, now=NOW)
    assert wait is None or (type(wait) is int and 0 <= wait <= MAX_USABLE_RETRY_AFTER)


@given(st.integers(0, MAX_USABLE_RETRY_AFTER), st.integers(0, 3), st.sampled_from(["", " ", "\t"]))
def test_a_number_of_seconds_up_to_a_day_is_its_wait(seconds: int, zeros: int, space: str) -> None:
    assert retry_after(f"{space}{'0' * zeros}{seconds}{space}", now=NOW) == seconds


@given(st.integers(MAX_USABLE_RETRY_AFTER + 1, 10**400))
def test_a_longer_number_of_seconds_is_no_usable_wait(seconds: int) -> None:
    assert retry_after(str(seconds), now=NOW) is None


@given(st.integers(0, MAX_USABLE_RETRY_AFTER))
def test_an_http_date_within_a_day_is_the_wait_up_to_it(offset: int) -> None:
    imf_fixdate = email.utils.formatdate(NOW + offset, usegmt=True)
    asctime = time.asctime(time.gmtime(NOW + offset))  # the third form of HTTP-date: no zone, UTC
    assert retry_after(imf_fixdate, now=NOW) == offset
    assert retry_after(asctime, now=NOW) == offset
    # Between two whole seconds, the wait is rounded up to the date.
    assert retry_after(imf_fixdate, now=NOW + 0.75) == offset


@pytest.mark.parametrize(
    ("offset", "wait"),
    [(-1, 0), (-10 * 365 * 86400, 0), (MAX_USABLE_RETRY_AFTER + 1, None), (80 * 365 * 86400, None)],
)
def test_a_past_date_is_no_wait_and_a_date_over_a_day_away_is_no_usable_wait(offset, wait) -> None:
    assert retry_after(email.utils.formatdate(NOW + offset, usegmt=True), now=NOW) == wait


def test_the_longest_usable_retry_after_is_one_day() -> None:
    # In numbers, not in MAX_USABLE_RETRY_AFTER: raising the cap fails this test.
    assert retry_after("86400", now=NOW) == 86400
    assert retry_after("86401", now=NOW) is None
    assert retry_after(email.utils.formatdate(NOW + 86400, usegmt=True), now=NOW) == 86400
    assert retry_after(email.utils.formatdate(NOW + 86401, usegmt=True), now=NOW) is None
