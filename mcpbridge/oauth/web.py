"""The HTTP client of the sign-in: metadata, registration and token requests.

It has the trust, the proxy rules, the retry policy and the error texts of the
HTTP transport of the upstream server (:mod:`mcpbridge.mcp.transports.httpwire`): the TLS
context of the system verifier plus ``--ca-file``,
``HTTPS_PROXY``/``ALL_PROXY``/``NO_PROXY`` as :func:`~mcpbridge.mcp.transports.httpwire.proxy_for`
resolves them (a loopback host never goes through a proxy), nothing sent twice,
``Accept-Encoding: identity``, no redirects, no cookies, no ``.netrc``. A body
is at most :data:`MAX_BODY_BYTES`.

Time limits
-----------

Each request (a *call*: its connect, its head and its whole body) ends by one
deadline: the earliest of the call's own limit (:data:`CALL_TIMEOUT`, or the
sign-in time limit that the authorizer gives), the deadline of the client and
the deadline of the request of the client that needs the sign-in
(:meth:`WebClient.within`). The connect and each read have their own limits
too, never longer than the time left. A server that sends its answer one byte
at a time resets no limit: a watchdog thread of the call shuts the socket of
the call down at its deadline, and the cancel token of the request does the
same at once when it fires; the call then fails with :class:`WebTimeout` or
:class:`~mcpbridge.mcp.errors.Cancelled`, and its connection is closed.

No error and no log line holds a URL, a form value or a token.
"""

from __future__ import annotations

import copy
import enum
import json
import logging
import math
import socket
import ssl
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ..mcp.cancel import CancelToken
from ..mcp.deadline import Deadline
from ..mcp.errors import Cancelled
from ..mcp.numbers import OutOfRange, peer_int
from ..mcp.transports.httpwire import Exchange, proxy_for
from .errors import OAuthError

if TYPE_CHECKING:
    import requests

__all__ = ["CALL_TIMEOUT", "MAX_BODY_BYTES", "WebClient", "WebError", "WebResponse", "WebTimeout"]

log = logging.getLogger("mcpbridge.oauth")

#: Metadata, registration and token answers are small.
MAX_BODY_BYTES: Final = 1024 * 1024
CONNECT_TIMEOUT: Final = 10.0
READ_TIMEOUT: Final = 30.0
#: The longest a call may take when nothing gives it a shorter limit.
CALL_TIMEOUT: Final = CONNECT_TIMEOUT + READ_TIMEOUT
#: The name of the watchdog thread of a call.
WATCHDOG_NAME: Final = "mcpbridge-sign-in-call"
#: The wait for the watchdog thread of a call at its end (it ends at once: it only waits).
JOIN_TIMEOUT: Final = 2.0


class WebError(OAuthError):
    """A request of the sign-in that got no HTTP answer; the message is a short detail."""


class WebTimeout(WebError):
    """A call that did not end by its deadline; ``seconds`` is the time it had."""

    def __init__(self, detail: str, seconds: float) -> None:
        super().__init__(detail)
        self.seconds = seconds


class WebResponse:
    """An HTTP answer: its status and its body as JSON (``None`` when the body is not JSON)."""

    def __init__(self, status: int, body: bytes, content_type: str) -> None:
        self.status = status
        self.content_type = content_type
        self.json: Any = None
        if body:
            try:
                self.json = json.loads(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                self.json = None


class _Stop(enum.Enum):
    """Why a call was stopped (by its watchdog thread or the cancel token's callback)."""

    DEADLINE = "deadline"
    CANCEL = "cancel"


class _Call:
    """One request in flight: its deadline, its cancel token, and the socket under it.

    While the call runs, a watchdog thread waits for its deadline and the cancel token
    has a callback; either shuts the socket of the call down (:class:`Exchange`), which
    wakes a read that a server keeps alive one byte at a time.
    """

    def __init__(self, deadline: Deadline, cancel: CancelToken | None) -> None:
        self.deadline = deadline
        self.exchange = Exchange()
        self._cancel = cancel
        self._lock = threading.Lock()
        #: Why the call was stopped; None while it may run.
        self.stopped: _Stop | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._remove_callback: Any = None

    def __enter__(self) -> _Call:
        self.check()
        if self._cancel is not None:
            self._remove_callback = self._cancel.add_callback(lambda: self._stop(_Stop.CANCEL))
        self._thread = threading.Thread(target=self._watch, name=WATCHDOG_NAME, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.exchange.unbind()
        self._done.set()
        if self._remove_callback is not None:
            self._remove_callback()
        thread = self._thread
        if thread is not None:
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("the watchdog of a sign-in request did not stop in %d s", JOIN_TIMEOUT)

    def _watch(self) -> None:
        if not self.deadline.wait_event(self._done):
            self._stop(_Stop.DEADLINE)

    def _stop(self, why: _Stop) -> None:
        with self._lock:
            if self.stopped is None:
                self.stopped = why
        self.exchange.abort()

    def check(self) -> None:
        """Raise the error of a stopped call, or of one whose deadline has passed.

        Raises:
            Cancelled: the cancel token fired.
            WebTimeout: the deadline passed.
        """
        with self._lock:
            if self.stopped is None:
                if self._cancel is not None and self._cancel.cancelled:
                    self.stopped = _Stop.CANCEL
                elif self.deadline.expired:
                    self.stopped = _Stop.DEADLINE
            stopped = self.stopped
        if stopped is _Stop.CANCEL:
            assert self._cancel is not None
            raise Cancelled(self._cancel.reason or None)
        if stopped is _Stop.DEADLINE:
            seconds = self.deadline.span
            raise WebTimeout(f"no complete answer in {_seconds_text(seconds)}", seconds)


def _seconds_text(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds - 1e-6))} s"


