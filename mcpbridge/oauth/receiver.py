"""The loopback receiver of one sign-in: the redirect, the one-time start URL, the probe.

Theory of operation
-------------------

A :class:`Receiver` listens on ``127.0.0.1:<port>`` only, without
``SO_REUSEADDR`` (``SO_EXCLUSIVEADDRUSE`` on Windows), before the sign-in line
is written or a browser opens. One accept thread hands each connection to a
short connection thread; at most :data:`MAX_CONNECTIONS` run at one time. A
request head has :data:`HEAD_LIMIT` bytes and :data:`HEAD_TIMEOUT` seconds.

Idle connections never keep the browser out. A browser opens spare connections
that send nothing, and so can any program on the host; when every place is
taken, the accept thread closes the connection whose peer has been quiet the
longest among those that wait for their peer (for the request head, or after
the answer for the peer's close), and the new connection takes its place. A
connection whose request is being answered (the callback, the start URL) is
never closed to make room: a new connection waits up to :data:`ADMIT_WAIT` for
one of them to end.

Every request must name the receiver: its ``Host`` header, and the authority of
an absolute-form target, must be ``127.0.0.1:<port>`` or ``localhost:<port>``
(any case, the port of the receiver). Otherwise a web page whose host name an
attacker points at 127.0.0.1 (DNS rebinding) would share its origin with the
receiver and could read its answers. A request for another host gets ``421`` on
every path, before anything of the sign-in happens; one without exactly one
``Host`` header gets ``400``. ``[::1]`` is refused (the receiver does not listen
there), and so is ``localhost.``: a name with a trailing dot is another name,
which a resolver may look up in DNS.

Paths:

* ``GET /callback?state=...&code=...`` (or ``error=...``) with the expected
  ``state`` (compared in constant time) ends the wait; the first such request
  claims the sign-in, later ones get 400. With a fallback (:meth:`Receiver.set_fallback`),
  an error that refuses the ``resource`` parameter (:func:`.flow.refuses_resource`)
  gets ``303`` to the fallback authorization URL instead, once: the browser goes on
  to the sign-in without ``resource`` with no click of the person, and from then on
  the ``state`` of the fallback is the expected one.
* ``GET /start/<token>``: the one-time start URL of a browser. The first GET
  gets ``303`` to the authorization URL. A second GET before the redirect
  stops the sign-in (``start_reused``); after the redirect it gets a "late"
  page and a warning. A wrong token gets 404 and the sign-in goes on.
* ``GET /sign-in/<digest>``: the probe of another bridge process that found the
  port busy. It answers while the sign-in of that record key runs, so that
  process waits for it and reuses its stored tokens.

Pages echo nothing of the request and carry ``no-store``, ``no-referrer``,
``nosniff`` and ``default-src 'none'``. A connection ends after its answer: the
receiver waits up to :data:`CLOSE_GRACE` for the peer to close first, then
closes with a reset (``SO_LINGER`` 0), so no ``TIME_WAIT`` blocks the port for
the next sign-in.
"""

from __future__ import annotations

import enum
import errno
import hmac
import io
import logging
import secrets
import selectors
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final
from urllib.parse import parse_qsl, urlsplit

from ..mcp.cancel import CancelToken
from ..mcp.deadline import Deadline
from ..mcp.droplog import DropLog
from ..mcp.errorbase import LocalFault, PeerFault
from .errors import OAuthError
from .flow import Redirect, b64url

__all__ = [
    "ADMIT_WAIT",
    "CLOSE_GRACE",
    "HEAD_LIMIT",
    "HEAD_TIMEOUT",
    "MAX_CONNECTIONS",
    "ListenFailed",
    "PortBusy",
    "Receiver",
    "StartReused",
    "WaitEnd",
    "WaitEnded",
]

log = logging.getLogger("mcpbridge.oauth")

