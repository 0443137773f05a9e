"""The grammar of URLs and hosts: the parts of a URL, and which host is on this machine.

This module is pure: it does no I/O and reads no clock. A name is never resolved.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BAD_PERCENT",
    "DIGITS",
    "HOST_NAME",
    "IPV4",
    "IPV6_TEXT",
    "NOT_IN_URL",
    "REG_NAME",
    "SCHEME",
    "UrlParts",
    "is_loopback",
    "split_url",
    "visible_ascii",
]

#: A scheme (RFC 3986 section 3.1).
SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*\Z")
#: Characters that RFC 3986 never allows in a URL, beside the space and the controls.
NOT_IN_URL: Final = frozenset('"<>\\^`{|}')
#: A ``%`` that is not followed by two hexadecimal digits.
BAD_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
#: The characters of a host that is not an IP literal (RFC 3986 ``reg-name``).
REG_NAME: Final = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=%]*\Z")
#: The characters of an IPv6 address between the brackets of a URL (no zone).
IPV6_TEXT: Final = re.compile(r"[0-9A-Fa-f:.]+\Z")
DIGITS: Final = re.compile(r"[0-9]+\Z")
#: A host name with a dot and a top-level domain: ``example.com``, not ``server.py3``.
HOST_NAME: Final = re.compile(r"(?:[A-Za-z0-9\-]+\.)+[A-Za-z]+\Z")
IPV4: Final = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}\Z")


@dataclass(frozen=True, slots=True)
class UrlParts:
    """The parts of an absolute URL with an authority, as :func:`split_url` finds them."""

    scheme: str  # lower case
    has_userinfo: bool
    host: str  # as written; an IPv6 address keeps its brackets
    port: str | None  # as written, None without ":"
    path: str
    query: str | None
    fragment: str | None


def visible_ascii(text: str) -> bool:
    return all("!" <= c <= "~" for c in text)


def split_url(text: str) -> UrlParts | None:
    """The parts of an absolute URL with an authority, or ``None`` when its syntax is wrong."""
    if not text or not visible_ascii(text) or any(c in NOT_IN_URL for c in text):
        return None
    if BAD_PERCENT.search(text):
        return None
    scheme, sep, rest = text.partition("://")
    if not sep or not SCHEME.match(scheme):
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
        if not IPV6_TEXT.match(host[1:-1]):
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
        if not REG_NAME.match(host):
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


def is_loopback(host: str) -> bool:
    """``localhost``, ``*.localhost``, an address in 127.0.0.0/8, or ``::1`` (with or without brackets).

    ``host`` is the host of a URL as written; the case does not matter. A name is
    never resolved.
    """
    host = host.lower().strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
