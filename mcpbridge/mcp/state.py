"""Signed ``requestState`` for multi round-trip requests.

A server that answers with an ``InputRequiredResult`` may give the client a
``requestState`` string, and the client echoes it unchanged in its retry. The
string comes back from the client, so the server must treat it as hostile:
this module signs the state when it leaves and checks it when it returns.

A token has three parts separated by dots::

    v1.<payload>.<mac>

``payload`` is the base64url text (no padding) of a compact JSON object
``{"b": binding, "e": expiry, "v": value}``, and ``mac`` is the base64url
text of HMAC-SHA256 over ``v1.<payload>`` with the server's key. The MAC covers
the exact text that travels, so a change of any byte is refused, even one that
would decode to the same bytes. ``binding`` ties a state to the request that
it was made for (method, target, arguments), so a state of one tool cannot be
replayed to another. The value is signed, not encrypted: do not put secrets in
it.

The functions take the time as a parameter; :class:`StateSigner` reads the
clock.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from typing import Any, Final

from .errorbase import PeerFault

#: How long a state stays valid, in seconds. A person answers a form in
#: minutes; ten minutes is generous and still bounds a replay.
STATE_TTL: Final = 600.0
#: The longest token accepted. A state is small; a huge one is an attack.
MAX_TOKEN_CHARS: Final = 64 * 1024
#: The minimum key length, in bytes (the output size of SHA-256).
MIN_KEY_BYTES: Final = 32

_VERSION = "v1"
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


class InvalidState(PeerFault):
    """A ``requestState`` that is tampered with, expired, foreign or malformed.

    The message names the reason for the server's own log; the client only
    ever sees "the requestState is not valid".
    """


def new_key() -> bytes:
    """A random key for a server that was given none."""
    return secrets.token_bytes(MIN_KEY_BYTES)


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    try:
        data = base64.b64decode(padded, altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidState("the payload is not base64url") from exc
    if _b64encode(data) != text:
        raise InvalidState("the payload is not canonical base64url")
    return data


def _mac(key: bytes, signed_text: str) -> str:
    return _b64encode(hmac.new(key, signed_text.encode("ascii"), hashlib.sha256).digest())


def _check_key(key: bytes) -> None:
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"the state key must have at least {MIN_KEY_BYTES} bytes")


def sign(key: bytes, value: Any, *, now: float, binding: str = "", ttl: float = STATE_TTL) -> str:
    """Sign ``value`` (any JSON value) for ``binding``; it expires at ``now + ttl``.

    Raises:
        ValueError: the key is too short, or ``value`` is not JSON.
        InvalidState: the token would be longer than :data:`MAX_TOKEN_CHARS`.
    """
    _check_key(key)
    payload = {"b": binding, "e": int(now + ttl), "v": value}
    try:
        payload_text = _b64encode(_encoder.encode(payload).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the state is not a JSON value: {exc}") from exc
    signed_text = f"{_VERSION}.{payload_text}"
    token = f"{signed_text}.{_mac(key, signed_text)}"
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidState("the state is too large")
    return token


def verify(key: bytes, token: Any, *, now: float, binding: str = "") -> Any:
    """Check ``token`` and return the value that :func:`sign` got.

    Raises:
        InvalidState: the token is not a string, too long, malformed, signed
            with another key, changed, made for another binding, or expired.
    """
    _check_key(key)
    if not isinstance(token, str):
        raise InvalidState("the state is not a string")
    if len(token) > MAX_TOKEN_CHARS:
        raise InvalidState("the state is too long")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != _VERSION:
        raise InvalidState("the state has an unknown form")
    signed_text, mac_text = token.rsplit(".", 1)
    if not signed_text.isascii() or not mac_text.isascii():
        raise InvalidState("the state has an unknown form")
    if not hmac.compare_digest(_mac(key, signed_text), mac_text):
        raise InvalidState("the signature does not match")
    # From here on the payload is ours: it was signed with our key.
    try:
        payload = json.loads(_b64decode(parts[1]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidState("the payload is not JSON") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("e"), int) or "v" not in payload:
        raise InvalidState("the payload has an unknown form")
    if payload.get("b") != binding:
        raise InvalidState("the state belongs to another request")
    if now >= payload["e"]:
        raise InvalidState("the state expired")
    return payload["v"]


class StateSigner:
    """Sign and verify states with one key and a clock.

    ``key`` defaults to a random key, so the states of one process are not
    valid in another one. Give the same key to every instance of a server
    that sits behind a load balancer.
    """

    def __init__(
        self,
        key: bytes | None = None,
        *,
        ttl: float = STATE_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = new_key() if key is None else key
        _check_key(self._key)
        self._ttl = ttl
        self._clock = clock

    def sign(self, value: Any, *, binding: str = "") -> str:
        """See :func:`sign`."""
        return sign(self._key, value, now=self._clock(), binding=binding, ttl=self._ttl)

    def verify(self, token: Any, *, binding: str = "") -> Any:
        """See :func:`verify`."""
        return verify(self._key, token, now=self._clock(), binding=binding)
