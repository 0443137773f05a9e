"""The urllib3 pool on :mod:`.httpwire`: connections, the exchange link, errors of the edge.

The transports import this module at their first :func:`open_wire`, so that the
bridge answers its first messages before it loads urllib3 and :mod:`ssl`.
See :mod:`.httpwire` for the theory of operation.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from queue import Empty, Full
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import quote, urlsplit

import urllib3
from urllib3 import exceptions as u3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.retry import Retry

from ..errorbase import PeerFault
from ..errors import Closed, ConnectFailed, InvalidResponse, McpError, TransportFailed
from .httpwire import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_POOL_SIZE,
    DEFAULT_READ_TIMEOUT,
    DRAIN_BYTES,
    DRAIN_WAIT,
    IDLE_REUSE_LIMIT,
    READ_CHUNK,
    BodyTooLarge,
    ConnectError,
    Exchange,
    OnceTlsContext,
    ProxyFailed,
    ReadTimedOut,
    StreamBroken,
    TlsFailed,
    checked_proxy,
    content_length,
    proxy_parts,
    quickack,
    seconds_text,
    socket_options,
    tls_context,
)

if TYPE_CHECKING:
    import ssl

__all__ = ["SEND_ONCE", "Wire", "WireResponse", "edge_error", "open_wire"]

_SAFE_TARGET: Final = "!#$%&'()*+,/:;=?@[]~"

#: The retry policy of every request: nothing is sent again. A failed connect sent
#: nothing (it fails at once); a request that was written may have reached the server.
SEND_ONCE: Final = Retry(
    total=None,
    connect=0,
    read=0,
    redirect=0,
    status=0,
    other=0,
    status_forcelist=(),
    raise_on_redirect=False,
    raise_on_status=False,
    respect_retry_after_header=False,
)


class _ProxyStep(PeerFault, OSError):
    """The proxy refused the tunnel (a ``CONNECT`` status other than 2xx); ``status`` if known."""

    def __init__(self, status: int | None) -> None:
        super().__init__("the proxy did not open a tunnel")
        self.status = status


def _tls_detail(inner: BaseException | None) -> str:
    import ssl

    if isinstance(inner, ssl.SSLCertVerificationError):
        if inner.verify_code in (62, 64):  # X509_V_ERR_HOSTNAME_MISMATCH, _IP_ADDRESS_MISMATCH
            return "TLS: the certificate of the server is not for its host name"
        return "TLS: the certificate of the server is not trusted"
    if type(inner).__name__ == "CertificateError" or isinstance(inner, ValueError):
        return "TLS: the certificate of the server is not for its host name"
    return "TLS: the handshake failed"


def _address(exc: u3.NewConnectionError) -> dict[str, Any]:
    """The host and the port of the connection that failed (no secret: not the path or the
    query), as the keywords of :class:`ConnectError`; empty when urllib3 does not say."""
    conn = getattr(exc, "conn", None)
    host, port = getattr(conn, "host", None), getattr(conn, "port", None)
    if not isinstance(host, str) or not host or not isinstance(port, int):
        return {}
    return {"host": host, "port": port}


def _host_port(address: dict[str, Any]) -> str:
    """The host and the port in the words of the first log line (``host:port`` is redacted
    there, as urllib3 writes it in its errors beside the path)."""
    return f"the host {address['host']}, port {address['port']}"


def edge_error(exc: BaseException, *, connect_timeout: float, read_timeout: float) -> McpError:
    """The error of a failed exchange; its detail names the failing step, never the URL.

    The caller raises it ``from exc``. urllib3 says what failed through its classes and
    the one error each holds (``reason``, ``original_error``, the second argument of a
    :class:`~urllib3.exceptions.ProtocolError`).
    """
    if isinstance(exc, u3.MaxRetryError) and exc.reason is not None:
        return edge_error(exc.reason, connect_timeout=connect_timeout, read_timeout=read_timeout)
    if isinstance(exc, u3.ProxyError):
        inner = exc.original_error
        step = inner if isinstance(inner, _ProxyStep) else getattr(inner, "__cause__", None)
        if isinstance(step, _ProxyStep):
            status = f" (HTTP status {step.status})" if step.status is not None else ""
            return ProxyFailed(f"proxy: the proxy did not open a tunnel{status}")
        if isinstance(inner, (u3.SSLError, OSError)) and "SSL" in type(inner).__name__:
            return ProxyFailed("proxy: the TLS handshake with the proxy failed")
        if isinstance(inner, u3.ConnectTimeoutError) and not isinstance(inner, u3.NewConnectionError):
            return ProxyFailed(f"proxy: no connection to the proxy in {seconds_text(connect_timeout)}")
        return ProxyFailed("proxy: the connection to the proxy failed")
    if isinstance(exc, u3.SSLError):
        wrapped = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc.__cause__
        return TlsFailed(_tls_detail(wrapped))
    if isinstance(exc, u3.NameResolutionError):
        return ConnectError("connect: the host name does not resolve", **_address(exc))
    if isinstance(exc, u3.NewConnectionError):
        address = _address(exc)
        if isinstance(exc.__cause__, ConnectionRefusedError):
            where = f" at {_host_port(address)}" if address else ""
            return ConnectError(
                f"connect: nothing listens{where} (the connection was refused)", refused=True, **address
            )
        return ConnectError("connect: the connection failed", **address)
    if isinstance(exc, u3.ConnectTimeoutError):
        return ConnectError(f"connect: no connection in {seconds_text(connect_timeout)}")
    if isinstance(exc, u3.ReadTimeoutError):
        return ReadTimedOut(f"read: no data in {seconds_text(read_timeout)}")
    if isinstance(exc, u3.DecodeError):
        return InvalidResponse("the content encoding of the response is not valid")
    if isinstance(exc, u3.ProtocolError):
        cause = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], BaseException) else None
        if isinstance(cause, _ProxyStep):
            status = f" (HTTP status {cause.status})" if cause.status is not None else ""
            return ProxyFailed(f"proxy: the proxy did not open a tunnel{status}")
        if isinstance(exc, u3.InvalidChunkLength):
            return StreamBroken("the response is not valid HTTP/1.1: a chunk size is not valid")
        if isinstance(cause, (http.client.RemoteDisconnected, http.client.IncompleteRead)):
            return StreamBroken("the connection closed before the end of the response")
        if isinstance(cause, (ConnectionResetError, BrokenPipeError)):
            return StreamBroken("the connection was reset")
        if isinstance(cause, http.client.HTTPException):
            return StreamBroken(f"the response is not valid HTTP/1.1 ({type(cause).__name__})")
        if isinstance(cause, TimeoutError):
            return ReadTimedOut(f"read: no data in {seconds_text(read_timeout)}")
        return StreamBroken("the connection failed during the exchange")
    if isinstance(exc, u3.ClosedPoolError):
        return Closed("the connection to the upstream server is closed")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return StreamBroken("the connection was reset")
    if isinstance(exc, TimeoutError):
        return ReadTimedOut(f"read: no data in {seconds_text(read_timeout)}")
    return TransportFailed(f"the request failed ({type(exc).__name__})")


# ---------------------------------------------------------------------------------------------
# urllib3 underneath: the connection and pool classes
# ---------------------------------------------------------------------------------------------

#: The exchange of the request that the current thread sends (set around ``urlopen``).
_sending = threading.local()


class _Head(http.client.HTTPResponse):
    """The head of an answer: every interim (1xx) answer is skipped, not only ``100``."""

    def __init__(self, sock: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.tcp = sock

    def _read_status(self) -> tuple[str, int, str]:
        while True:
            quickack(self.tcp)
            version, status, reason = super()._read_status()  # type: ignore[misc]
            if status == 100 or status == 101 or not 100 <= status < 200:
                return version, status, reason
            while True:  # the header lines of the interim answer
                line = self.fp.readline(http.client._MAXLINE + 1)  # type: ignore[attr-defined]
                if len(line) > http.client._MAXLINE:  # type: ignore[attr-defined]
                    raise http.client.LineTooLong("header line")
                if line in (b"\r\n", b"\n", b""):
                    break


class _Wired:
    """What both connection classes add to urllib3's: the exchange link, QUICKACK, idle age."""

    tcp: socket.socket | None = None
    exchange: Exchange | None = None
    idle_since: float = 0.0
    context_factory: Callable[[], ssl.SSLContext] | None = None

    def _new_conn(self) -> socket.socket:
        sock: socket.socket = super()._new_conn()  # type: ignore[misc]
        self.tcp = sock
        exchange = getattr(_sending, "exchange", None)
        if exchange is not None:
            self.exchange = exchange
            exchange.bind(sock)  # shuts it down at once when the exchange was aborted
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        exchange = getattr(_sending, "exchange", None)
        self.exchange = exchange
        sock = getattr(self, "sock", None)
        if sock is not None:
            # A drain at the close of the last answer may have shortened the timeout.
            sock.settimeout(getattr(self, "timeout", None))
            if exchange is not None and self.tcp is not None:
                exchange.bind(self.tcp)
        super().request(*args, **kwargs)  # type: ignore[misc]

    # close() keeps the exchange: http.client closes the connection of an answer that ends
    # with the connection while that answer is still read from the socket. The link goes
    # when the connection goes back to the pool, or when the answer is closed.

    def _tunnel(self) -> None:
        try:
            super()._tunnel()  # type: ignore[misc]
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                raise
            found = re.search(r"\b([1-5][0-9][0-9])\b", str(exc))
            raise _ProxyStep(int(found.group(1)) if found else None) from exc


