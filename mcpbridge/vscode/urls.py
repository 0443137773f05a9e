"""The URL grammar of the command line: the upstream URL, an issuer, a client ID metadata document.

This module is pure. The grammar of a URL and the loopback rule (where ``http`` is
permitted) are those of :mod:`mcpbridge.mcp.netloc`, the one home of both; this module
adds the hints of the command line, which never hold a part of the URL.
"""

from __future__ import annotations

from ..mcp.netloc import DIGITS, HOST_NAME, IPV4, NOT_IN_URL, UrlParts, is_loopback, split_url

__all__ = [
    "DIGITS",
    "HOST_NAME",
    "IPV4",
    "NOT_IN_URL",
    "UrlParts",
    "client_metadata_url_ok",
    "is_loopback",
    "issuer_hint",
    "port_hint",
    "split_url",
    "upstream_url_hint",
]

def port_hint(port: str | None) -> str | None:
    """Why the port of a URL is not valid (digits only were checked), or ``None``."""
    if port is None:
        return None
    digits = port.lstrip("0")
    if not port or len(digits) > 5 or int(digits or "0") > 65535:
        return "use a port from 1 to 65535"
    if not digits:
        return "the port 0 is not valid"
    return None


def upstream_url_hint(url: str) -> str | None:
    """Why ``url`` is not a valid URL of an upstream server, or ``None`` when it is valid.

    A valid URL has visible ASCII characters only, uses ``https`` (or ``http`` with a
    loopback host), has a host, a port from 1 to 65535 if any, and no user, no password
    and no fragment. The hint never holds a part of the URL.
    """
    parts = split_url(url)
    if parts is None:
        return "use an http or https URL with visible ASCII characters only"
    if parts.scheme not in ("https", "http"):
        return "use https, or http with a loopback host such as 127.0.0.1"
    if parts.has_userinfo:
        return "remove the user and the password from the URL: give a secret with --header-env"
    if parts.fragment is not None:
        return "remove the fragment from the URL"
    if not parts.host:
        return "the URL has no host"
    problem = port_hint(parts.port)
    if problem is not None:
        return problem
    if parts.scheme == "http" and not is_loopback(parts.host):
        return "use https: http is permitted only for a loopback host such as 127.0.0.1"
    return None


def issuer_hint(text: str) -> str | None:
    """Why ``text`` is not an issuer (RFC 8414: https, a host, no query, no fragment)."""
    parts = split_url(text)
    if parts is None or parts.scheme != "https":
        return "use an https URL"
    if not parts.host:
        return "the URL has no host"
    if parts.has_userinfo:
        return "remove the user and the password from the URL"
    if parts.query is not None or parts.fragment is not None:
        return "an issuer has no query and no fragment"
    return port_hint(parts.port)


def client_metadata_url_ok(text: str) -> bool:
    """A client ID metadata document URL: https, a host, a path other than ``/`` without dot
    segments, no user, no password, no fragment."""
    parts = split_url(text)
    if parts is None or parts.scheme != "https" or not parts.host:
        return False
    if parts.has_userinfo or parts.fragment is not None or port_hint(parts.port) is not None:
        return False
    if parts.path in ("", "/"):
        return False
    segments = (segment.lower().replace("%2e", ".") for segment in parts.path.split("/"))
    return not any(segment in (".", "..") for segment in segments)
