"""The URL grammar of the command line: the upstream URL, an issuer, a client ID metadata document.

This module is pure. It checks the syntax of a URL without a library that would accept
more than RFC 3986, and tells whether a host is a loopback host (where ``http`` is
permitted). Its hints never hold a part of the URL.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

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

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")
#: Characters that RFC 3986 never allows in a URL, beside the space and the controls.
NOT_IN_URL = frozenset('"<>\\^`{|}')
#: A ``%`` that is not followed by two hexadecimal digits.
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_REG_NAME = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=%]*\Z")
_IPV6_TEXT = re.compile(r"[0-9A-Fa-f:.]+\Z")
DIGITS = re.compile(r"[0-9]+\Z")
#: A host name with a dot and a top-level domain: ``example.com``, not ``server.py3``.
HOST_NAME = re.compile(r"(?:[A-Za-z0-9\-]+\.)+[A-Za-z]+\Z")
IPV4 = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}\Z")


@dataclass(frozen=True, slots=True)
class UrlParts:
    scheme: str  # lower case
    has_userinfo: bool
    host: str  # as written; an IPv6 address keeps its brackets
    port: str | None  # as written, None without ":"
    path: str
    query: str | None
    fragment: str | None


def _visible_ascii(text: str) -> bool:
    return all("!" <= c <= "~" for c in text)


def split_url(text: str) -> UrlParts | None:
    """The parts of an absolute URL with an authority, or ``None`` when its syntax is wrong."""
    if not text or not _visible_ascii(text) or any(c in NOT_IN_URL for c in text):
        return None
    if _BAD_PERCENT.search(text):
        return None
    scheme, sep, rest = text.partition("://")
    if not sep or not _SCHEME.match(scheme):
        return None
    rest, hash_sign, fragment = rest.partition("#")
    rest, question_mark, query = rest.partition("?")
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    if "#" in fragment or any("[" in p or "]" in p for p in (path, query, fragment)):
        return None
    _userinfo, at_sign, host_port = authority.rpartition("@")
    port: str | None
    if host_port.startswith("["):
        end = host_port.find("]")
        if end < 0:
            return None
        host, after = host_port[: end + 1], host_port[end + 1 :]
        if not _IPV6_TEXT.match(host[1:-1]):
            return None
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
        if after and not after.startswith(":"):
            return None
        port = after[1:] if after else None
    else:
        host, colon, port_text = host_port.partition(":")
        if not _REG_NAME.match(host):
            return None
        port = port_text if colon else None
    if port is not None and port and not DIGITS.match(port):
        return None
    return UrlParts(
        scheme=scheme.lower(),
        has_userinfo=bool(at_sign),
        host=host,
        port=port,
        path=path,
        query=query if question_mark else None,
        fragment=fragment if hash_sign else None,
    )


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


def is_loopback(host: str) -> bool:
    """``localhost``, ``*.localhost``, 127.0.0.0/8 in dotted decimal, or ``[::1]``."""
    lower = host.lower()
    if lower == "localhost" or (lower.endswith(".localhost") and all(lower.split("."))):
        return True
    if lower.startswith("["):
        return ipaddress.IPv6Address(lower[1:-1]) == ipaddress.IPv6Address("::1")
    octets = lower.split(".")
    return (
        len(octets) == 4
        and octets[0] == "127"
        and all(len(o) <= 3 and DIGITS.match(o) and int(o) <= 255 for o in octets)
    )


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
