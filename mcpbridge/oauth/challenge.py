"""The ``WWW-Authenticate`` challenge of a 401 or 403 (RFC 6750, RFC 9728 ``resource_metadata``).

This module does no I/O, starts no thread and reads no clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

_TOKEN_CHARS: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68_PARAM: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*(?=\s*(,|$))")


@dataclass(frozen=True, slots=True)
class Challenge:
    """The ``Bearer`` challenge of a 401 or 403."""

    params: Mapping[str, str]

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata") or None

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(self.params.get("scope", "").split())

    @property
    def error(self) -> str | None:
        return self.params.get("error") or None


def _challenges(header: str) -> list[tuple[str, dict[str, str]]]:
    """Split a ``WWW-Authenticate`` value into (scheme, params) pairs (RFC 9110 §11.6.1)."""
    found: list[tuple[str, dict[str, str]]] = []
    i, n = 0, len(header)
    current: dict[str, str] | None = None
    while i < n:
        while i < n and header[i] in " \t,":
            i += 1
        match = _TOKEN_CHARS.match(header, i)
        if match is None:
            break
        word, j = match.group(), match.end()
        k = j
        while k < n and header[k] in " \t":
            k += 1
        if k < n and header[k] == "=" and current is not None:
            k += 1
            while k < n and header[k] in " \t":
                k += 1
            if k < n and header[k] == '"':
                k += 1
                value: list[str] = []
                while k < n and header[k] != '"':
                    if header[k] == "\\" and k + 1 < n:
                        k += 1
                    value.append(header[k])
                    k += 1
                current[word.lower()] = "".join(value)
                i = k + 1
            else:
                value_match = _TOKEN_CHARS.match(header, k)
                current[word.lower()] = value_match.group() if value_match else ""
                i = value_match.end() if value_match else k
        elif k < n and header[k] == "=":
            break
        else:
            current = {}
            found.append((word.lower(), current))
            i = j
            # A token68 after the scheme (``Basic abc==``) is not a parameter: skip it.
            while i < n and header[i] in " \t":
                i += 1
            t68 = _TOKEN68_PARAM.match(header, i)
            if t68 is not None:
                i = t68.end()
    return found


def parse_challenge(header: str | None) -> Challenge | None:
    """The ``Bearer`` challenge of ``header``, or ``None`` when it has none."""
    if not header:
        return None
    for scheme, params in _challenges(header):
        if scheme == "bearer":
            return Challenge(params)
    return None
