"""The one rule of loopback hosts, and the two places that apply it.

Before this rule had one home, three copies judged hosts differently; :data:`HOSTS` holds
every host they disagreed on, with the answer of the rule and the reason for it. A host
is loopback only when a connection to it cannot leave the machine whatever resolves names.
"""

from __future__ import annotations

import pytest

from mcpbridge.bridge.rules.input import url_allowed
from mcpbridge.mcp.netloc import is_loopback, split_url
from mcpbridge.vscode.settings import upstream_url_hint

#: (host as written, loopback, why).
HOSTS: list[tuple[str, bool, str]] = [
    ("localhost", True, "RFC 6761 6.3; every hosts file maps it"),
    ("LOCALHOST", True, "a name has no case"),
    ("LocalHost", True, "a name has no case"),
    ("localhost.", False, "the system resolver asks DNS for the absolute name"),
    ("LOCALHOST.", False, "the system resolver asks DNS for the absolute name"),
    ("localhost..", False, "not a name"),
    ("foo.localhost", False, "reserved, but the system resolver asks DNS for it"),
    ("FOO.LOCALHOST", False, "reserved, but the system resolver asks DNS for it"),
    ("foo.localhost.", False, "reserved, but the system resolver asks DNS for it"),
    (".localhost", False, "not a name"),
    ("a..localhost", False, "not a name"),
    ("localhost.example.com", False, "a name in example.com"),
    ("127.0.0.1.nip.io", False, "a name that DNS maps"),
    ("127.0.0.1.example.com", False, "a name in example.com"),
    ("127.0.0.1", True, "127.0.0.0/8"),
    ("127.1.2.3", True, "127.0.0.0/8"),
    ("127.255.255.255", True, "127.0.0.0/8"),
    ("127.0.0.1.", False, "not dotted decimal: the system resolver asks DNS for it"),
    ("127.1", False, "a shorthand, not dotted decimal"),
    ("0127.0.0.1", False, "octal for some parsers: 87.0.0.1"),
    ("127.0.0.01", False, "a leading zero: octal for some parsers"),
    ("127.08.0.1", False, "a leading zero: not an address for some parsers, thus a name"),
    ("127.0.0.256", False, "not an address"),
    ("0x7f.0.0.1", False, "hexadecimal, not dotted decimal"),
    ("2130706433", False, "one number, not dotted decimal"),
    ("0.0.0.0", False, "the unspecified address, not loopback"),
    ("[::1]", True, "::1"),
    ("::1", True, "::1 as a URL parser gives it, without brackets"),
    ("[0:0:0:0:0:0:0:1]", True, "::1 in full"),
    ("[::ffff:127.0.0.1]", True, "IPv4-mapped 127.0.0.1"),
    ("::ffff:127.0.0.1", True, "IPv4-mapped 127.0.0.1 without brackets"),
    ("[::ffff:7f00:1]", True, "IPv4-mapped 127.0.0.1 in hexadecimal"),
    ("[::FFFF:127.1.2.3]", True, "IPv4-mapped 127.1.2.3"),
    ("[::ffff:128.0.0.1]", False, "IPv4-mapped, outside 127.0.0.0/8"),
    ("[::127.0.0.1]", False, "IPv4-compatible, not mapped: another IPv6 address"),
    ("[64:ff9b::127.0.0.1]", False, "NAT64: leaves the machine"),
    ("[::]", False, "the unspecified address, not loopback"),
    ("::", False, "the unspecified address, not loopback"),
    ("[::1%25eth0]", False, "a zone: not in the host syntax of a URL"),
    ("[::1%eth0]", False, "a zone: not in the host syntax of a URL"),
    ("::1%eth0", False, "a zone: not in the host syntax of a URL"),
    ("[::1", False, "a bracket without its pair"),
    ("::1]", False, "a bracket without its pair"),
    ("[localhost]", False, "a name in brackets"),
    ("[127.0.0.1]", False, "an IPv4 address in brackets"),
    ("\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54", False, "full-width: not ASCII"),
    ("xn--localhost", False, "a Punycode name, not localhost"),
    ("local%68ost", False, "percent-encoded: a browser decodes it, the system resolver does not"),
    ("%31%32%37.0.0.1", False, "percent-encoded: a browser decodes it, the system resolver does not"),
    ("localhost:80", False, "a port is not part of the host"),
    ("[::1]:80", False, "a port is not part of the host"),
    ("user@localhost", False, "user information is not part of the host"),
    (" localhost", False, "a space"),
    ("", False, "no host"),
]


@pytest.mark.parametrize(("host", "loopback", "why"), HOSTS, ids=[row[0] or "empty" for row in HOSTS])
def test_a_host_is_loopback_only_when_its_traffic_cannot_leave_the_machine(
    host: str, loopback: bool, why: str
) -> None:
    assert is_loopback(host) is loopback, why


def _url_host(host: str) -> bool:
    """True when ``host`` is the host of the URL ``http://{host}/``."""
    parts = split_url(f"http://{host}/")
    return parts is not None and parts.host == host


URL_HOSTS = [row for row in HOSTS if _url_host(row[0])]


@pytest.mark.parametrize(("host", "loopback", "why"), URL_HOSTS, ids=[row[0] or "empty" for row in URL_HOSTS])
def test_the_command_line_and_the_url_elicitation_take_http_for_the_same_hosts(
    host: str, loopback: bool, why: str
) -> None:
    assert url_allowed(f"http://{host}/cb") is loopback, why
    assert (upstream_url_hint(f"http://{host}/mcp") is None) is loopback, why


def test_most_hosts_of_the_table_are_hosts_of_a_url() -> None:
    assert len(URL_HOSTS) >= 30