_calling = threading.local()


def _bind(sock: Any) -> None:
    """Give the socket of a connection to the call of this thread (its TCP socket under TLS)."""
    call: _Call | None = getattr(_calling, "call", None)
    while sock is not None and not isinstance(sock, socket.socket):
        sock = getattr(sock, "socket", None)
    if call is not None and sock is not None:
        call.exchange.bind(sock)


class WebClient:
    """One ``requests`` session for the requests of the sign-in (thread-safe).

    :param ssl_context: the trust of the upstream transport (system store plus ``--ca-file``).
    :param env: the proxy variables.
    :param deadline: a :func:`time.monotonic` time for a caller with one time limit for
        several requests: no request starts after it, each ends by it, and each gets half
        the time left for its connect and half for its reads (at most the time limits above).
    :param call_timeout: the longest one request may take (see the module docstring).
    """

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        env: Mapping[str, str],
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        user_agent: str = "mcp-bridge-vscode",
        deadline: float | None = None,
        call_timeout: float = CALL_TIMEOUT,
    ) -> None:
        import http.cookiejar

        import requests

        self._env = dict(env)
        self._timeouts = (connect_timeout, read_timeout)
        self._deadline = deadline
        self._call_timeout = call_timeout
        self._request_deadline: float | None = None
        self._cancel: CancelToken | None = None
        self._owner = True
        session = requests.Session()
        session.trust_env = False
        session.headers.clear()
        session.headers["User-Agent"] = user_agent
        session.headers["Accept-Encoding"] = "identity"
        session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        adapter = _adapter(ssl_context)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        self._session = session

    def within(
        self, *, deadline: float | None, cancel: CancelToken | None, call_timeout: float | None = None
    ) -> WebClient:
        """This client for the requests of one request of the client: they end by ``deadline``
        (:func:`time.monotonic`; ``None``: no such deadline) and stop when ``cancel`` fires.

        ``call_timeout`` replaces the longest time of one request. The view shares the
        session; closing it closes nothing.
        """
        view = copy.copy(self)
        view._request_deadline = deadline
        view._cancel = cancel
        view._owner = False
        if call_timeout is not None:
            view._call_timeout = call_timeout
        return view

    def get_json(self, url: str) -> WebResponse:
        """GET ``url`` with ``Accept: application/json``."""
        return self._send("GET", url, headers={"Accept": "application/json"})

    def post_form(
        self, url: str, form: Mapping[str, str], headers: Mapping[str, str] | None = None
    ) -> WebResponse:
        """POST an ``application/x-www-form-urlencoded`` body (token requests)."""
        all_headers = {"Accept": "application/json", **(headers or {})}
        return self._send("POST", url, headers=all_headers, data=dict(form))

    def post_json(self, url: str, body: Any) -> WebResponse:
        """POST a JSON body (dynamic registration)."""
        data = json.dumps(body).encode("utf-8")
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        return self._send("POST", url, headers=headers, data=data)

    def close(self) -> None:
        if self._owner:
            self._session.close()

    def _describe(self, exc: BaseException, timeouts: tuple[float, float]) -> str:
        """A detail of a failed request without the URL: the text of the HTTP transport's edge.

        requests wraps the error of urllib3 as its first argument.
        """
        from ..mcp.transports.httppool import edge_error

        inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
        connect, read = timeouts
        error = edge_error(inner, connect_timeout=connect, read_timeout=read)
        return error.detail or error.cause

    def _new_call(self) -> tuple[_Call, tuple[float, float]]:
        """The call of the next request, and its connect and read time limits within its deadline.

        Raises:
            WebTimeout: no time is left (detail ``no time left``).
            Cancelled: the cancel token has fired.
        """
        limits = [limit for limit in (self._deadline, self._request_deadline) if limit is not None]
        deadline = Deadline(self._call_timeout, until=min(limits, default=None))
        if self._cancel is not None and self._cancel.cancelled:
            raise Cancelled(self._cancel.reason or None)
        left = deadline.span
        if left <= 0:
            raise WebTimeout("no time left", 0.0)
        connect, read = self._timeouts
        if self._deadline is not None:
            half = Deadline(None, until=self._deadline).span / 2
            connect, read = min(connect, half), min(read, half)
        return _Call(deadline, self._cancel), (min(connect, left), min(read, left))

    def _send(self, method: str, url: str, *, headers: Mapping[str, str], data: Any = None) -> WebResponse:
        import requests

        call, timeouts = self._new_call()
        scheme = urlsplit(url).scheme.lower()
        proxies: dict[str, str] = {}
        proxy = proxy_for(url, self._env)
        if proxy is not None:
            proxies = {scheme: proxy[1]}
        with call:
            _calling.call = call
            try:
                response: requests.Response = self._session.request(
                    method,
                    url,
                    headers=dict(headers),
                    data=data,
                    timeout=timeouts,
                    allow_redirects=False,
                    stream=True,
                    proxies=proxies,
                    verify=True,
                )
            except requests.RequestException as exc:
                call.check()
                raise WebError(self._describe(exc, timeouts)) from exc
            finally:
                _calling.call = None
            try:
                return self._answer(call, response, timeouts)
            finally:
                response.close()

    def _answer(self, call: _Call, response: requests.Response, timeouts: tuple[float, float]) -> WebResponse:
        """Read the body of ``response`` in pieces, checking the call between them."""
        import requests

        length = response.headers.get("Content-Length")
        if length is not None:
            try:
                peer_int(length, name="Content-Length", low=0, high=MAX_BODY_BYTES)
            except OutOfRange as exc:
                # Text that is no length is left to urllib3, which reads such a body to its end.
                if length.strip(" \t").isascii() and length.strip(" \t").isdigit():
                    raise WebError(f"an answer longer than {MAX_BODY_BYTES} bytes") from exc
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_content(64 * 1024):
                call.check()
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise WebError(f"an answer longer than {MAX_BODY_BYTES} bytes")
                chunks.append(chunk)
        except requests.RequestException as exc:
            call.check()
            raise WebError(self._describe(exc, timeouts)) from exc
        call.check()
        media = (response.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        return WebResponse(response.status_code, b"".join(chunks), media)


def _adapter(ssl_context: ssl.SSLContext) -> Any:
    import requests.adapters
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    from ..mcp.transports.httppool import SEND_ONCE

    class Connection(HTTPConnection):
        """Gives its socket to the call of the thread (a new one, or a kept-alive one)."""

        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            _bind(sock)
            return sock

        def request(self, *args: Any, **kwargs: Any) -> None:
            _bind(self.sock)
            super().request(*args, **kwargs)

    class TlsConnection(HTTPSConnection):
        """As ``Connection`` above; after the handshake, the TLS socket is the one to shut down."""

        def _new_conn(self) -> socket.socket:
            sock = super()._new_conn()
            _bind(sock)
            return sock

        def connect(self) -> None:
            super().connect()
            _bind(self.sock)

        def request(self, *args: Any, **kwargs: Any) -> None:
            _bind(self.sock)
            super().request(*args, **kwargs)

    class Pool(HTTPConnectionPool):
        ConnectionCls = Connection

    class TlsPool(HTTPSConnectionPool):
        ConnectionCls = TlsConnection

    pools = {"http": Pool, "https": TlsPool}

    class Adapter(requests.adapters.HTTPAdapter):
        """One TLS context; no certifi bundle; connections whose calls can stop them."""

        def __init__(self) -> None:
            super().__init__(pool_connections=4, pool_maxsize=8, max_retries=SEND_ONCE)

        def init_poolmanager(
            self, connections: int, maxsize: int, block: bool = False, **kwargs: Any
        ) -> None:
            kwargs["ssl_context"] = ssl_context
            super().init_poolmanager(connections, maxsize, block, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
            if proxy not in self.proxy_manager:
                kwargs["ssl_context"] = ssl_context
                if proxy.lower().startswith("https:"):
                    kwargs["proxy_ssl_context"] = ssl_context
            manager = super().proxy_manager_for(proxy, **kwargs)
            manager.pool_classes_by_scheme = pools
            return manager

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED"
            conn.ca_certs = None
            conn.ca_cert_dir = None

    return Adapter()
