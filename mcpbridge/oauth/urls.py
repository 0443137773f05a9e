"""The URL checks of the sign-in: the URLs the bridge calls, writes, elicits or opens.

An endpoint of the authorization server must be https and a safe URL (http only for a local
test: the endpoint and the upstream server both on loopback); the resource of
protected resource metadata must cover the URL of the upstream server; the well-known
URLs of RFC 9728 and RFC 8414 (and OpenID discovery) are made here. This module does no
I/O, starts no thread and reads no clock.
"""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from ..mcp.netloc import is_loopback

#: The longest authorization URL the bridge writes, elicits or opens.
MAX_AUTHORIZATION_URL_BYTES: Final = 8192


_NOT_IN_URL: Final = frozenset('"<>\\^`{|}')
_BAD_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_IPV6_TEXT: Final = re.compile(r"[0-9A-Fa-f:.]+\Z")
_PORT: Final = re.compile(r"[0-9]{1,5}\Z")
_HOST: Final = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=%]+\Z")


def _authority_problem(authority: str) -> str | None:
    if "@" in authority:
        return "it has user information"
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0 or not _IPV6_TEXT.match(authority[1:end]):
            return "its IPv6 address is not valid"
        host, rest = authority[: end + 1], authority[end + 1 :]
        if rest and not rest.startswith(":"):
            return "its host is not valid"
        port = rest[1:] if rest else None
    else:
        host, colon, port_text = authority.partition(":")
        port = port_text if colon else None
        if host and not _HOST.match(host):
            return "its host is not valid"
    if not host:
        return "it has no host"
    if port is not None and (not _PORT.match(port) or not 1 <= int(port) <= 65535):
        return "its port is not valid"
    return None


def url_syntax_problem(
    url: str, *, max_bytes: int = MAX_AUTHORIZATION_URL_BYTES, local: bool = False
) -> str | None:
    """Why ``url`` is not a safe https URL (behaviour §7.6), or ``None``.

    Visible ASCII only, none of ``"<>\\^`{|}``, valid ``%XX`` escapes, https, a
    host, no user information, no fragment, a valid port. ``local``: the upstream
    server is on loopback, so http is allowed too when the host of ``url`` is on
    loopback (:func:`local_upstream`).
    """
    if not url:
        return "it is empty"
    if len(url.encode("utf-8", "surrogatepass")) > max_bytes:
        return f"it is longer than {max_bytes} bytes"
    if not all("!" <= c <= "~" for c in url):
        return "it has a character that is not visible ASCII"
    if any(c in _NOT_IN_URL for c in url):
        return "it has a character that a URL does not allow"
    if _BAD_PERCENT.search(url):
        return "it has a % without two hexadecimal digits"
    if "#" in url:
        return "it has a fragment"
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("https", "http"):
        return "it does not use https"
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    problem = _authority_problem(rest[:end])
    if problem is None and scheme.lower() == "http" and not (local and _loopback_host(url)):
        return "it does not use https"
    return problem


def _loopback_host(url: str) -> bool:
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return False
    return bool(host) and is_loopback(host or "")


def local_upstream(url: str) -> bool:
    """Whether the upstream server at ``url`` is on loopback: then an endpoint of its sign-in
    that is on loopback too may be http (a local test of a sign-in)."""
    return _loopback_host(url)


def authorization_url_problem(url: str, *, expected_redirect_uri: str, local: bool = False) -> str | None:
    """Why the bridge must not write, elicit or open ``url``, or ``None``.

    :func:`url_syntax_problem`, then a non-empty ``state`` and the redirect URI of
    the receiver.
    """
    problem = url_syntax_problem(url, local=local)
    if problem is not None:
        return problem
    query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    if not query.get("state"):
        return "it has no state"
    if query.get("redirect_uri") != expected_redirect_uri:
        return "its redirect URI is not the redirect URI of the receiver"
    return None


def https_endpoint(url: Any, *, local: bool = False) -> bool:
    """An endpoint of the authorization server that the bridge may call: https, a safe URL.

    ``local``: the upstream server is on loopback; an endpoint on loopback may then be http.
    """
    return isinstance(url, str) and url_syntax_problem(url, max_bytes=4096, local=local) is None


def _origin(url: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    if port is None:
        port = 443 if scheme == "https" else 80 if scheme == "http" else 0
    return scheme, host, port


def covers(resource: str, url: str) -> bool:
    """Whether the ``resource`` of protected resource metadata covers the server URL.

    Same scheme, host and port (case does not matter; the default port may be
    left out), and the path of ``resource`` equals the path of ``url`` or is a
    prefix of it that ends at ``/`` or ``?``.
    """
    a, b = _origin(resource), _origin(url)
    if a is None or b is None or a != b:
        return False
    r, u = urlsplit(resource), urlsplit(url)
    if r.fragment:
        return False
    r_path = r.path + (f"?{r.query}" if r.query else "")
    u_path = u.path + (f"?{u.query}" if u.query else "")
    if r_path in ("", "/") or r_path == u_path:
        return True
    if r_path.endswith("/"):
        return u_path.startswith(r_path)
    return u_path.startswith(r_path) and u_path[len(r_path)] in "/?"


def resource_metadata_candidates(url: str, from_challenge: str | None) -> list[str]:
    """RFC 9728: the ``resource_metadata`` of the challenge, then the well-known URLs."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    found: list[str] = []
    if from_challenge:
        found.append(from_challenge)
    path = parts.path.rstrip("/")
    if path:
        found.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    found.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(found))


def server_metadata_candidates(issuer: str) -> list[str]:
    """RFC 8414 and OpenID discovery URLs of ``issuer``, in the order of MCP 2026-07-28."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
