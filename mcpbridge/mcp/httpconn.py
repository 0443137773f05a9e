"""Keep-alive HTTP/1.1 connections to one origin: the wire under the HTTP transports.

Theory of operation
-------------------

The transports of :mod:`.http` and :mod:`.legacy_http` send every message to one
URL. :class:`ConnectionPool` keeps the connections to that URL (or to its proxy)
and does one exchange at a time on each: it writes the request head and body
with one ``sendall``, reads the response head, and hands out a
:class:`Response` whose body the caller reads whole (:meth:`Response.read_body`)
or as it arrives (:meth:`Response.read1`). A connection whose response was read
to its end goes back to the pool; any other ends with its response.

It is small on purpose: a request costs a few system calls and a few dozen
lines of Python, which matters when each call of a client crosses the bridge.

* The framing of RFC 9112: ``Content-Length``, ``chunked``, or the end of the
  connection; interim (1xx) responses are skipped. Bodies are decoded when a
  server sends ``gzip`` or ``deflate`` although the request asked for
  ``identity``.
* A connection from the pool that became readable while idle (the server
  closed it) is dropped before use.
* Before each read of a response head or of a streamed body, the socket asks
  for an immediate acknowledgment (``TCP_QUICKACK`` on Linux). Linux otherwise
  delays the ACK up to 40 ms, and a server that writes its head and its body in
  two pieces with Nagle's algorithm on waits for that ACK: the Python SDK
  (uvicorn) answered each call in 44 ms instead of about 1 ms.
* The connect timeout bounds the TCP connection, the proxy tunnel and the TLS
  handshake; the read timeout bounds each wait for bytes.
* A proxy is resolved once, by the caller: ``http`` URLs go to it in absolute
  form, ``https`` URLs through a ``CONNECT`` tunnel; a proxy URL with
  ``https`` is spoken to over TLS. The user and password of the proxy URL
  become ``Proxy-Authorization: Basic``.
* Each exchange gives a :class:`Binding`: the pool tells it the socket of the
  exchange as soon as it exists and forgets the link before the connection goes
  back to the pool, so a cancellation can shut that one socket down at once
  from another thread.

Errors are the exceptions of :mod:`socket` and :mod:`ssl`, and the classes of
this module (:class:`WireError` and its subclasses). No message holds the URL.
"""

from __future__ import annotations

import base64
import io
import select
import socket
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    import ssl

__all__ = [
    "BodyTooLarge",
    "Binding",
    "ConnectTimeout",
    "ConnectionPool",
    "Disconnected",
    "InvalidHeader",
    "InvalidHttp",
    "ProxyRefused",
    "Response",
    "UnsupportedEncoding",
    "WireError",
]

#: The largest response head (status line and headers).
MAX_HEAD_BYTES: Final = 64 * 1024
#: The most header lines in a response head (as :mod:`http.client`).
MAX_HEADERS: Final = 100
#: The largest line of the chunked framing (a size and its extensions, a trailer).
MAX_CHUNK_LINE: Final = 8 * 1024
#: One read from the socket (below the mmap threshold of the allocator: no system call to
#: map and unmap a buffer each time).
RECV_BYTES: Final = 64 * 1024
#: The largest single read into the buffer of a long body.
BULK_RECV_BYTES: Final = 4 * 1024 * 1024
#: The most bytes of a body that :meth:`Response.close` drops to keep its connection.
DRAIN_BYTES: Final = 64 * 1024
#: A body of at most this many bytes goes out in the same ``sendall`` as the head.
JOIN_BODY_BYTES: Final = 1024 * 1024

_SAFE_TARGET: Final = "!#$%&'()*+,/:;=?@[]~"
#: Linux only: acknowledge the next segment at once (the flag does not stay set).
_QUICKACK: Final = getattr(socket, "TCP_QUICKACK", None)


class WireError(Exception):
    """A failure of the exchange that is not an error of :mod:`socket` or :mod:`ssl`."""


class ConnectTimeout(WireError):
    """No connection (TCP, proxy tunnel, TLS handshake) within the connect timeout."""


class ConnectionFailed(WireError):
    """The connection failed; ``__cause__`` holds the error of the system."""


class ProxyRefused(WireError):
    """The proxy did not open a tunnel to the server (a ``CONNECT`` status other than 2xx)."""


