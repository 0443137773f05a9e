"""The loopback receiver: exclusive port, limits, pages, the one-time start URL and the probe."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator

import pytest

from conftest import WAIT, bounded
from mcpbridge.mcp.cancel import CancelToken
from mcpbridge.mcp.deadline import Deadline
from mcpbridge.oauth import receiver as receiver_module
from mcpbridge.oauth.receiver import (
    HEAD_LIMIT,
    MAX_CONNECTIONS,
    MISDIRECTED,
    PortBusy,
    Receiver,
    StartReused,
    WaitEnd,
    WaitEnded,
    probe,
)
from tests.oauth_peers import free_port

STATE = "the-state-0123456789abcdefghijklmnopqrstuv"
AUTH_URL = "https://as.example.com/authorize?state=" + STATE


def http(port: int, raw: bytes, *, timeout: float = WAIT) -> tuple[int, dict[str, str], bytes]:
    """Send raw request bytes; return the status, the headers (lower-case names) and the body.

    Like a browser, it reads the body by its Content-Length and closes first.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        return exchange(sock, raw)


def exchange(sock: socket.socket, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw request bytes on ``sock`` and read the answer by its Content-Length."""
    sock.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split(" ")[1]), headers, body


def get(port: int, target: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    return http(port, f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def receiver(port: int) -> Iterator[Receiver]:
    r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=True, probe="ab" * 32)
    r.listen()
    yield r
    r.stop()


def token_of(r: Receiver) -> str:
    assert r.start_url is not None
    return r.start_url.rsplit("/", 1)[1]


def test_the_start_url_has_a_43_character_base64url_token_on_the_loopback_address(receiver, port):
    assert receiver.start_url is not None
    assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/start/[A-Za-z0-9_-]{{43}}", receiver.start_url)


def test_the_port_is_exclusive_while_the_receiver_listens(receiver, port):
    other = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=False)
    with pytest.raises(PortBusy):
        other.listen()


def test_a_callback_with_the_state_and_a_code_ends_the_wait_with_a_page_that_echoes_nothing(receiver, port):
    status, headers, body = get(port, f"/callback?code=SECRET-CODE-77&state={STATE}&iss=https%3A%2F%2Fas")
    assert status == 200
    assert headers["cache-control"] == "no-store"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-security-policy"] == "default-src 'none'"
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["connection"] == "close" and int(headers["content-length"]) == len(body)
    assert b"SECRET-CODE-77" not in body and STATE.encode() not in body
    assert b"You can close this page." in body
    redirect = receiver.wait(Deadline(WAIT))
    assert redirect.code == "SECRET-CODE-77" and redirect.iss == "https://as" and redirect.error is None


def test_only_the_first_matching_callback_claims_the_sign_in(receiver, port):
    assert get(port, f"/callback?code=one&state={STATE}")[0] == 200
    assert get(port, f"/callback?code=two&state={STATE}")[0] == 400
    assert receiver.wait(Deadline(WAIT)).code == "one"


@pytest.mark.parametrize(
    "target",
    [
        "/callback?code=x&state=wrong",
        "/callback?code=x",
        f"/callback?state={STATE}",
        f"/callback?code=x&state={STATE}&state={STATE}",
        f"/callback?code=a&code=b&state={STATE}",
    ],
)
def test_a_callback_without_the_state_and_a_code_gets_400_and_the_wait_goes_on(receiver, port, target):
    status, _headers, body = get(port, target)
    assert status == 400 and body == b"bad request\n"
    with pytest.raises(WaitEnded):
        receiver.wait(Deadline(0.05))


def test_other_paths_get_404_and_other_methods_or_versions_get_400(receiver, port):
    status, _headers, body = get(port, "/")
    assert (status, body) == (404, b"not found\n")
    assert get(port, "/favicon.ico")[0] == 404
    assert get(port, f"/callback?code=x&state={STATE}", method="POST")[0] == 400
    assert http(port, f"GET /callback?code=x&state={STATE} HTTP/2.0\r\n\r\n".encode())[0] == 400
    assert http(port, b"GARBAGE\r\n\r\n")[0] == 400


def request(target: str, *hosts: str) -> bytes:
    return (
        f"GET {target} HTTP/1.1\r\n".encode() + b"".join(f"Host: {h}\r\n".encode() for h in hosts) + b"\r\n"
    )


def paths_of(r: Receiver) -> list[str]:
    """A target on each path of the receiver: the start URL, the callback, the probe and any other."""
    return [f"/start/{token_of(r)}", f"/callback?code=c&state={STATE}", "/sign-in/" + "ab" * 32, "/"]


def assert_the_sign_in_completes(r: Receiver, port: int) -> None:
    """The start URL is still unused and the callback still unclaimed: the sign-in completes."""
    assert get(port, f"/start/{token_of(r)}")[0] == 303
    assert get(port, f"/callback?code=real&state={STATE}")[0] == 200
    assert r.wait(Deadline(WAIT)).code == "real"


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example:{port}",
        "127.0.0.1:{other}",
        "127.0.0.1",
        "localhost",
        "127.0.0.1:",
        "localhost.:{port}",
        "127.0.0.1.:{port}",
        "[::1]:{port}",
        "[::ffff:127.0.0.1]:{port}",
        "127.1:{port}",
        "0x7f.0.0.1:{port}",
        "user@127.0.0.1:{port}",
        "127.0.0.1:{port}.attacker.example",
        "127.0.0.1:0{port}",
        "127.0.0.1:{port}, attacker.example",
        "",
    ],
)
def test_a_request_for_another_host_gets_421_on_every_path_and_changes_nothing(receiver, port, host):
    name = host.format(port=port, other=port + 1 if port < 65535 else port - 1)
    for target in paths_of(receiver):
        status, headers, body = http(port, request(target, name))
        assert (status, body) == (421, MISDIRECTED)
        assert "location" not in headers and headers["cache-control"] == "no-store"
    assert_the_sign_in_completes(receiver, port)


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "LocalHost:{port}", "127.0.0.1:{port} "]
)
def test_the_loopback_names_of_the_receiver_in_any_case_are_served(receiver, port, host):
    status, headers, _body = http(port, request(f"/start/{token_of(receiver)}", host.format(port=port)))
    assert (status, headers["location"]) == (303, AUTH_URL)


def test_an_absolute_form_target_must_name_the_receiver_as_well_as_the_host_header(receiver, port):
    token = token_of(receiver)
    ours, theirs = f"127.0.0.1:{port}", f"attacker.example:{port}"
    for target, host in [
        (f"http://{theirs}/start/{token}", ours),
        (f"http://{ours}/start/{token}", theirs),
        (f"https://{ours}/start/{token}", ours),
        (f"http:/start/{token}", ours),
        ("*", ours),
    ]:
        status, _headers, body = http(port, request(target, host))
        assert (status, body) == (421, MISDIRECTED)
    status, headers, _body = http(port, request(f"HTTP://LOCALHOST:{port}/start/{token}", ours))
    assert (status, headers["location"]) == (303, AUTH_URL)


def test_a_request_without_exactly_one_host_header_gets_400_on_every_path(receiver, port):
    ours = f"127.0.0.1:{port}"
    for target in paths_of(receiver):
        for raw in (
            request(target),
            f"GET {target} HTTP/1.0\r\n\r\n".encode(),
            request(target, ours, ours),
            request(target, ours, f"attacker.example:{port}"),
        ):
            status, _headers, body = http(port, raw)
            assert (status, body) == (400, b"bad request: a request needs one Host header\n")
    assert_the_sign_in_completes(receiver, port)


def test_refused_hosts_give_one_warning_that_names_no_host(receiver, port, caplog):
    with caplog.at_level("WARNING", logger="mcpbridge"):
        for _ in range(3):
            assert http(port, request("/", f"attacker.example:{port}"))[0] == 421
    warnings = [
        r.getMessage() for r in caplog.records if "refused a request for another host" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "attacker" not in warnings[0] and str(port) not in warnings[0]


def test_an_error_redirect_ends_the_wait_with_the_error(receiver, port):
    assert get(port, f"/callback?error=access_denied&state={STATE}")[0] == 200
    redirect = receiver.wait(Deadline(WAIT))
    assert redirect.error == "access_denied" and redirect.code is None


def test_the_first_get_of_the_start_url_redirects_to_the_authorization_url(receiver, port):
    status, headers, body = get(port, f"/start/{token_of(receiver)}")
    assert status == 303 and body == b""
    assert headers["location"] == AUTH_URL
    assert headers["cache-control"] == "no-store" and headers["referrer-policy"] == "no-referrer"
    assert headers["content-length"] == "0" and headers["connection"] == "close"


def test_a_second_get_of_the_start_url_stops_the_sign_in(receiver, port):
    token = token_of(receiver)
    assert get(port, f"/start/{token}")[0] == 303
    status, _headers, body = get(port, f"/start/{token}")
    assert status == 410 and b"Start the sign-in again" in body and b"--no-browser" in body
    with pytest.raises(StartReused):
        receiver.wait(Deadline(WAIT))
    assert get(port, f"/callback?code=late&state={STATE}")[0] == 400


def test_a_second_get_after_the_redirect_gets_the_late_page_and_a_warning(receiver, port, caplog):
    token = token_of(receiver)
    assert get(port, f"/start/{token}")[0] == 303
    assert get(port, f"/callback?code=c&state={STATE}")[0] == 200
    with caplog.at_level("WARNING", logger="mcpbridge"):
        status, _headers, body = get(port, f"/start/{token}")
    assert status == 410 and b"already used" in body
    assert "received a second request after the redirect" in caplog.text
    assert receiver.wait(Deadline(WAIT)).code == "c"


def test_guessed_start_tokens_get_404_and_the_sign_in_completes(receiver, port):
    token = token_of(receiver)
    flipped = ("B" if token[0] == "A" else "A") + token[1:]
    guesses = [
        "",
        "x",
        token[:-1],
        token + "A",
        token.upper() if token.upper() != token else token.lower(),
        flipped,
    ]
    for guess in guesses:
        if guess != token:
            assert get(port, f"/start/{guess}")[0] == 404
    assert get(port, f"/start/{token}", method="POST")[0] == 400
    assert get(port, f"/start/{token}")[0] == 303
    assert get(port, f"/callback?code=c&state={STATE}")[0] == 200
    assert receiver.wait(Deadline(WAIT)).code == "c"


def test_a_callback_without_the_start_url_makes_the_start_path_404(receiver, port):
    assert get(port, f"/callback?code=c&state={STATE}")[0] == 200
    assert get(port, f"/start/{token_of(receiver)}")[0] == 404


def test_after_the_time_limit_the_start_path_is_gone(receiver, port):
    with pytest.raises(WaitEnded) as ended:
        receiver.wait(Deadline(0.05))
    assert ended.value.reason is WaitEnd.TIMEOUT
    assert get(port, f"/start/{token_of(receiver)}")[0] == 404


def test_without_a_browser_there_is_no_start_url(port):
    r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=False)
    r.listen()
    try:
        assert r.start_url is None
        assert get(port, "/start/" + "A" * 43)[0] == 404
    finally:
        r.stop()


def test_a_request_head_over_16_kib_gets_431(receiver, port):
    raw = b"GET /callback HTTP/1.1\r\nX-Big: " + b"a" * HEAD_LIMIT + b"\r\n\r\n"
    assert http(port, raw)[0] == 431


def test_a_head_that_does_not_arrive_in_time_closes_the_connection(port):
    r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=False, head_timeout=0.2)
    r.listen()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
            sock.sendall(b"GET /callback HTTP/1.1\r\n")
            try:
                assert sock.recv(100) == b""
            except ConnectionResetError:
                pass  # closed with a reset, as every connection of the receiver
    finally:
        r.stop()


def closed_by_the_receiver(sock: socket.socket) -> bool:
    """Whether the receiver closes ``sock`` within the wait (it closes with a reset)."""
    sock.settimeout(WAIT)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_connections_that_send_nothing_never_keep_the_browser_out(port):
    # Only the need of a place can end an idle connection within the waits of this test.
    r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=True, head_timeout=6 * WAIT)
    r.listen()
    idle = [socket.create_connection(("127.0.0.1", port), timeout=WAIT) for _ in range(2 * MAX_CONNECTIONS)]
    try:
        assert_the_sign_in_completes(r, port)
        assert closed_by_the_receiver(idle[0])  # the quietest went first
    finally:
        for sock in idle:
            sock.close()
        r.stop()


def test_answered_connections_that_stay_open_never_keep_the_browser_out(port, monkeypatch):
    # Only the need of a place can end an answered connection within the waits of this test.
    monkeypatch.setattr(receiver_module, "CLOSE_GRACE", 6 * WAIT)
    r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=True)
    r.listen()
    held: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=WAIT))
            assert exchange(held[-1], request("/favicon.ico", f"127.0.0.1:{port}"))[0] == 404
        assert_the_sign_in_completes(r, port)
        assert closed_by_the_receiver(held[0])
    finally:
        for sock in held:
            sock.close()
        r.stop()


def test_an_idle_connection_does_not_delay_the_stop(port):
    # The idle connection would wait far longer than the bound of the stop for its request head:
    # a stop that waited for it would not end within the bound.
    r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=True, head_timeout=6 * WAIT)
    r.listen()
    idle = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    try:
        assert get(port, "/nothing")[0] == 404  # the idle connection has its thread by now
        bounded(r.stop, "the stop of a receiver with an idle connection", WAIT)
        assert closed_by_the_receiver(idle)
    finally:
        idle.close()
    again = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=False)
    again.listen()
    again.stop()


def test_a_cancel_ends_the_wait_at_once(receiver):
    # The deadline of the wait is far past the bound: only the cancel can end it within the bound.
    cancel = CancelToken()
    threading.Timer(0.05, cancel.cancel, args=("stop",)).start()
    with pytest.raises(WaitEnded) as ended:
        bounded(lambda: receiver.wait(Deadline(6 * WAIT), cancel), "the end of the canceled wait")
    assert ended.value.reason is WaitEnd.CANCELED


def test_twenty_sign_ins_in_a_row_reuse_the_same_port(port):
    for n in range(20):
        r = Receiver(port, state=STATE, authorization_url=AUTH_URL, start=True)
        r.listen()
        try:
            assert get(port, f"/start/{token_of(r)}")[0] == 303
            assert get(port, f"/callback?code=c{n}&state={STATE}")[0] == 200
            assert r.wait(Deadline(WAIT)).code == f"c{n}"
        finally:
            r.stop()


def test_the_probe_answers_for_the_sign_in_of_the_same_record_only(receiver, port, monkeypatch):
    monkeypatch.setattr(receiver_module, "PROBE_HOLD", 0.05)
    assert probe(port, "cd" * 32) is None
    assert probe(port, "ab" * 32) == "pending"
    receiver.finish(True)
    assert probe(port, "ab" * 32) == "done"
    assert probe(free_port(), "ab" * 32) is None


def test_a_held_probe_answers_when_the_sign_in_ends(receiver, port):
    answers: list[str | None] = []
    asker = threading.Thread(target=lambda: answers.append(probe(port, "ab" * 32)), name="test-probe")
    asker.start()
    # Held or not yet arrived: either way the answer is the outcome, well within the hold.
    receiver.finish(False)
    asker.join(WAIT)
    assert answers == ["failed"]


FALLBACK_STATE = "the-fallback-state-0123456789abcdefghijklmn"
FALLBACK_URL = "https://as.example.com/authorize?state=" + FALLBACK_STATE


def test_a_refusal_of_resource_sends_the_browser_once_to_the_fallback_whose_state_then_counts(receiver, port):
    receiver.set_fallback(FALLBACK_STATE, FALLBACK_URL)
    described = "AADSTS901002%3A+The+%27resource%27+request+parameter+is+not+supported."
    status, headers, body = get(
        port, f"/callback?error=invalid_request&error_description={described}&state={STATE}"
    )
    assert (status, headers["location"], body) == (303, FALLBACK_URL, b"")
    assert receiver.refusal is not None and receiver.refusal.error == "invalid_request"
    # The state of the first request counts no more; a second refusal ends the wait: no loop.
    assert get(port, f"/callback?code=x&state={STATE}")[0] == 400
    assert get(port, f"/callback?error=invalid_target&state={FALLBACK_STATE}")[0] == 200
    redirect = receiver.wait(Deadline(WAIT))
    assert redirect.error == "invalid_target" and redirect.refuses_resource


def test_another_error_never_goes_to_the_fallback(receiver, port):
    receiver.set_fallback(FALLBACK_STATE, FALLBACK_URL)
    assert get(port, f"/callback?error=access_denied&state={STATE}")[0] == 200
    assert receiver.wait(Deadline(WAIT)).error == "access_denied"
    assert receiver.refusal is None