MAX_CONNECTIONS: Final = 32
HEAD_LIMIT: Final = 16 * 1024
HEAD_TIMEOUT: Final = 10.0
CLOSE_GRACE: Final = 2.0
#: The longest time a probe is held before it answers "pending".
PROBE_HOLD: Final = 2.0
#: The wait for the threads of the receiver at its stop.
STOP_WAIT: Final = 5.0
#: The longest wait of a new connection for a place, while every place answers a request.
ADMIT_WAIT: Final = 1.0

PROBE_PREFIX: Final = "mcpbridge sign-in "

_SECURITY_HEADERS: Final = (
    ("Cache-Control", "no-store"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", "default-src 'none'"),
)


def _page(text: str) -> bytes:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>mcp-bridge-vscode</title>'
        f"</head><body><p>{text}</p></body></html>\n"
    ).encode()


SUCCESS_PAGE: Final = _page(
    "The bridge received the answer of the authorization server. You can close this page."
)
REUSED_PAGE: Final = _page(
    "The start URL of the sign-in received a second request, thus the bridge stopped the sign-in. "
    "Another program on this host possibly opened the URL. Start the sign-in again: restart the "
    "server in VS Code. When this occurs again on a host that other users share, use the option "
    "--no-browser."
)
LATE_PAGE: Final = _page(
    "The start URL of this sign-in was already used, and the sign-in is complete. You can close this page."
)
MISDIRECTED: Final = (
    b"misdirected request: the sign-in receiver answers only requests for 127.0.0.1 or localhost "
    b"at its port\n"
)


class PortBusy(OAuthError, LocalFault):
    """Another program listens on the redirect port."""


class ListenFailed(OAuthError, LocalFault):
    """The receiver cannot listen on the redirect port for another reason."""


class StartReused(OAuthError):
    """The start URL got a second request before the redirect."""


class WaitEnd(str, enum.Enum):
    """Why the wait for the redirect ended without one."""

    TIMEOUT = "timeout"
    CANCELED = "canceled"
    #: The receiver stopped (the connection to the client closed).
    STOPPED = "stopped"


class WaitEnded(OAuthError):
    """The wait ended without a redirect; ``reason`` says why."""

    def __init__(self, reason: WaitEnd) -> None:
        super().__init__(reason.value)
        self.reason = reason


class _Outcome(enum.Enum):
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class _Fallback:
    """The authorization request without ``resource``, and its ``state``."""

    state: str = field(repr=False)
    url: str = field(repr=False)


@dataclass(eq=False)
class _Connection:
    """One accepted connection; the fields are guarded by the receiver's condition."""

    sock: socket.socket
    #: The last sign of life of the peer: the accept, a part of the head, the answer.
    heard_at: float
    #: A request is being answered: the connection is never closed to make room.
    answering: bool = False
    #: Closed to make room; its thread ends at once.
    evicted: bool = False