class Disconnected(WireError):
    """The connection ended before the end of the response."""


class _NothingReceived(Disconnected):
    """The connection ended before the first byte of the response."""


class InvalidHttp(WireError):
    """The response is not valid HTTP/1.1 (its head, its framing)."""


class UnsupportedEncoding(WireError):
    """A ``Content-Encoding`` that the pool cannot decode, or a body that does not decode."""


class InvalidHeader(ValueError):
    """A header name or value of the request holds CR, LF or NUL, or is not Latin-1."""


class BodyTooLarge(WireError):
    """The body is longer than the limit of :meth:`Response.read_body`."""


class Binding(Protocol):
    """The link from one exchange to its socket (see the module docstring)."""

    def bind(self, sock: socket.socket) -> None:
        """Called on the sending thread with the TCP socket that carries the exchange."""

    def unbind(self) -> None:
        """Called before the connection of the exchange goes back to the pool."""


class _WouldBlock(Exception):
    """No byte is ready on a connection that must not wait."""


class _NoBinding:
    def bind(self, sock: socket.socket) -> None:
        pass

    def unbind(self) -> None:
        pass


_NO_BINDING: Final = _NoBinding()


# ---------------------------------------------------------------------------------------------
# A connection
# ---------------------------------------------------------------------------------------------


class _Connection:
    """One socket and the bytes read from it that no response took yet."""

    __slots__ = ("sock", "raw", "buffer", "requests", "nowait")

    def __init__(self, sock: Any, raw: socket.socket) -> None:
        #: The socket to speak HTTP on: plain, TLS, or TLS inside the TLS of a proxy.
        self.sock = sock
        #: The TCP socket under it (a cancellation shuts it down).
        self.raw = raw
        self.buffer = b""
        self.requests = 0
        #: True while a read must not wait (:meth:`Response.close` drops what is here).
        self.nowait = False

    def recv(self) -> bytes:
        if self.nowait and not self.ready():
            raise _WouldBlock()
        if _QUICKACK is not None:
            try:
                self.raw.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass
        data: bytes = self.sock.recv(RECV_BYTES)
        return data

    def ready(self) -> bool:
        """True when a read would not wait: bytes (or the end of the stream) are here."""
        pending = getattr(self.sock, "pending", None)
        if pending is not None and pending():
            return True
        try:
            if sys.platform != "win32":  # Windows has no poll
                poller = select.poll()
                poller.register(self.raw, select.POLLIN | select.POLLPRI)
                return bool(poller.poll(0))
            else:
                readable, _, _ = select.select([self.raw], [], [], 0)
                return bool(readable)
        except (OSError, ValueError):
            return True

    def idle_and_open(self) -> bool:
        """True when the idle connection has no bytes waiting: the server did not close it."""
        return not self.buffer and not self.ready()

    def close(self) -> None:
        for item in (self.sock, self.raw):
            try:
                item.close()
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------
# A response
# ---------------------------------------------------------------------------------------------