class _Connection(_Wired, HTTPConnection):
    response_class = _Head


class _TlsConnection(_Wired, HTTPSConnection):
    response_class = _Head

    def connect(self) -> None:
        factory = self.context_factory
        if self.ssl_context is None and factory is not None:
            self.ssl_context = factory()
        super().connect()
        # The TLS socket took over the file descriptor of the TCP socket (which is detached
        # now): the exchange and QUICKACK use it from here on. Through an https proxy, the
        # descriptor is under the proxy's TLS socket.
        sock: Any = self.sock
        while sock is not None and not isinstance(sock, socket.socket):
            sock = getattr(sock, "socket", None)
        if sock is not None:
            self.tcp = sock
            exchange = getattr(_sending, "exchange", None)
            if exchange is not None:
                exchange.bind(sock)


class _PoolMixin:
    """Forget the exchange before a connection goes back to the pool; drop one idle too long.

    ``clock`` gives the idle ages; :class:`Wire` sets it in the pool classes it makes, since
    urllib3 makes the pools of a proxy itself and takes no other constructor argument.
    """

    clock: Callable[[], float] = staticmethod(time.monotonic)

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn: Any = super()._get_conn(timeout)  # type: ignore[misc]
        idle_since = getattr(conn, "idle_since", None)
        if (
            idle_since is not None
            and getattr(conn, "sock", None) is not None
            and self.clock() - idle_since > IDLE_REUSE_LIMIT
        ):
            conn.close()
        return conn

    def close_idle(self) -> int:
        """Close the pooled connections idle longer than :data:`IDLE_REUSE_LIMIT`; how many.

        They would not be reused (:meth:`_get_conn` closes them first): closing them
        now gives their descriptors back while the connection rests. Each stays in the
        pool, closed, and connects again at its next use.
        """
        queue = getattr(self, "pool", None)
        if queue is None:  # the pool is closed
            return 0
        now = self.clock()
        held: list[Any] = []
        closed = 0
        while True:
            try:
                conn = queue.get(block=False)
            except Empty:
                break
            held.append(conn)
            idle_since = getattr(conn, "idle_since", None)
            if (
                idle_since is not None
                and getattr(conn, "sock", None) is not None
                and now - idle_since > IDLE_REUSE_LIMIT
            ):
                conn.close()
                closed += 1
        for conn in held:
            try:
                queue.put(conn, block=False)
            except Full:  # a request made a new one meanwhile: this one is not needed
                if conn is not None:
                    conn.close()
        return closed

    def _put_conn(self, conn: Any) -> None:
        if isinstance(conn, _Wired):
            exchange, conn.exchange = conn.exchange, None
            if exchange is not None:
                exchange.unbind()
            conn.idle_since = self.clock()
        super()._put_conn(conn)  # type: ignore[misc]


