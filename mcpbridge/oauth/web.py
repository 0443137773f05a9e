"""The HTTP client of the sign-in: metadata, registration and token requests.

It has the trust, the proxy rules, the retry policy and the error texts of the
HTTP transport of the upstream server (:mod:`mcpbridge.mcp.httpwire`): the TLS
context of the system verifier plus ``--ca-file``,
``HTTPS_PROXY``/``ALL_PROXY``/``NO_PROXY`` as :func:`~mcpbridge.mcp.httpwire.proxy_for`
resolves them (a loopback host never goes through a proxy), nothing sent twice,
``Accept-Encoding: identity``, no redirects, no cookies, no ``.netrc``. A body
is at most :data:`MAX_BODY_BYTES`. Each request is bounded by a connect and a
read time limit.

No error and no log line holds a URL, a form value or a token.
"""

from __future__ import annotations

import json
import logging
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ..mcp.httpwire import proxy_for
from .errors import OAuthError

if TYPE_CHECKING:
    import requests

__all__ = ["MAX_BODY_BYTES", "WebClient", "WebError", "WebResponse"]

log = logging.getLogger("mcpbridge.oauth")

#: Metadata, registration and token answers are small.
MAX_BODY_BYTES: Final = 1024 * 1024
CONNECT_TIMEOUT: Final = 10.0
READ_TIMEOUT: Final = 30.0


class WebError(OAuthError):
    """A request of the sign-in that got no HTTP answer; the message is a short detail."""


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


class WebClient:
    """One ``requests`` session for the requests of the sign-in (thread-safe).

    :param ssl_context: the trust of the upstream transport (system store plus ``--ca-file``).
    :param env: the proxy variables.
    :param deadline: a :func:`time.monotonic` time for a caller with one time limit for
        several requests: no request starts after it, and each gets half the time left
        for its connect and half for its reads (at most the time limits above).
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
    ) -> None:
        import http.cookiejar

        import requests

        self._env = dict(env)
        self._timeouts = (connect_timeout, read_timeout)
        self._deadline = deadline
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
        self._session.close()

    def _describe(self, exc: BaseException, timeouts: tuple[float, float]) -> str:
        """A detail of a failed request without the URL: the text of the HTTP transport's edge.

        requests wraps the error of urllib3 as its first argument.
        """
        from ..mcp.httppool import edge_error

        inner = exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else exc
        connect, read = timeouts
        error = edge_error(inner, connect_timeout=connect, read_timeout=read)
        return error.detail or error.cause

    def _request_timeouts(self) -> tuple[float, float]:
        """The connect and read time limits of the next request, within the deadline.

        Raises:
            WebError: the deadline has passed.
        """
        if self._deadline is None:
            return self._timeouts
        half = (self._deadline - time.monotonic()) / 2
        if half <= 0:
            raise WebError("no time left")
        connect, read = self._timeouts
        return min(connect, half), min(read, half)

    def _send(self, method: str, url: str, *, headers: Mapping[str, str], data: Any = None) -> WebResponse:
        import requests

        timeouts = self._request_timeouts()
        scheme = urlsplit(url).scheme.lower()
        proxies: dict[str, str] = {}
        proxy = proxy_for(url, self._env)
        if proxy is not None:
            proxies = {scheme: proxy[1]}
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
            raise WebError(self._describe(exc, timeouts)) from exc
        try:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > MAX_BODY_BYTES:
                raise WebError(f"an answer longer than {MAX_BODY_BYTES} bytes")
            chunks: list[bytes] = []
            size = 0
            try:
                for chunk in response.iter_content(64 * 1024):
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise WebError(f"an answer longer than {MAX_BODY_BYTES} bytes")
                    chunks.append(chunk)
            except requests.RequestException as exc:
                raise WebError(self._describe(exc, timeouts)) from exc
            media = (response.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            return WebResponse(response.status_code, b"".join(chunks), media)
        finally:
            response.close()


def _adapter(ssl_context: ssl.SSLContext) -> Any:
    import requests.adapters

    from ..mcp.httppool import SEND_ONCE

    class Adapter(requests.adapters.HTTPAdapter):
        """One TLS context; no certifi bundle."""

        def __init__(self) -> None:
            super().__init__(pool_connections=4, pool_maxsize=8, max_retries=SEND_ONCE)

        def init_poolmanager(
            self, connections: int, maxsize: int, block: bool = False, **kwargs: Any
        ) -> None:
            kwargs["ssl_context"] = ssl_context
            super().init_poolmanager(connections, maxsize, block, **kwargs)

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
            if proxy not in self.proxy_manager:
                kwargs["ssl_context"] = ssl_context
                if proxy.lower().startswith("https:"):
                    kwargs["proxy_ssl_context"] = ssl_context
            return super().proxy_manager_for(proxy, **kwargs)

        def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
            conn.cert_reqs = "CERT_REQUIRED"
            conn.ca_certs = None
            conn.ca_cert_dir = None

    return Adapter()