class Response:
    """The head of a response and its body, to be read once.

    :attr:`headers` maps lower-case names to values (repeated headers joined with
    ``", "``). Close the response when done: its connection goes back to the pool
    only when the body was read to its end.
    """

    def __init__(
        self,
        pool: ConnectionPool,
        conn: _Connection,
        binding: Binding,
        status: int,
        headers: dict[str, str],
        *,
        keep_alive: bool,
        no_body: bool,
    ) -> None:
        self.status = status
        self.headers = headers
        self._pool = pool
        self._conn: _Connection | None = conn
        self._binding = binding
        self._keep_alive = keep_alive
        self._chunked = False
        self._remaining: int | None = None  # bytes left of a Content-Length body or of a chunk
        self._done = no_body
        self._draining = False
        self._decoder: Any = None
        if no_body:
            return
        encoding = headers.get("transfer-encoding")
        if encoding is not None:
            codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
            if not codings or codings[-1] != "chunked":
                # Delimited by the end of the connection (RFC 9112, 6.3).
                self._keep_alive = False
            else:
                self._chunked = True
                self._remaining = 0
                if "content-length" in headers:
                    self._keep_alive = False  # both framings: the connection ends after (RFC 9112, 6.3)
                if len(codings) > 1:
                    self._decoder = _decoder(",".join(codings[:-1]))
        else:
            length = headers.get("content-length")
            if length is not None:
                values = {v.strip() for v in length.split(",")}
                if len(values) != 1 or not next(iter(values)).isdigit():
                    raise InvalidHttp("the Content-Length of the response is not valid")
                self._remaining = int(next(iter(values)))
                if self._remaining == 0:
                    self._done = True
            else:
                self._keep_alive = False
        coding = headers.get("content-encoding")
        if coding is not None and coding.strip().lower() not in ("", "identity"):
            if self._decoder is not None:
                raise UnsupportedEncoding("the content encoding of the response is not valid")
            self._decoder = _decoder(coding)

    def header(self, name: str) -> str | None:
        """The value of the header ``name`` (any case), or None."""
        return self.headers.get(name.lower())

    # ------------------------------------------------------------------ body

    def read_body(self, limit: int) -> bytes:
        """The whole body (at most ``limit`` bytes, decoded); the connection goes back to the pool.

        Raises:
            BodyTooLarge: the body is longer than ``limit``.
        """
        conn = self._live()
        if self._done:
            self._finish()
            return b""
        if self._decoder is None and not self._chunked and self._remaining is not None:
            size = self._remaining
            if size > limit:
                raise BodyTooLarge()
            data = self._read_exact(conn, size)
            self._remaining = 0
            self._done = True
            self._finish()
            return data
        parts: list[bytes] = []
        total = 0
        while True:
            piece = self.read1(RECV_BYTES)
            if not piece:
                return b"".join(parts)
            total += len(piece)
            if total > limit:
                raise BodyTooLarge()
            parts.append(piece)

    def read1(self, size: int) -> bytes:
        """The next bytes of the body as they arrive (at most about ``size``), ``b""`` at its end."""
        if self._decoder is None:
            return self._read_raw(size)
        while True:
            # A small compressed piece can stand for much data: at most ``size`` bytes come out
            # at a time, the rest of the input waits in the decoder's tail.
            raw = self._decoder.unconsumed_tail or self._read_raw(size)
            if not raw:
                return self._flush_decoder() if self._decoder is not None else b""
            try:
                data: bytes = self._decoder.decompress(raw, max(size, 1))
            except zlib.error:
                raise UnsupportedEncoding("the content encoding of the response is not valid") from None
            if data:
                return data

    def close(self) -> None:
        """End the response; the rest of the body is dropped.

        The connection goes back to the pool when the body was read to its end, or
        when its rest (at most :data:`DRAIN_BYTES`) is here already: a server that ends
        an event stream right after the response keeps its connection. Else it closes.
        """
        conn = self._conn
        if conn is None:
            return
        if not self._done and self._keep_alive:
            self._drain_now(conn)
        self._conn = None
        self._binding.unbind()
        if self._done and self._keep_alive:
            self._pool._put(conn)
        else:
            conn.close()

    def _drain_now(self, conn: _Connection) -> None:
        self._draining = True
        conn.nowait = True
        dropped = 0
        try:
            while not self._done and dropped <= DRAIN_BYTES:
                dropped += len(self.read1(RECV_BYTES))
        except (_WouldBlock, WireError, OSError, ValueError):
            self._keep_alive = False
        finally:
            conn.nowait = False
            self._draining = False
        if not self._done:
            self._keep_alive = False

    # -------------------------------------------------------------- framing

    def _live(self) -> _Connection:
        conn = self._conn
        if conn is None:
            raise Disconnected("the response is closed")
        return conn

    def _finish(self) -> None:
        if self._done and not self._draining:
            self.close()

    def _flush_decoder(self) -> bytes:
        decoder, self._decoder = self._decoder, None
        try:
            rest: bytes = decoder.flush()
        except zlib.error:
            raise UnsupportedEncoding("the content encoding of the response is not valid") from None
        if not decoder.eof and not isinstance(decoder, _Identity):
            raise UnsupportedEncoding("the content encoding of the response is not valid")
        return rest

    def _read_raw(self, size: int) -> bytes:
        if self._done:
            self._finish()
            return b""
        conn = self._live()
        if not self._chunked:
            if self._remaining is None:  # until the end of the connection
                data = self._take(conn, size, eof_ok=True)
                if not data:
                    self._done = True
                    self._finish()
                return data
            data = self._take(conn, min(size, self._remaining), eof_ok=False)
            self._remaining -= len(data)
            if self._remaining == 0:
                self._done = True
                self._finish()
            return data
        if self._remaining == 0:
            self._remaining = self._chunk_size(conn)
            if self._remaining == 0:
                self._trailers(conn)
                self._done = True
                self._finish()
                return b""
        assert self._remaining is not None
        data = self._take(conn, min(size, self._remaining), eof_ok=False)
        self._remaining -= len(data)
        if self._remaining == 0:
            if self._line(conn) != b"":
                raise InvalidHttp("a chunk of the response does not end with CRLF")
        return data

    def _take(self, conn: _Connection, size: int, *, eof_ok: bool) -> bytes:
        """Up to ``size`` bytes: what the buffer holds, else one read of the socket."""
        if not conn.buffer:
            conn.buffer = conn.recv()
            if not conn.buffer:
                if eof_ok:
                    return b""
                raise Disconnected("the connection closed before the end of the response")
        data = conn.buffer
        if len(data) <= size:
            conn.buffer = b""
            return data
        conn.buffer = data[size:]
        return data[:size]

    def _read_exact(self, conn: _Connection, size: int) -> bytes:
        buffered = conn.buffer
        if len(buffered) >= size:
            conn.buffer = buffered[size:]
            return buffered[:size] if len(buffered) > size else buffered
        conn.buffer = b""
        if size - len(buffered) <= RECV_BYTES:
            data = buffered
            while len(data) < size:
                more = conn.recv()
                if not more:
                    raise Disconnected("the connection closed before the end of the response")
                data += more
            conn.buffer = data[size:]
            return data[:size]
        # A long body: BufferedReader.read makes the bytes object of the body once and lets the
        # socket fill it in place, so the body is copied once, from the kernel.
        reader = io.BufferedReader(_BodyReader(conn.sock, buffered, size), RECV_BYTES)
        data = reader.read(size)
        if len(data) < size:
            raise Disconnected("the connection closed before the end of the response")
        return data

    def _line(self, conn: _Connection) -> bytes:
        start = 0
        while True:
            end = conn.buffer.find(b"\r\n", start)
            if end >= 0:
                line = conn.buffer[:end]
                conn.buffer = conn.buffer[end + 2 :]
                return line
            if len(conn.buffer) > MAX_CHUNK_LINE:
                raise InvalidHttp("a line of the chunked framing is too long")
            start = max(0, len(conn.buffer) - 1)
            data = conn.recv()
            if not data:
                raise Disconnected("the connection closed before the end of the response")
            conn.buffer += data

    def _chunk_size(self, conn: _Connection) -> int:
        text = self._line(conn).split(b";", 1)[0].strip()
        if not text or len(text) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in text):
            raise InvalidHttp("the size of a chunk of the response is not valid")
        return int(text, 16)

    def _trailers(self, conn: _Connection) -> None:
        for _ in range(MAX_HEADERS + 1):
            if self._line(conn) == b"":
                return
        raise InvalidHttp("the response has too many trailer lines")


