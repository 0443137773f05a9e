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
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
#: An IPv4 address in dotted decimal: four numbers from 0 to 255 without a leading zero.
IPV4: Final = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}\Z")
_LOOPBACK_V4: Final = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6: Final = ipaddress.IPv6Address("::1")


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


def _visible_ascii(text: str) -> bool:
    return all("!" <= c <= "~" for c in text)


def split_url(text: str) -> UrlParts | None:
    """The parts of an absolute URL with an authority, or ``None`` when its syntax is wrong."""
    if not text or not _visible_ascii(text) or any(c in NOT_IN_URL for c in text):
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
    """True when a connection to ``host`` cannot leave this machine, whatever resolves names.

    ``host`` is the host of a URL as written, or as a URL parser gives it (an IPv6 address
    with or without its brackets). A loopback host is one of:

    * ``localhost`` in any case: RFC 6761 section 6.3 reserves it for the loopback address,
      the hosts file of every system maps it, and browsers never ask DNS for it;
    * an address of 127.0.0.0/8 written as four decimal numbers without a leading zero
      (``127.0.0.1``, ``127.1.2.3``);
    * the IPv6 address ``::1`` in any of its forms, or an IPv4-mapped address of
      127.0.0.0/8 (``::ffff:127.0.0.1``), with no zone.

    Any other host is not loopback, even where a specification or a browser counts it,
    because the resolver that the bridge or another program uses may send it to a DNS
    server: ``localhost.`` and ``app.localhost`` (RFC 6761 reserves them too, and the
    WHATWG rule of a "potentially trustworthy" origin counts them, but only for a user
    agent that answers them itself; the system resolver asks DNS for them), ``127.0.0.1.``
    and ``127.1`` (names or shorthands, not dotted decimal), ``0127.0.0.1`` (octal
    for some parsers: 87.0.0.1), ``0.0.0.0`` and ``::`` (unspecified, not loopback), a
    name with a percent-encoded or non-ASCII character, and a host with a port or user
    information. A name is never resolved.
    """
    if not host.isascii():
        return False
    if host.lower() == "localhost":
        return True
    if IPV4.match(host):
        return host.startswith("127.")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not IPV6_TEXT.match(host):
        return False
    try:
        address = ipaddress.IPv6Address(host)
    except ValueError:
        return False
    mapped = address.ipv4_mapped
    if mapped is not None:
        return mapped in _LOOPBACK_V4
    return address == _LOOPBACK_V6
