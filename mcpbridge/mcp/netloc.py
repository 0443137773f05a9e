"""The shared rules of hosts: which host is on this machine.

This module is pure: it does no I/O and reads no clock.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]


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