class _BodyReader(io.RawIOBase):
    """The next ``size`` bytes of a connection (those buffered first), for :class:`io.BufferedReader`."""

    def __init__(self, sock: Any, buffered: bytes, size: int) -> None:
        super().__init__()
        self._sock = sock
        self._buffered = buffered
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        view = memoryview(target).cast("B")
        if self._left <= 0 or not len(view):
            return 0  # (recv_into would read a whole buffer for a size of 0)
        if self._buffered:
            count = min(len(view), len(self._buffered))
            view[:count] = self._buffered[:count]
            self._buffered = self._buffered[count:]
        else:
            count = self._sock.recv_into(view, min(len(view), self._left, BULK_RECV_BYTES))
        self._left -= count
        return count


class _Identity:
    eof = True
    unconsumed_tail = b""

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        return data

    def flush(self) -> bytes:
        return b""


def _decoder(coding: str) -> Any:
    name = coding.strip().lower()
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS)
    if name in ("", "identity"):
        return _Identity()
    raise UnsupportedEncoding("the content encoding of the response is not valid")


# ---------------------------------------------------------------------------------------------
# The pool
# ---------------------------------------------------------------------------------------------


def _host_header(host: str, port: int, default: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    try:
        shown.encode("ascii")
    except UnicodeEncodeError:
        shown = shown.encode("idna").decode("ascii")
    return shown if port == default else f"{shown}:{port}"


def _basic(user: str, password: str) -> bytes:
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode("latin-1", "replace"))
    return b"Basic " + token