class Receiver:
    """The receiver of one sign-in; see the module docstring.

    :param port: the redirect port.
    :param state: the ``state`` of the authorization URL.
    :param authorization_url: the target of the start URL; it can also come later
        (:meth:`set_authorization_url`), before the browser gets the start URL.
    :param start: make a one-time start URL (only for a browser that the bridge opens).
    :param probe: the hex digest of the record key, for the probe of another process.
    """

    def __init__(
        self,
        port: int,
        *,
        state: str,
        authorization_url: str | None = None,
        start: bool,
        probe: str | None = None,
        head_timeout: float = HEAD_TIMEOUT,
    ) -> None:
        self.port = port
        self._state = state
        self._authorization_url = authorization_url
        self._start_token = b64url(secrets.token_bytes(32)) if start else None
        self._probe = probe
        self._head_timeout = head_timeout
        self._cond = threading.Condition()
        # Guarded by _cond:
        self._fallback: _Fallback | None = None
        #: The error redirect that the receiver answered with the fallback.
        self._refusal: Redirect | None = None
        self._redirect: Redirect | None = None
        self._start_reused = False
        self._start_uses = 0
        self._ended = False
        self._outcome: _Outcome | None = None
        self._stopping = False
        self._connections: dict[_Connection, threading.Thread] = {}
        self._late_warned = False
        self._drops = DropLog(log)
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._accepter: threading.Thread | None = None

    # --------------------------------------------------------------- public

    def set_authorization_url(self, url: str) -> None:
        """The target of the start URL (checked by the caller)."""
        with self._cond:
            self._authorization_url = url

    def set_fallback(self, state: str, url: str) -> None:
        """The authorization request without ``resource`` (checked by the caller), and its ``state``."""
        with self._cond:
            self._fallback = _Fallback(state, url)

    @property
    def refusal(self) -> Redirect | None:
        """The redirect that refused ``resource``, when the browser went on to the fallback."""
        with self._cond:
            return self._refusal

    @property
    def start_url(self) -> str | None:
        """``http://127.0.0.1:<port>/start/<43-character token>``, or ``None``."""
        if self._start_token is None:
            return None
        return f"http://127.0.0.1:{self.port}/start/{self._start_token}"

    def listen(self) -> None:
        """Listen on the port exclusively and start the accept thread.

        Raises:
            PortBusy: the port is in use.
            ListenFailed: any other failure of the listen.
        """
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)
            if exclusive is not None:
                listener.setsockopt(socket.SOL_SOCKET, exclusive, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(MAX_CONNECTIONS)
        except OSError as exc:
            listener.close()
            if exc.errno in _IN_USE:
                raise PortBusy() from exc
            raise ListenFailed(exc.strerror or type(exc).__name__) from exc
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._listener = listener
        self._accepter = threading.Thread(
            target=self._accept_loop, name="mcpbridge-oauth-receiver", daemon=True
        )
        self._accepter.start()

    def wait(self, deadline: Deadline, cancel: CancelToken | None = None) -> Redirect:
        """Wait for the redirect until ``deadline``.

        Raises:
            StartReused: the start URL got a second request first.
            WaitEnded: the deadline passed (``timeout``), ``cancel`` fired
                (``canceled``) or the receiver stopped (``stopped``).
        """
        remove = cancel.add_callback(self._wake_waiters) if cancel is not None else None
        try:
            with self._cond:
                while True:
                    if self._redirect is not None:
                        return self._redirect
                    if self._start_reused:
                        self._ended = True
                        raise StartReused()
                    if cancel is not None and cancel.cancelled:
                        reason = WaitEnd.CANCELED
                    elif self._stopping:
                        reason = WaitEnd.STOPPED
                    elif deadline.wait(self._cond):
                        continue
                    else:
                        reason = WaitEnd.TIMEOUT
                    self._ended = True
                    raise WaitEnded(reason)
        finally:
            if remove is not None:
                remove()

    def finish(self, success: bool) -> None:
        """Record how the sign-in ended, for the probes of other processes."""
        with self._cond:
            self._ended = True
            self._outcome = _Outcome.DONE if success else _Outcome.FAILED
            self._cond.notify_all()

    def stop(self) -> None:
        """Close the listener and every connection; wait a bounded time for the threads."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            self._ended = True
            if self._outcome is None:
                self._outcome = _Outcome.FAILED
            self._cond.notify_all()
        if self._wake_w is not None:
            try:
                self._wake_w.send(b"x")
            except OSError:
                pass
        deadline = Deadline(STOP_WAIT)
        if self._accepter is not None and not deadline.join(self._accepter):
            log.debug("the sign-in receiver's accepting thread did not end in %g s", STOP_WAIT)
        with self._cond:
            connections = dict(self._connections)
        for connection in connections:
            _interrupt(connection.sock)
        alive = sum(not deadline.join(thread) for thread in connections.values())
        if alive:
            log.debug("%d connection threads of the sign-in receiver did not end in %g s", alive, STOP_WAIT)
        for sock_or_none in (self._listener, self._wake_r, self._wake_w):
            if sock_or_none is not None:
                sock_or_none.close()

    # --------------------------------------------------------------- accept

    def _wake_waiters(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _accept_loop(self) -> None:
        assert self._listener is not None and self._wake_r is not None
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        try:
            while True:
                events = selector.select(timeout=STOP_WAIT)
                with self._cond:
                    if self._stopping:
                        return
                if not any(key.fileobj is self._listener for key, _ in events):
                    continue
                try:
                    sock, _address = self._listener.accept()
                except OSError:
                    continue
                self._admit(sock)
        finally:
            selector.close()

    def _admit(self, sock: socket.socket) -> None:
        with self._cond:
            admitted = self._make_room()
            if admitted:
                connection = _Connection(sock, time.monotonic())
                thread = threading.Thread(
                    target=self._serve, args=(connection,), name="mcpbridge-oauth-connection", daemon=True
                )
                self._connections[connection] = thread
        if not admitted:
            _abort(sock)
            sock.close()
            return
        thread.start()

    def _make_room(self) -> bool:
        """Wait until a new connection has a place; the caller holds the condition.

        When every place is taken, close the connection quiet the longest among
        those that wait for their peer, and wait for its thread to end. Returns
        False when the receiver stops, or when every place answers a request
        for :data:`ADMIT_WAIT`.
        """
        deadline = Deadline(ADMIT_WAIT)
        while not self._stopping and len(self._connections) >= MAX_CONNECTIONS:
            if not any(c.evicted for c in self._connections):
                waiting = [c for c in self._connections if not c.answering]
                if waiting:
                    quietest = min(waiting, key=lambda c: c.heard_at)
                    quietest.evicted = True
                    _interrupt(quietest.sock)
                    self._drops(
                        logging.DEBUG,
                        "closed quiet connections of the sign-in receiver",
                        "the sign-in receiver closed its quietest connection to make room for a new one",
                    )
            if not deadline.wait(self._cond):
                return False
        return not self._stopping

    def _heard(self, connection: _Connection, *, answering: bool) -> None:
        """Record a sign of life of the peer: a part of its head, or the start or end of an answer."""
        with self._cond:
            connection.heard_at = time.monotonic()
            connection.answering = answering

    # ----------------------------------------------------------- connection

    def _serve(self, connection: _Connection) -> None:
        sock = connection.sock
        try:
            try:
                head = self._read_head(connection)
            except _HeadTooLarge:
                self._heard(connection, answering=True)
                self._send(sock, 431, b"request header fields too large\n", "text/plain")
            else:
                if head is None:
                    return
                self._heard(connection, answering=True)
                self._route(sock, head)
            self._heard(connection, answering=False)
            self._close_gracefully(sock)
        except OSError:
            pass
        finally:
            _abort(sock)
            sock.close()
            with self._cond:
                self._connections.pop(connection, None)
                self._cond.notify_all()

    def _read_head(self, connection: _Connection) -> bytes | None:
        sock = connection.sock
        deadline = Deadline(self._head_timeout)
        data = b""
        while b"\r\n\r\n" not in data and b"\n\n" not in data:
            if len(data) > HEAD_LIMIT:
                raise _HeadTooLarge()
            if deadline.expired:
                return None
            sock.settimeout(deadline.remaining)
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                return None
            if not chunk:
                return None
            data += chunk
            self._heard(connection, answering=False)
        head = data.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
        if len(head) > HEAD_LIMIT:
            raise _HeadTooLarge()
        return head

    def _route(self, sock: socket.socket, head: bytes) -> None:
        # http.client loads ssl and email: it loads at the first request, not at the start
        # of the URL form, which answers before it loads the HTTP client.
        import http.client

        line, _, fields = head.partition(b"\n")
        parts = line.rstrip(b"\r").split(b" ")
        if len(parts) != 3 or parts[2] not in (b"HTTP/1.0", b"HTTP/1.1"):
            self._send(sock, 400, b"bad request\n", "text/plain")
            return
        try:
            method, target = parts[0].decode("ascii"), parts[1].decode("ascii")
            hosts = http.client.parse_headers(io.BytesIO(fields)).get_all("Host", [])
        except UnicodeDecodeError:
            self._send(sock, 400, b"bad request\n", "text/plain")
            return
        except http.client.HTTPException:
            self._send(sock, 431, b"request header fields too large\n", "text/plain")
            return
        if len(hosts) != 1:
            self._send(sock, 400, b"bad request: a request needs one Host header\n", "text/plain")
            return
        authority, path, query = _split_target(target)
        if not all(self._serves(name) for name in (hosts[0], authority) if name is not None):
            self._drops(
                logging.WARNING,
                "refused requests of the sign-in receiver for another host name",
                "the sign-in receiver refused a request for another host name: a web page may try "
                "to reach it through DNS rebinding",
            )
            self._send(sock, 421, MISDIRECTED, "text/plain")
            return
        if path == "/callback":
            self._callback(sock, method, query)
        elif path.startswith("/start/") and self._start_token is not None:
            self._start(sock, method, path[len("/start/") :])
        elif path.startswith("/sign-in/") and self._probe is not None and method == "GET":
            self._answer_probe(sock, path[len("/sign-in/") :])
        else:
            self._send(sock, 404, b"not found\n", "text/plain")

    def _serves(self, authority: str) -> bool:
        """Whether ``authority`` (``host:port``) names this receiver; see the module docstring."""
        return authority.strip(" \t").lower() in (f"127.0.0.1:{self.port}", f"localhost:{self.port}")

    def _callback(self, sock: socket.socket, method: str, query: str) -> None:
        params: dict[str, list[str]] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            params.setdefault(name, []).append(value)

        def one(name: str) -> str | None:
            values = params.get(name, [])
            return values[0] if len(values) == 1 else None

        state = one("state")
        code, error = one("code"), one("error")
        duplicated = any(len(params.get(n, [])) > 1 for n in ("state", "code", "error", "iss"))
        valid = method == "GET" and not duplicated and state is not None and (bool(code) or bool(error))
        redirect = Redirect(code or None, error or None, one("iss"), one("error_description"))
        with self._cond:
            claimed = (
                valid
                and hmac.compare_digest(str(state).encode(), self._state.encode())
                and self._redirect is None
                and not self._start_reused
                and not self._ended
            )
            fallback = self._fallback if claimed and redirect.refuses_resource else None
            if fallback is not None:
                self._fallback, self._refusal, self._state = None, redirect, fallback.state
            elif claimed:
                self._redirect = redirect
                self._cond.notify_all()
        if fallback is not None:
            self._send(sock, 303, b"", None, location=fallback.url)
        elif claimed:
            self._send(sock, 200, SUCCESS_PAGE, "text/html; charset=utf-8")
        else:
            self._send(sock, 400, b"bad request\n", "text/plain")

    def _start(self, sock: socket.socket, method: str, token: str) -> None:
        assert self._start_token is not None
        if not hmac.compare_digest(token.encode(), self._start_token.encode()):
            self._send(sock, 404, b"not found\n", "text/plain")
            return
        if method != "GET":
            self._send(sock, 400, b"bad request\n", "text/plain")
            return
        with self._cond:
            target = self._authorization_url
            if target is None or (self._ended and not self._start_reused and self._redirect is None):
                action = "gone"
            elif self._start_uses == 0:
                action = "gone" if self._redirect is not None else "redirect"
            elif self._redirect is not None:
                action = "late"
            else:
                action = "reused"
                self._start_reused = True
                self._cond.notify_all()
            if action != "gone" or self._redirect is not None:
                self._start_uses += 1
            warn = action == "late" and not self._late_warned
            if warn:
                self._late_warned = True
        if action == "redirect":
            assert target is not None
            self._send(sock, 303, b"", None, location=target)
        elif action == "gone":
            self._send(sock, 404, b"not found\n", "text/plain")
        elif action == "late":
            if warn:
                log.warning(
                    "the start URL of the sign-in received a second request after the redirect. Another "
                    "program possibly signed in with a different account. To be sure, run logout and sign "
                    "in again"
                )
            self._send(sock, 410, LATE_PAGE, "text/html; charset=utf-8")
        else:
            self._send(sock, 410, REUSED_PAGE, "text/html; charset=utf-8")

    def _answer_probe(self, sock: socket.socket, digest: str) -> None:
        assert self._probe is not None
        if not hmac.compare_digest(digest.encode(), self._probe.encode()):
            self._send(sock, 404, b"not found\n", "text/plain")
            return
        deadline = Deadline(PROBE_HOLD)
        with self._cond:
            # A hold that runs out is an answer too: the probe then hears "pending".
            deadline.wait_for(self._cond, lambda: self._outcome is not None or self._stopping)
            outcome = self._outcome
        word = "pending" if outcome is None else outcome.value
        self._send(sock, 200, f"{PROBE_PREFIX}{word}\n".encode(), "text/plain")

    def _send(
        self,
        sock: socket.socket,
        status: int,
        body: bytes,
        content_type: str | None,
        *,
        location: str | None = None,
    ) -> None:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
        if content_type is not None:
            lines.append(f"Content-Type: {content_type}")
        if location is not None:
            lines.append(f"Location: {location}")
        lines += [f"{name}: {value}" for name, value in _SECURITY_HEADERS]
        lines += [f"Content-Length: {len(body)}", "Connection: close"]
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body
        sock.settimeout(CLOSE_GRACE)
        sock.sendall(data)

    def _close_gracefully(self, sock: socket.socket) -> None:
        """Let the peer close first (it keeps the TIME_WAIT), for at most the close grace."""
        deadline = Deadline(CLOSE_GRACE)
        while True:
            if deadline.expired:
                return
            sock.settimeout(deadline.remaining)
            try:
                if not sock.recv(4096):
                    return
            except (TimeoutError, OSError):
                return


class _HeadTooLarge(OAuthError, PeerFault):
    pass


def _split_target(target: str) -> tuple[str | None, str, str]:
    """The authority (of an absolute-form target only), the path and the query of a request target.

    A target that is neither a path nor an ``http`` URL gets the authority ``""``,
    which names no receiver.
    """
    if target.startswith("/"):
        path, _, query = target.partition("?")
        return None, path, query
    try:
        url = urlsplit(target)
    except ValueError:
        return "", target, ""
    if url.scheme != "http":
        return "", target, ""
    return url.netloc, url.path, url.query


#: The errors of a bind to a busy port (Windows answers WSAEACCES to an exclusive port).
_IN_USE: Final = frozenset({errno.EADDRINUSE} | ({10048, 10013} if sys.platform == "win32" else set()))


def _abort(sock: socket.socket) -> None:
    """Make the next close a reset: the port never waits in TIME_WAIT."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


def _interrupt(sock: socket.socket) -> None:
    """End the connection of another thread, also while it waits for its peer (an idle preconnection).

    The shutdown of the read side wakes its wait without sending a FIN; its close
    then sends a reset.
    """
    _abort(sock)
    try:
        sock.shutdown(socket.SHUT_RD)
    except OSError:
        pass


def probe_answer(body: bytes) -> str | None:
    """The word of a probe answer (``pending``, ``done``, ``failed``), or ``None``."""
    text = body.decode("ascii", "replace").strip()
    if not text.startswith(PROBE_PREFIX):
        return None
    word = text[len(PROBE_PREFIX) :]
    return word if word in ("pending", "done", "failed") else None


def probe(port: int, digest: str, *, timeout: float = PROBE_HOLD + 1.0) -> str | None:
    """Ask the receiver on ``port`` about the sign-in of ``digest``.

    Returns ``pending``, ``done`` or ``failed``; ``None`` when the port has no
    receiver of that sign-in (another program, another sign-in, or nobody).
    """
    request = f"GET /sign-in/{digest} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(request.encode("ascii"))
            data = b""
            while b"\r\n\r\n" not in data and len(data) < 4096:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200 "):
                return None
            # The receiver waits for the peer to close first: read the body by its length.
            while len(body) < len(PROBE_PREFIX) + len("pending\n") and b"\n" not in body:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                body += chunk
    except OSError:
        return None
    return probe_answer(body)
