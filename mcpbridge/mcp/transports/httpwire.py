"""The HTTP wire under both Streamable HTTP transports, on urllib3.

Theory of operation
-------------------

:mod:`.http` (revision 2026-07-28) and :mod:`.legacy_http` (2025-11-25) send
every message to one URL. :func:`.httppool.open_wire` gives a
:class:`~.httppool.Wire`: one urllib3 keep-alive pool for that origin (or for its
proxy), sized for :data:`DEFAULT_POOL_SIZE` requests in flight, that does one
exchange at a time on each connection. Each exchange gives a
:class:`~.httppool.WireResponse` (an :class:`Answer`), whose body is read whole
(:meth:`Answer.read_body`) or as it arrives (:meth:`Answer.read1`).

This module holds the rules and loads neither urllib3 nor :mod:`ssl`;
:mod:`.httppool` builds on it, and the transports import it at their first
:func:`~.httppool.open_wire`.

* A long JSON body is read in pieces as it arrives into one buffer, each piece
  looked at for control characters on the way, and parsed as a long line of
  stdio is: its long strings are cut out, decoded once and kept as views of the
  buffer, so a large result is neither copied again nor escaped again on its
  way to the client (:meth:`WireReading._message`). The buffer follows the
  bytes: a body sent in chunks of two bytes costs what it costs in one chunk.

* urllib3 frames the messages: ``Content-Length``, ``chunked`` or the end of the
  connection, ``gzip`` and ``deflate`` bodies decoded (the request asks for
  ``identity``); interim (1xx) answers are skipped.
* **Sent at most once.** The retry policy of every request (:data:`~.httppool.SEND_ONCE`)
  sends nothing again: a pooled connection that the server closed is found
  before the write and dropped (urllib3 checks it), and a connection idle for
  more than :data:`IDLE_REUSE_LIMIT` is not reused (a server closes idle
  connections after a few seconds, and would close one just as it is reused).
  A request whose bytes may have reached the server fails with
  :class:`StreamBroken`; the transport decides what to do (only a method
  without side effects is sent again, with a new id).
* Before each read of an answer's head and body, the socket asks for an
  immediate acknowledgment (``TCP_QUICKACK`` on Linux). Linux otherwise delays
  the ACK up to 40 ms, and a server that writes its head and its body apart
  with Nagle's algorithm on (uvicorn, the Python SDK) waits for that ACK.
* The connect timeout bounds the TCP connection, the proxy tunnel and the TLS
  handshake; the read timeout bounds each wait for bytes (an idle limit: each
  request may give its own). TCP keep-alive finds a peer that vanished.
* Proxies: ``HTTPS_PROXY`` (``HTTP_PROXY`` for http), ``ALL_PROXY`` and
  ``NO_PROXY`` (:func:`proxy_for`), through urllib3's :class:`~urllib3.ProxyManager`:
  ``CONNECT`` for https, an https proxy spoken to over TLS, the user and
  password of the proxy URL as ``Proxy-Authorization: Basic``. A loopback host
  never goes through a proxy.
* Trust: the certificate verifier of the operating system (``truststore``)
  plus the PEM certificates of ``--ca-file`` (:func:`tls_context`). There is no
  way to turn verification off.
* Cancellation: each exchange gives an :class:`Exchange`; the connection tells
  it its TCP socket as soon as it exists (before the TLS handshake) and forgets
  the link before it goes back to the pool, so a cancellation from another
  thread shuts that one socket down at once and never touches a connection that
  serves another request.
* Errors are mapped once, in :func:`.httppool.edge_error`: urllib3's exceptions become
  :class:`~.errors.McpError` subclasses whose detail names the failing step
  (connect, TLS, proxy, read) and never the URL; the cause is chained.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import unquote, urlsplit

from .. import jsonrpc
from ..cancel import CancelToken
from ..droplog import DropLog
from ..errorbase import PeerFault
from ..errors import (
    Cancelled,
    Closed,
    ConnectFailed,
    InvalidResponse,
    McpError,
    ResponseTooLarge,
    TransportFailed,
)
from ..jsonrpc import FrameError, Message
from ..netloc import is_loopback
from ..numbers import OutOfRange, peer_int

if TYPE_CHECKING:
    import ssl

    from .sse import Event

__all__ = [
    "ACCEPT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_READ_TIMEOUT",
    "Answer",
    "Authorizer",
    "CaFileError",
    "ConnectError",
    "ControlScan",
    "Exchange",
    "HttpStatusError",
    "ProxyFailed",
    "ReadTimedOut",
    "StreamBroken",
    "TlsFailed",
    "Why",
    "WireReading",
    "content_length",
    "event_message",
    "media_type",
    "parse_event",
    "proxy_for",
    "read_limit",
    "retry_after",
    "status_error",
    "tls_context",
]

log = logging.getLogger("mcpbridge.http")

#: One JSON body, or one event of a stream: 64 MiB, the same as a line on stdio.
DEFAULT_MAX_RESPONSE_BYTES: Final = 64 * 1024 * 1024
#: The TCP connection, the proxy tunnel and the TLS handshake (precedent: mcp-remote, 10 s).
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
#: The longest wait for the next bytes of an answer of a method without its own limit
#: (:data:`METHOD_READ_LIMITS`), and of a GET stream (which opens again after it).
DEFAULT_READ_TIMEOUT: Final = 300.0
#: The idle read limit of an exchange is the time limit of its method (the bridge's error
#: table): 1 h for each round of tools/call, 120 s for the lists, completions and the first
#: round of prompts/get and resources/read, 60 s for server/discover. TCP keep-alive finds
#: a peer that vanished sooner.
METHOD_READ_LIMITS: Final = {
    "tools/call": 3600.0,
    "server/discover": 60.0,
    "tools/list": 120.0,
    "prompts/list": 120.0,
    "resources/list": 120.0,
    "resources/templates/list": 120.0,
    "completion/complete": 120.0,
    "prompts/get": 120.0,
    "resources/read": 120.0,
}
#: Requests in flight that the pool keeps a connection for; more may be open at one time.
DEFAULT_POOL_SIZE: Final = 256
#: A pooled connection idle for longer is closed rather than reused (servers close idle
#: keep-alive connections after about 5 s: Node, uvicorn).
IDLE_REUSE_LIMIT: Final = 4.0
#: TCP keep-alive: first probe after 60 s of silence, then every 15 s, 4 probes.
KEEPALIVE_IDLE: Final = 60
KEEPALIVE_INTERVAL: Final = 15
KEEPALIVE_COUNT: Final = 4
#: The largest piece read from the socket at one time.
READ_CHUNK: Final = 64 * 1024
#: The largest piece of a long body of known length read at one time (as a long line on stdio).
LONG_READ_CHUNK: Final = 1024 * 1024
#: The piece in which a JSON body of unknown length is read. http.client gathers the HTTP
#: chunks of one piece in one call (not one call per chunk) as a list of them, which it joins:
#: for a body in chunks of two bytes, an object per two bytes of this size, for a moment.
GATHER_CHUNK: Final = 16 * 1024
#: A JSON body at least this long is read in pieces as it arrives (a long line on stdio is
#: parsed with its long strings cut out from the same length on).
LONG_BODY: Final = 256 * 1024
#: Every byte but the control characters (below 0x20), for ``bytes.translate``.
_NOT_CONTROL: Final = bytes(range(0x20, 0x100))
_JSON_SPACE: Final = b" \t\r\n"
#: Nesting of a message of the upstream server (the same as on stdio).
DEFAULT_MAX_DEPTH: Final = 200
#: The most bytes of a body that :meth:`~.httppool.WireResponse.close` reads to keep its connection,
#: and how long it waits for each piece (only bytes that are here already count).
DRAIN_BYTES: Final = 64 * 1024
DRAIN_WAIT: Final = 0.002

ACCEPT: Final = "application/json, text/event-stream"
#: The longest ``Retry-After`` of a 429 or 503 that a transport waits for, once.
MAX_RETRY_AFTER: Final = 30.0
#: The longest ``Retry-After`` that is a usable wait at all (a day): a wait up to it that is
#: too long to wait for is named in the error of the request; a longer one is no usable wait.
MAX_USABLE_RETRY_AFTER: Final = 86400
#: The longest ``Content-Length`` that is read as a length at all (the largest file offset).
MAX_CONTENT_LENGTH: Final = 2**63 - 1

#: Linux only: acknowledge the next segment at once (the flag does not stay set).
_QUICKACK: Final = getattr(socket, "TCP_QUICKACK", None)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


class HttpStatusError(InvalidResponse):
    """An HTTP status without a JSON-RPC message: detail ``"HTTP status N"``.

    ``http_status`` holds the status. ``retry_after`` holds the seconds of a
    ``Retry-After`` header (429 and 503 send one), else ``None``. ``media`` is the media
    type of the body (``"text/html"`` for a web page), or ``""``. ``www_authenticate`` is the
    ``WWW-Authenticate`` header of a 401 or 403 (never in a message), else ``None``.
    """

    def __init__(
        self,
        status: int,
        *,
        retry_after: float | None = None,
        detail: str | None = None,
        media: str = "",
        www_authenticate: str | None = None,
    ) -> None:
        super().__init__(detail or f"HTTP status {status}", http_status=status)
        self.retry_after = retry_after
        self.media = media
        self.www_authenticate = www_authenticate

    @property
    def transient(self) -> bool:
        """408, 429 and the 5xx statuses except 501: a later attempt can succeed."""
        status = self.http_status or 0
        return status in (408, 429) or (status >= 500 and status != 501)


class CaFileError(ConnectFailed):
    """The CA file of ``--ca-file`` cannot be used; ``detail`` tells why, without the path."""


class ConnectError(TransportFailed):
    """No connection to the server: the name, the TCP connection, or its time limit.

    ``host`` and ``port`` are those of the server when known (else ``""`` and 0): they are
    no secret, unlike the path and the query of the URL. ``refused`` is True when the
    server's host refused the connection: nothing listens at that port.
    """

    def __init__(
        self, detail: str | None = None, *, host: str = "", port: int = 0, refused: bool = False
    ) -> None:
        super().__init__(detail)
        self.host = host
        self.port = port
        self.refused = refused

    @property
    def loopback(self) -> bool:
        """True for a host of this machine, which no proxy ever stands in front of."""
        return bool(self.host) and is_loopback(self.host)


class TlsFailed(TransportFailed):
    """The TLS handshake with the server failed (its certificate, for example)."""


class ProxyFailed(TransportFailed):
    """The proxy failed: the connection to it, its TLS, or the tunnel it should open."""


class ReadTimedOut(TransportFailed):
    """No byte of the answer came within the read limit of the request."""


class StreamBroken(TransportFailed):
    """The connection ended or was reset after the request was written: it may have run."""


class Authorizer(Protocol):
    """The seam of the sign-in: the transport asks it for headers and reports challenges."""

    def headers(self) -> dict[str, str]:
        """The headers of the next request, for example ``Authorization``."""
        ...

    def on_challenge(self, status: int, www_authenticate: str | None) -> bool:
        """Handle a 401 or 403; return True to send the request once more with fresh headers."""
        ...


class Answer(Protocol):
    """What the readers here use of an answer (:class:`~.httppool.WireResponse`)."""

    @property
    def status(self) -> int: ...

    def header(self, name: str) -> str | None:
        """The value of the header ``name``, or None."""
        ...

    def read_body(self, limit: int) -> bytes:
        """The whole body, at most ``limit`` bytes (else :class:`BodyTooLarge`)."""
        ...

    def read1(self, size: int) -> bytes:
        """What has arrived of the body, at most ``size`` bytes; empty at its end."""
        ...

    def read(self, size: int) -> bytes:
        """``size`` bytes of the body (fewer only at its end); empty at its end."""
        ...


def seconds_text(value: float) -> str:
    """A duration for a message: ``"7 s"`` or ``"300 ms"``."""
    return f"{int(value)} s" if value >= 1 and value == int(value) else f"{int(value * 1000)} ms"


def retry_after(value: str | None, *, now: float | None = None) -> int | None:
    """The wait of a ``Retry-After`` value in whole seconds, or None when it gives no usable wait.

    A usable wait is a number of seconds in ASCII digits or an HTTP date (RFC 9110, 10.2.3;
    a date without a zone is in UTC, as every HTTP date is), at most
    :data:`MAX_USABLE_RETRY_AFTER` away; a date in the past is a wait of 0. A wait from a
    date is rounded up to whole seconds, the resolution of the date. Every other value is
    None: no header, a digit that is not ASCII (``²``), a number of hundreds of digits, a
    date years away, text. ``now`` is the time of the answer (by default the clock's).

    urllib3's own parser (``Retry.parse_retry_after``) is not used: it raises for such values
    and caps the wait where this rule has none. ``email.utils`` parses the dates.
    """
    if not value:
        return None
    text = value.strip(" \t")
    if text.isascii() and text.isdigit():
        try:
            return peer_int(text, name="Retry-After", low=0, high=MAX_USABLE_RETRY_AFTER)
        except OutOfRange:
            return None
    seconds = _date_wait(text, time.time() if now is None else now)
    return seconds if seconds is not None and seconds <= MAX_USABLE_RETRY_AFTER else None


def content_length(value: str | None) -> int | None:
    """The length of a ``Content-Length`` value, or None when it gives none that can be used.

    A usable length is ASCII digits up to :data:`MAX_CONTENT_LENGTH`; anything else (a
    missing header, ``²``, a list, hundreds of digits) is None, and the body is read as one
    of unknown length, which counts its bytes against the limit as they come.
    """
    if value is None:
        return None
    try:
        return peer_int(value, name="Content-Length", low=0, high=MAX_CONTENT_LENGTH)
    except OutOfRange:
        return None


def _date_wait(text: str, now: float) -> int | None:
    """The whole seconds from ``now`` to the HTTP date ``text`` (0 when it is past), or None."""
    import email.utils
    from datetime import timezone

    try:
        when = email.utils.parsedate_to_datetime(text)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return max(0, math.ceil(when.timestamp() - now))
    except (ValueError, OverflowError):
        # email.utils raises each of these for a value that is not a date it can place.
        return None


def status_error(response: Answer) -> HttpStatusError:
    """The error of an answer whose status carries no JSON-RPC message."""
    return HttpStatusError(
        response.status,
        retry_after=retry_after(response.header("Retry-After")),
        media=media_type(response),
        www_authenticate=response.header("WWW-Authenticate") if response.status in (401, 403) else None,
    )


def read_limit(method: str, fixed: float | None) -> float:
    """The idle read limit of an exchange of ``method``: ``fixed`` when given, else the method's."""
    if fixed is not None:
        return fixed
    return METHOD_READ_LIMITS.get(method, DEFAULT_READ_TIMEOUT)


def media_type(response: Answer) -> str:
    return (response.header("Content-Type") or "").split(";", 1)[0].strip().lower()


# ---------------------------------------------------------------------------------------------
# Trust and proxies
# ---------------------------------------------------------------------------------------------


def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """A TLS client context: the verifier of the system (``truststore``) plus the certificates of ``ca_file``.

    Raises:
        CaFileError: ``ca_file`` cannot be read or holds no certificate.
    """
    import ssl

    import truststore

    context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if ca_file is not None:
        try:
            context.load_verify_locations(cafile=ca_file)
        except FileNotFoundError as exc:
            raise CaFileError("the file does not exist") from exc
        except ssl.SSLError as exc:
            raise CaFileError("the file holds no PEM certificate that can be used") from exc
        except OSError as exc:
            raise CaFileError(f"the file cannot be read: {exc.strerror or type(exc).__name__}") from exc
    return context


class OnceTlsContext:
    """The default :func:`tls_context`, made at the first TLS connection that asks for it and
    then shared by every connection that holds this object (the verifier of the system costs
    time and memory to make)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None

    def __call__(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = tls_context()
            return self._context


def _env(env: Mapping[str, str], name: str) -> tuple[str, str] | None:
    for key in (name.lower(), name.upper()):
        value = env.get(key, "").strip()
        if value:
            return key, value
    return None


def _bypassed(no_proxy: str, host: str, port: int) -> bool:
    """Whether ``NO_PROXY`` names ``host`` (a suffix, ``*``, an address or a network, maybe with a port)."""
    import ipaddress

    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        entry_host, entry_port = entry, ""
        if entry.startswith("["):
            entry_host, _, rest = entry[1:].partition("]")
            entry_port = rest[1:] if rest.startswith(":") else ""
        elif entry.count(":") == 1:
            entry_host, _, entry_port = entry.partition(":")
        if entry_port and entry_port != str(port):
            continue
        if address is not None:
            try:
                if address in ipaddress.ip_network(entry_host, strict=False):
                    return True
            except ValueError:
                pass
            continue
        entry_host = entry_host.lstrip("*").lstrip(".")
        if entry_host and (host == entry_host or host.endswith("." + entry_host)):
            return True
    return False


def proxy_for(url: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The proxy of ``url``: ``(variable name, proxy URL)``, or ``None`` for a direct connection.

    ``https_proxy`` (or ``http_proxy`` for http), then ``all_proxy``, each in
    lower case before upper case; ``no_proxy`` excludes hosts. A loopback host
    never goes through a proxy. A proxy URL without a scheme means ``http://``.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if not host or is_loopback(host):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    no_proxy = _env(env, "no_proxy")
    if no_proxy is not None and _bypassed(no_proxy[1], host, port):
        return None
    first = "https_proxy" if parts.scheme == "https" else "http_proxy"
    for name in (first, "all_proxy"):
        found = _env(env, name)
        if found is not None:
            key, value = found
            return key, value if "://" in value else "http://" + value
    return None


def checked_proxy(url: str, env: Mapping[str, str]) -> str | None:
    """The proxy URL of ``url`` (:func:`proxy_for`), or None.

    Raises:
        ConnectFailed: the proxy variable has a scheme other than http and https
            (the detail names the variable).
    """
    found = proxy_for(url, env)
    if found is None:
        return None
    variable, proxy_url = found
    if urlsplit(proxy_url).scheme.lower() not in ("http", "https"):
        raise ConnectFailed(f"the proxy of {variable.upper()} does not use http or https")
    return proxy_url


def proxy_parts(proxy_url: str) -> tuple[str, dict[str, str]]:
    """The proxy URL without its user and password, and its ``Proxy-Authorization`` header."""
    parts = urlsplit(proxy_url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or (443 if scheme == "https" else 80)
    headers: dict[str, str] = {}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return f"{scheme}://{host}:{port}", headers


# ---------------------------------------------------------------------------------------------
# Exchanges: the link from a cancel token to the socket of one request
# ---------------------------------------------------------------------------------------------

#: Guards the socket and the aborted flag of each exchange. The socket shutdown happens
#: under it, so an exchange can never shut a connection that the pool has given to another
#: request; a shutdown is one short system call.
_OWNER_LOCK = threading.Lock()


class Why(enum.Enum):
    CANCEL = "cancel"
    CLOSE = "close"


class Exchange:
    """One request in flight and the TCP socket under it."""

    __slots__ = ("sock", "aborted")

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.aborted: Why | None = None

    def bind(self, sock: socket.socket) -> None:
        with _OWNER_LOCK:
            self.sock = sock
            if self.aborted is not None:
                _shutdown(sock)

    def unbind(self) -> None:
        with _OWNER_LOCK:
            self.sock = None

    def abort(self, why: Why = Why.CANCEL) -> None:
        with _OWNER_LOCK:
            if self.aborted is None:
                self.aborted = why
            _shutdown(self.sock)


def _shutdown(sock: socket.socket | None) -> None:
    if sock is not None:
        try:
            # The plain socket method: SSLSocket.shutdown would drop its TLS object
            # under the feet of the thread that reads.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


def quickack(sock: Any) -> None:
    if _QUICKACK is not None and isinstance(sock, socket.socket):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            pass


def socket_options() -> list[tuple[int, int, int]]:
    options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1), (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    idle = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)
    if idle is not None:
        options.append((socket.IPPROTO_TCP, idle, KEEPALIVE_IDLE))
    for name, value in (("TCP_KEEPINTVL", KEEPALIVE_INTERVAL), ("TCP_KEEPCNT", KEEPALIVE_COUNT)):
        number = getattr(socket, name, None)
        if number is not None:
            options.append((socket.IPPROTO_TCP, number, value))
    return options


class BodyTooLarge(PeerFault):
    """The body is longer than the limit of :meth:`~.httppool.WireResponse.read_body`."""


# ---------------------------------------------------------------------------------------------
# Reading answers: shared by both transports
# ---------------------------------------------------------------------------------------------


class WireReading:
    """How both HTTP transports read the body of an answer and name an aborted exchange.

    The transport gives ``_max_bytes``, ``_max_depth``, ``_lock``, ``_closed``, ``_in_flight``
    (the exchanges in flight), ``_waits`` (the pauses before a request goes again, which its
    close ends)
    and ``_drops`` (its log of what the server makes it repeat).
    """

    _max_bytes: int
    _max_depth: int
    _lock: threading.Lock
    _closed: bool
    _in_flight: set[Exchange]
    _waits: set[threading.Event]
    _drops: DropLog

    def _refuse_all(self) -> list[Exchange]:
        """Refuse new exchanges and end the pauses (:meth:`_pause`); the exchanges in flight.

        The caller aborts them (with :attr:`Why.CLOSE`).
        """
        with self._lock:
            self._closed = True
            exchanges = list(self._in_flight)
            waits = list(self._waits)
        for woken in waits:
            woken.set()
        return exchanges

    def _wait_busy(
        self, method: str, error: HttpStatusError, cancel: CancelToken | None, *, waited: bool
    ) -> bool:
        """After a 429 or 503: wait for its ``Retry-After`` once when short; tell whether to retry.

        Raises:
            HttpStatusError: a second busy answer, or a longer wait, named in the detail.
            Cancelled, Closed: the wait was cut short.
        """
        status, seconds = error.http_status, error.retry_after
        if status not in (429, 503) or seconds is None:
            return False
        if seconds > MAX_RETRY_AFTER or waited:
            raise HttpStatusError(
                status,
                retry_after=seconds,
                detail=f"HTTP status {status}, retry after {seconds_text(seconds)}",
            ) from error
        self._drops(
            logging.INFO,
            "requests sent again after a busy answer",
            "%s: the upstream server answered HTTP status %d, thus the bridge waits %s and sends it again",
            method[:128],
            status,
            seconds_text(seconds),
        )
        self._pause(seconds, cancel)
        return True

    def _pause(self, seconds: float, cancel: CancelToken | None) -> None:
        """Wait ``seconds`` before a request goes again, ended early by ``cancel`` or the close.

        Raises:
            Cancelled, Closed: the wait was cut short.
        """
        woken = threading.Event()
        remove = cancel.add_callback(woken.set) if cancel is not None else None
        with self._lock:
            self._waits.add(woken)
            stopped = self._closed
        try:
            if not stopped:
                # Woken early by the cancel token or the close, which are looked at below.
                woken.wait(seconds)
        finally:
            with self._lock:
                self._waits.discard(woken)
            if remove is not None:
                remove()
        if self._closed:
            raise Closed("the connection to the upstream server is closed")
        if cancel is not None and cancel.cancelled:
            raise Cancelled(cancel.reason or None)

    def _aborted(self, exchange: Exchange, cancel: CancelToken | None) -> McpError:
        if exchange.aborted is Why.CLOSE:
            return Closed("the connection to the upstream server is closed")
        reason = cancel.reason if cancel is not None else ""
        return Cancelled(reason or None)

    @contextlib.contextmanager
    def _abort_named(self, exchange: Exchange, cancel: CancelToken | None) -> Iterator[None]:
        """A step of ``exchange``: when it fails because the exchange was aborted, the error
        is that of the abort (:meth:`_aborted`), caused by the failure of the step."""
        try:
            yield
        except McpError as exc:
            if exchange.aborted is None:
                raise
            raise self._aborted(exchange, cancel) from exc

    def _read(self, read: Callable[[], bytes], exchange: Exchange, cancel: CancelToken | None) -> bytes:
        """What ``read`` gives, or the error of the abort when the exchange was aborted."""
        with self._abort_named(exchange, cancel):
            data = read()
        if exchange.aborted is not None:
            raise self._aborted(exchange, cancel)
        return data

    def _body(self, response: Answer, exchange: Exchange, cancel: CancelToken | None) -> bytes:
        """The whole body (at most the limit); the connection goes back to the pool."""
        try:
            return self._read(lambda: response.read_body(self._max_bytes), exchange, cancel)
        except BodyTooLarge as exc:
            raise self._too_large(response) from exc

    def _too_large(self, response: Answer) -> ResponseTooLarge:
        """The error of a body over the limit of the transport."""
        return ResponseTooLarge(
            f"a response longer than {self._max_bytes} bytes",
            limit=self._max_bytes,
            over_http=True,
            http_status=response.status,
        )

    def _message(self, response: Answer, exchange: Exchange, cancel: CancelToken | None) -> Message:
        """The JSON-RPC message of a JSON body; the connection goes back to the pool.

        A short body is read whole. A long one (or one of unknown length) is read in
        pieces as it arrives, each looked at for control characters on the way (so the
        parse need not look again), into one buffer: of its ``Content-Length``, or one
        that each piece extends, so that a body in many small chunks costs its bytes and
        not an object per chunk. Its long strings are cut out and kept as views of that
        one block (:class:`~.jsonrpc.RawStrings`), as for a long line on stdio.

        Raises:
            FrameError: the body is not a usable message.
            InvalidResponse: the body is longer than the limit.
        """
        length = content_length(response.header("Content-Length"))
        coding = (response.header("Content-Encoding") or "identity").strip().lower()
        identity = coding in ("", "identity")
        if length is not None and length > self._max_bytes:
            raise self._too_large(response)
        if length is not None and length < LONG_BODY and identity:
            body = self._body(response, exchange, cancel)
            return jsonrpc.parse(body, max_depth=self._max_depth)
        scan = ControlScan()
        if length is not None and identity:
            # One buffer of the announced length, filled as the pieces arrive: each piece
            # is dropped at once, so the body costs its own size and nothing more.
            buffer = bytearray(length)
            filled = 0
            with memoryview(buffer) as view:
                for piece in self._chunks(response, exchange, cancel, LONG_READ_CHUNK, whole=True):
                    end = filled + len(piece)
                    if end > len(buffer):
                        raise StreamBroken("the response is longer than its Content-Length")
                    view[filled:end] = piece
                    filled = end
                    scan.feed(piece)
            if filled != len(buffer):
                raise StreamBroken("the connection closed before the end of the response")
        else:
            # One buffer that each piece extends as it arrives (and is then dropped).
            buffer = bytearray()
            for piece in self._chunks(response, exchange, cancel, GATHER_CHUNK, whole=True):
                if len(buffer) + len(piece) > self._max_bytes:
                    raise self._too_large(response)
                scan.feed(piece)
                buffer += piece
        cut = scan.end_space(buffer)
        if cut:
            del buffer[-cut:]
        return jsonrpc.parse(buffer, max_depth=self._max_depth, control_free=scan.clean)

    def _chunks(
        self,
        response: Answer,
        exchange: Exchange,
        cancel: CancelToken | None,
        size: int = READ_CHUNK,
        *,
        whole: bool = False,
    ) -> Iterator[bytes]:
        """The body as it arrives, in pieces of at most ``size`` bytes (``whole``: of ``size``
        bytes but the last, for a body that is needed whole)."""
        read = response.read if whole else response.read1
        while chunk := self._read(lambda: read(size), exchange, cancel):
            yield chunk


class ControlScan:
    """Look at the pieces of a body for control characters as they arrive.

    :attr:`clean` stays True while no byte below 0x20 was seen, except in the white
    space at the very end of the body (a server ends its JSON with a newline), whose
    length :meth:`end_space` tells. A clean body lets :func:`~.jsonrpc.parse` skip its own
    scan (``control_free``), as a long line read on stdio does.
    """

    __slots__ = ("clean", "_space_end")

    def __init__(self) -> None:
        self.clean = True
        #: The pieces so far end with white space that holds a control character.
        self._space_end = False

    def feed(self, piece: bytes) -> None:
        if not self.clean or not piece:
            return
        controls = piece.translate(None, _NOT_CONTROL)
        if not controls:
            if self._space_end and piece.strip(b" "):
                self.clean = False  # the white space was inside the body
            return
        if controls.translate(None, _JSON_SPACE):
            self.clean = False
            return
        content = piece.rstrip(_JSON_SPACE)
        if content.translate(None, _NOT_CONTROL) or (content.strip(b" ") and self._space_end):
            self.clean = False
            return
        self._space_end = True

    def end_space(self, body: bytes | bytearray) -> int:
        """How many bytes of white space end ``body`` (0 unless a control character is among them)."""
        if not self._space_end:
            return 0
        index = len(body)
        while index > 0 and body[index - 1] in _JSON_SPACE:
            index -= 1
        return len(body) - index


def event_message(event: Event, max_depth: int) -> Message | None:
    """The message of an SSE event of type ``message`` with data (:func:`parse_event`), or
    None for any other event.

    Raises:
        FrameError: the event is not a usable message.
    """
    if event.type != "message" or not event.raw:
        return None
    return parse_event(event, max_depth)


def parse_event(event: Event, max_depth: int) -> Message:
    """The message of an SSE event, parsed from its bytes (a long event is never decoded whole).

    Data that is not UTF-8 is parsed as its text, with U+FFFD in place of the bad bytes.

    Raises:
        FrameError: the event is not a usable message.
    """
    try:
        return jsonrpc.parse(event.raw, max_depth=max_depth, control_free=event.control_free)
    except FrameError:
        text = event.data
        if text.encode("utf-8", "surrogatepass") == event.raw:
            raise
    return jsonrpc.parse(text, max_depth=max_depth)