class ConnectionPool:
    """The keep-alive connections to the origin of ``url``; thread-safe.

    :param url: the ``http`` or ``https`` URL; its path and query are the target of every request.
    :param ssl_context: the trust of TLS connections, or a function that makes it on first use.
    :param proxy: the ``http`` or ``https`` URL of the proxy, or None for a direct connection.
    :param headers: ``(name, value)`` pairs sent first in every request (a value of ``str``
        goes as Latin-1, a value of ``bytes`` as it is).
    :param socket_options: ``(level, option, value)`` set on each TCP socket.
    :param pool_size: the idle connections kept for reuse; more may be open at one time.
    """

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        proxy: str | None = None,
        headers: Sequence[tuple[str, str | bytes]] = (),
        connect_timeout: float,
        read_timeout: float,
        socket_options: Sequence[tuple[int, int, int]] = (),
        pool_size: int = 32,
    ) -> None:
        parts = urlsplit(url)
        self.scheme = parts.scheme.lower()
        if self.scheme not in ("http", "https"):
            raise ValueError("the URL does not use http or https")
        default_port = 443 if self.scheme == "https" else 80
        self.host = parts.hostname or ""
        self.port = parts.port or default_port
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        target = quote(target, safe=_SAFE_TARGET)
        host_header = _host_header(self.host, self.port, default_port)
        self._ssl_context = ssl_context
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._socket_options = list(socket_options)
        self._pool_size = pool_size
        self._proxy: tuple[str, str, int] | None = None
        self._proxy_auth: bytes | None = None
        if proxy is not None:
            proxy_parts = urlsplit(proxy)
            proxy_scheme = proxy_parts.scheme.lower()
            if proxy_scheme not in ("http", "https"):
                raise ValueError("the proxy does not use http or https")
            proxy_default = 443 if proxy_scheme == "https" else 80
            self._proxy = (proxy_scheme, proxy_parts.hostname or "", proxy_parts.port or proxy_default)
            if proxy_parts.username is not None:
                self._proxy_auth = _basic(proxy_parts.username, proxy_parts.password or "")
        if self._proxy is not None and self.scheme == "http":
            # A plain request through a proxy names the whole URL.
            target = f"http://{host_header}{target}"
        fixed = [(b"Host", host_header.encode("ascii"))]
        if self._proxy is not None and self.scheme == "http" and self._proxy_auth is not None:
            fixed.append((b"Proxy-Authorization", self._proxy_auth))
        fixed += [(_header_bytes(n), _header_bytes(v)) for n, v in headers]
        self._target = target.encode("ascii")
        self._fixed = b"".join(name + b": " + value + b"\r\n" for name, value in fixed)
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._closed = False
        #: Connections opened so far (for tests and diagnostics).
        self.opened = 0

    # ------------------------------------------------------------------ api

    def request(
        self,
        method: str,
        headers: Iterable[tuple[str, str | bytes]],
        body: bytes | None,
        *,
        binding: Binding = _NO_BINDING,
        timeouts: tuple[float, float] | None = None,
    ) -> Response:
        """Send one request and read the head of its response.

        :param timeouts: ``(connect, read)`` for this request instead of those of the pool;
            its connection then ends with the response.

        Raises:
            InvalidHeader: a header name or value holds CR, LF or NUL, or is not Latin-1.
            WireError, OSError: the exchange failed (see the module docstring).
        """
        head = self._head(method, headers, body)
        connect_timeout = timeouts[0] if timeouts is not None else self._connect_timeout
        conn = self._get(binding, connect_timeout)
        while True:
            reused = conn.requests > 0
            try:
                response = self._exchange(conn, binding, method, head, body, timeouts)
            except (_NothingReceived, BrokenPipeError, ConnectionResetError):
                binding.unbind()
                conn.close()
                if not reused:
                    raise
                # A server may close an idle keep-alive connection just as it is reused
                # (RFC 9112, 9.3.1): the request never reached it. Once more, on a new one.
                conn = self._connect(binding, connect_timeout)
                continue
            except BaseException:
                binding.unbind()
                conn.close()
                raise
            if timeouts is not None:
                response._keep_alive = False
            return response

    def _exchange(
        self,
        conn: _Connection,
        binding: Binding,
        method: str,
        head: bytes,
        body: bytes | None,
        timeouts: tuple[float, float] | None,
    ) -> Response:
        """Write the request on ``conn`` and read the head of its response.

        Raises:
            _NothingReceived, BrokenPipeError, ConnectionResetError: nothing of the
                response came (a reset after its first bytes is a :class:`Disconnected`).
        """
        sock = conn.sock
        if timeouts is not None:
            sock.settimeout(timeouts[1])
        if body and len(body) <= JOIN_BODY_BYTES:
            sock.sendall(head + body)
        else:
            sock.sendall(head)
            if body:
                sock.sendall(body)
        conn.requests += 1
        return self._response(conn, binding, method)

    def close(self) -> None:
        """Close the idle connections; a connection in use closes with its response."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ----------------------------------------------------------- internals

    def _head(self, method: str, headers: Iterable[tuple[str, str | bytes]], body: bytes | None) -> bytes:
        lines = [method.encode("ascii"), b" ", self._target, b" HTTP/1.1\r\n", self._fixed]
        texts: list[str] = []
        for name, value in headers:
            if isinstance(value, str) and isinstance(name, str):
                texts += (name, ": ", value, "\r\n")
            else:
                lines += (_header_bytes(name), b": ", _header_bytes(value), b"\r\n")
        if texts:
            # One check and one encoding for all the text headers: each holds one CR and one LF.
            text = "".join(texts)
            if text.count("\n") * 4 != len(texts) or text.count("\r") * 4 != len(texts) or "\x00" in text:
                raise InvalidHeader("a header holds CR, LF or NUL")
            try:
                lines.append(text.encode("latin-1"))
            except UnicodeEncodeError:
                raise InvalidHeader("a header is not Latin-1") from None
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d\r\n" % (len(body) if body else 0))
        lines.append(b"\r\n")
        return b"".join(lines)

    def _get(self, binding: Binding, connect_timeout: float) -> _Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                break
            if conn.idle_and_open():
                binding.bind(conn.raw)
                return conn
            conn.close()
        return self._connect(binding, connect_timeout)

    def _put(self, conn: _Connection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def _context(self) -> ssl.SSLContext:
        context = self._ssl_context
        if callable(context):
            context = context()
            self._ssl_context = context
        return context

    def _connect(self, binding: Binding, timeout: float) -> _Connection:
        if self._proxy is not None:
            _scheme, host, port = self._proxy
        else:
            host, port = self.host, self.port
        try:
            raw = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            if self._proxy is not None:
                raise ProxyRefused("the connection to the proxy failed") from exc
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout() from None
            if isinstance(exc, (socket.gaierror, ConnectionRefusedError)):
                raise
            raise ConnectionFailed() from exc
        with self._lock:
            self.opened += 1
        sock: Any = raw
        try:
            binding.bind(raw)
            for level, option, value in self._socket_options:
                try:
                    raw.setsockopt(level, option, value)
                except OSError:
                    pass
            proxy_tls = self._proxy is not None and self._proxy[0] == "https"
            if self._proxy is not None:
                try:
                    if proxy_tls:
                        sock = raw = self._handshake(raw, self._proxy[1], binding)
                    if self.scheme == "https":
                        self._tunnel(sock)
                except (OSError, ProxyRefused) as exc:
                    if isinstance(exc, ProxyRefused):
                        raise
                    raise ProxyRefused("the proxy did not open a tunnel") from exc
            if self.scheme == "https":
                if not proxy_tls:
                    sock = raw = self._handshake(raw, self.host, binding)
                else:
                    from urllib3.util.ssltransport import SSLTransport

                    sock = SSLTransport(sock, self._context(), server_hostname=self.host)
            raw.settimeout(self._read_timeout)
        except TimeoutError:
            raw.close()
            raise ConnectTimeout() from None
        except BaseException:
            raw.close()
            raise
        return _Connection(sock, raw)

    def _handshake(self, raw: socket.socket, host: str, binding: Binding) -> ssl.SSLSocket:
        """TLS over ``raw``; the TLS socket owns the file descriptor from now on."""
        sock = self._context().wrap_socket(raw, server_hostname=host, do_handshake_on_connect=False)
        try:
            binding.bind(sock)
            sock.do_handshake()
        except BaseException:
            sock.close()
            raise
        return sock

    def _tunnel(self, sock: Any) -> None:
        """``CONNECT`` through the proxy; the head of its answer is read byte by byte."""
        authority = _host_header(self.host, self.port, -1)
        lines = [f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n".encode("ascii")]
        if self._proxy_auth is not None:
            lines.append(b"Proxy-Authorization: " + self._proxy_auth + b"\r\n")
        lines.append(b"\r\n")
        sock.sendall(b"".join(lines))
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            byte = sock.recv(1)
            if not byte:
                raise ProxyRefused("the proxy closed the connection")
            head += byte
            if len(head) > MAX_HEAD_BYTES:
                raise ProxyRefused("the answer of the proxy is too long")
        status_line = head.split(b"\r\n", 1)[0].split(None, 2)
        if len(status_line) < 2 or not status_line[1].isdigit() or not 200 <= int(status_line[1]) < 300:
            raise ProxyRefused("the proxy did not open a tunnel")

    def _response(self, conn: _Connection, binding: Binding, method: str) -> Response:
        while True:
            status, version, headers = self._read_head(conn)
            if 100 <= status < 200:
                if status == 101:
                    raise InvalidHttp("the server switched the protocol")
                continue
            break
        connection = headers.get("connection")
        if connection is None:
            keep_alive = version != b"HTTP/1.0"
        else:
            tokens = {t.strip() for t in connection.lower().split(",")}
            keep_alive = "close" not in tokens and (version != b"HTTP/1.0" or "keep-alive" in tokens)
        no_body = method == "HEAD" or status in (204, 304)
        return Response(self, conn, binding, status, headers, keep_alive=keep_alive, no_body=no_body)

    def _read_head(self, conn: _Connection) -> tuple[int, bytes, dict[str, str]]:
        buffer = conn.buffer
        start = 0
        while True:
            end = buffer.find(b"\r\n\r\n", start)
            if end >= 0:
                break
            if len(buffer) > MAX_HEAD_BYTES:
                raise InvalidHttp("the head of the response is too long")
            start = max(0, len(buffer) - 3)
            try:
                data = conn.recv()
            except ConnectionResetError:
                if buffer:
                    raise Disconnected("the connection closed before the end of the response") from None
                raise
            if not data:
                conn.buffer = b""
                if not buffer:
                    raise _NothingReceived("the connection closed before the end of the response")
                raise Disconnected("the connection closed before the end of the response")
            buffer = buffer + data if buffer else data
        if end > MAX_HEAD_BYTES:
            raise InvalidHttp("the head of the response is too long")
        conn.buffer = buffer[end + 4 :]
        lines = buffer[:end].split(b"\r\n")
        status_line = lines[0].split(None, 2)
        if (
            len(status_line) < 2
            or not status_line[0].startswith(b"HTTP/1.")
            or len(status_line[1]) != 3
            or not status_line[1].isdigit()
        ):
            raise InvalidHttp("the status line of the response is not valid")
        if len(lines) > MAX_HEADERS + 1:
            raise InvalidHttp("the response has too many headers")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                if line[:1] in (b" ", b"\t"):
                    raise InvalidHttp("the response folds a header line")
                raise InvalidHttp("a header line of the response is not valid")
            key = name.decode("latin-1").lower()
            text = value.strip(b" \t").decode("latin-1")
            previous = headers.get(key)
            headers[key] = text if previous is None else f"{previous}, {text}"
        return int(status_line[1]), status_line[0], headers


def _header_bytes(value: str | bytes) -> bytes:
    try:
        data = value if isinstance(value, bytes) else value.encode("latin-1")
    except UnicodeEncodeError:
        raise InvalidHeader("a header is not Latin-1") from None
    if b"\r" in data or b"\n" in data or b"\x00" in data:
        raise InvalidHeader("a header holds CR, LF or NUL")
    return data