class _Pool(_PoolMixin, HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(_PoolMixin, HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


# ---------------------------------------------------------------------------------------------
# The wire
# ---------------------------------------------------------------------------------------------


class WireResponse:
    """The head of an answer and its body, to be read once; close it when done.

    The connection goes back to the pool when the body was read to its end, or when
    its rest (at most :data:`DRAIN_BYTES`) is here already at :meth:`close`.
    """

    __slots__ = ("status", "_raw", "_done", "_exchange", "_timeouts")

    def __init__(
        self, raw: urllib3.BaseHTTPResponse, exchange: Exchange | None, timeouts: tuple[float, float]
    ) -> None:
        self.status = raw.status
        self._raw: urllib3.BaseHTTPResponse | None = raw
        self._done = False
        self._exchange = exchange
        self._timeouts = timeouts

    def header(self, name: str) -> str | None:
        """The value of the header ``name`` (any case; repeated ones joined with ``", "``), or None."""
        raw = self._raw
        if raw is None:
            return None
        value: str | None = raw.headers.get(name)
        return value

    def _tcp(self, raw: urllib3.BaseHTTPResponse) -> Any:
        conn = raw.connection
        return conn.tcp if isinstance(conn, _Wired) else None

    def read_body(self, limit: int) -> bytes:
        """The whole body (at most ``limit`` bytes, decoded); the connection goes back to the pool.

        A body of unknown length is gathered in one buffer as it arrives, so one in many
        small chunks costs its bytes, not an object per chunk.

        Raises:
            BodyTooLarge: the body is longer than ``limit``.
        """
        raw = self._raw
        if raw is None:
            return b""
        length = content_length(raw.headers.get("Content-Length"))
        coding = (raw.headers.get("Content-Encoding") or "identity").strip().lower()
        if length is not None and coding in ("", "identity"):
            if length > limit:
                raise BodyTooLarge()
            quickack(self._tcp(raw))
            try:
                data: bytes = raw.read()
            except (u3.HTTPError, OSError) as exc:
                raise self._edge(exc) from exc
            self._done = True
            return data
        body = bytearray()
        while True:
            piece = self.read1(READ_CHUNK)
            if not piece:
                return bytes(body)
            if len(body) + len(piece) > limit:
                raise BodyTooLarge()
            body += piece

    def read(self, size: int) -> bytes:
        """The next ``size`` bytes of the body (fewer only at its end), ``b""`` at its end.

        Unlike :meth:`read1` it waits for all of them: each piece comes as one block, which
        urllib3 hands over without copying it again.
        """
        return self._pull("read", size)

    def read1(self, size: int) -> bytes:
        """The next bytes of the body as they arrive (at most ``size``), ``b""`` at its end."""
        return self._pull("read1", size)

    def _pull(self, how: Literal["read", "read1"], size: int) -> bytes:
        """``size`` bytes at most through urllib3's ``read`` or ``read1``; ``b""`` at the end."""
        raw = self._raw
        if raw is None or self._done:
            return b""
        quickack(self._tcp(raw))
        try:
            data: bytes = getattr(raw, how)(size)
        except (u3.HTTPError, OSError) as exc:
            raise self._edge(exc) from exc
        if not data:
            self._done = True
        return data

    def _edge(self, exc: BaseException) -> McpError:
        connect, read = self._timeouts
        return edge_error(exc, connect_timeout=connect, read_timeout=read)

    def close(self) -> None:
        raw, self._raw = self._raw, None
        if raw is None:
            return
        if not self._done:
            conn = raw.connection
            sock = getattr(conn, "sock", None)
            try:
                if sock is None:
                    raise OSError("no socket")
                sock.settimeout(DRAIN_WAIT)
                dropped = 0
                while dropped <= DRAIN_BYTES:
                    piece = raw.read1(READ_CHUNK)
                    if not piece:
                        return  # read to its end: urllib3 gave the connection back to the pool
                    dropped += len(piece)
            except Exception:  # noqa: BLE001 - not here yet: the connection ends with the answer
                pass
            raw.close()
        raw.release_conn()
        if self._exchange is not None:
            self._exchange.unbind()


class Wire:
    """The keep-alive connections to one URL (see the module docstring); thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext],
        proxy: str | None,
        headers: Sequence[tuple[str, str | bytes]],
        connect_timeout: float,
        read_timeout: float,
        pool_size: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        target = quote(target, safe=_SAFE_TARGET)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._headers: dict[str, str | bytes] = dict(headers)
        if callable(ssl_context):
            factory: Callable[[], ssl.SSLContext] = ssl_context
        else:
            fixed_context = ssl_context
            factory = lambda: fixed_context  # noqa: E731
        tls_connection = type("TlsConnection", (_TlsConnection,), {"context_factory": staticmethod(factory)})
        timed = {"clock": staticmethod(clock)}
        pool = type("Pool", (_Pool,), timed)
        tls_pool = type("TlsPool", (_TlsPool,), {"ConnectionCls": tls_connection, **timed})
        pool_kw: dict[str, Any] = {
            "maxsize": pool_size,
            "block": False,
            "timeout": urllib3.Timeout(connect=connect_timeout, read=read_timeout),
            "retries": SEND_ONCE,
            "socket_options": socket_options(),
        }
        tls_kw: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED"}
        self._manager: urllib3.ProxyManager | None = None
        if proxy is None:
            host = parts.hostname or ""
            if scheme == "https":
                self._pool: HTTPConnectionPool = tls_pool(host, parts.port or 443, **pool_kw, **tls_kw)
            else:
                self._pool = pool(host, parts.port or 80, **pool_kw)
            self._target = target
            return
        proxy_url, proxy_headers = proxy_parts(proxy)
        manager = urllib3.ProxyManager(
            proxy_url,
            num_pools=2,
            proxy_headers=proxy_headers,
            proxy_ssl_context=factory() if proxy_url.startswith("https:") else None,
            **pool_kw,
            **(tls_kw if scheme == "https" else {}),
        )
        manager.pool_classes_by_scheme = {"http": pool, "https": tls_pool}
        self._manager = manager
        self._pool = manager.connection_from_url(url)
        if scheme == "https":
            self._target = target  # through a CONNECT tunnel
        else:
            # A plain request through a proxy names the whole URL (http.client takes its Host from it).
            netloc = parts.netloc.rpartition("@")[2]
            self._target = f"http://{netloc}{target}"
            self._headers.update(proxy_headers)

    def request(
        self,
        method: str,
        headers: Iterable[tuple[str, str | bytes]],
        body: bytes | None,
        *,
        exchange: Exchange | None = None,
        read_timeout: float | None = None,
        connect_timeout: float | None = None,
    ) -> WireResponse:
        """Send one request and read the head of its answer; nothing is ever sent twice.

        Raises:
            ValueError: a header name or value cannot be sent (CR, LF, NUL, not Latin-1).
            McpError: the exchange failed (:func:`edge_error`), chained to urllib3's error.
        """
        all_headers: dict[str, Any] = dict(self._headers)
        all_headers.update(headers)
        connect = self._connect_timeout if connect_timeout is None else connect_timeout
        read = self._read_timeout if read_timeout is None else read_timeout
        _sending.exchange = exchange
        try:
            raw = self._pool.urlopen(
                method,
                self._target,
                body=body,
                headers=all_headers,
                retries=SEND_ONCE,
                redirect=False,
                assert_same_host=False,
                timeout=urllib3.Timeout(connect=connect, read=read),
                preload_content=False,
                decode_content=True,
            )
        except (ValueError, UnicodeError) as exc:
            if isinstance(exc, u3.HTTPError):
                raise edge_error(exc, connect_timeout=connect, read_timeout=read) from exc
            raise
        except (u3.HTTPError, OSError) as exc:
            raise edge_error(exc, connect_timeout=connect, read_timeout=read) from exc
        finally:
            _sending.exchange = None
        return WireResponse(raw, exchange, (connect, read))

    def close_idle(self) -> int:
        """Close the connections idle too long to be reused (see :meth:`_PoolMixin.close_idle`)."""
        return self._pool.close_idle()  # type: ignore[attr-defined, no-any-return]

    def close(self) -> None:
        """Close the idle connections; a connection in use closes with its answer."""
        self._pool.close()
        if self._manager is not None:
            self._manager.clear()


def open_wire(
    url: str,
    *,
    ca_file: str | None = None,
    ssl_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
    env: Mapping[str, str] | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float | None = None,
    headers: Sequence[tuple[str, str | bytes]] = (),
    clock: Callable[[], float] = time.monotonic,
) -> Wire:
    """The keep-alive connections to ``url``, through the proxy of its environment.

    The connections trust the system's verifier plus ``ca_file`` (the context is made
    at the first TLS connection when neither is given), read nothing from the
    environment but the proxy variables (loopback is never proxied), keep no cookies
    and ask for no compression. ``headers`` go into every request. ``clock`` gives the
    idle ages of the connections (:data:`IDLE_REUSE_LIMIT`).

    Raises:
        ConnectFailed: the URL is not http or https, or a proxy variable has a scheme
            other than http and https (the detail names the variable).
        CaFileError: ``ca_file`` cannot be used.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise ConnectFailed("the URL does not use http or https")
    context: ssl.SSLContext | Callable[[], ssl.SSLContext]
    if ssl_context is not None:
        context = ssl_context
    elif ca_file is not None:
        context = tls_context(ca_file)
    else:
        context = OnceTlsContext()  # one for the connections of this wire
    proxy = checked_proxy(url, os.environ if env is None else env)
    return Wire(
        url,
        ssl_context=context,
        proxy=proxy,
        headers=[
            ("User-Agent", f"mcp-bridge-vscode/{_version()}"),
            ("Accept-Encoding", "identity"),
            *headers,
        ],
        connect_timeout=connect_timeout,
        read_timeout=DEFAULT_READ_TIMEOUT if read_timeout is None else read_timeout,
        pool_size=pool_size,
        clock=clock,
    )


def _version() -> str:
    from ... import __version__

    return __version__
