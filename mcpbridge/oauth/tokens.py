"""The client of a sign-in at the token endpoint: registration, client authentication, tokens.

The RFC 7591 registration of a public native client, the authentication of the
client at the token endpoint (RFC 6749 §2.3.1), the ``resource`` of RFC 8707, and the
answers of the token endpoint (RFC 6749 §5). This module does no I/O, starts no
thread and reads no clock.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from ..mcp.errorbase import PeerFault
from ..mcp.numbers import OutOfRange, peer_seconds
from .errors import OAuthError
from .flow import ServerMetadata, answer_error, refuses_resource
from .identity import CLIENT_NAME
from .stored import ClientRegistration

#: The longest ``expires_in`` that the bridge accepts from an authorization server: ten years.
MAX_EXPIRES_IN: Final = 10 * 365 * 24 * 3600


#: RFC 8628: the grant type of the device authorization grant.
DEVICE_CODE_GRANT: Final = "urn:ietf:params:oauth:grant-type:device_code"


def registration_body(redirect: str, server: ServerMetadata, *, device: bool = False) -> dict[str, Any]:
    """The RFC 7591 request of a public native client with the one redirect URI.

    ``device``: the client also asks for the device authorization grant (RFC 8628).
    """
    grants = ["authorization_code", "refresh_token"] + ([DEVICE_CODE_GRANT] if device else [])
    body: dict[str, Any] = {
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect],
        "grant_types": grants,
        "response_types": ["code"],
        "application_type": "native",
    }
    if "none" in server.token_endpoint_auth_methods:
        body["token_endpoint_auth_method"] = "none"
    return body


def parse_registration(status: int, doc: Any) -> ClientRegistration:
    """The client of a registration answer.

    Raises:
        RegistrationProblem: not 200/201, or no ``client_id``; the message is the detail.
    """
    if status not in (200, 201) or not isinstance(doc, dict):
        code = answer_error(doc)
        raise RegistrationProblem(f"registration: HTTP status {status}" + (f", error {code}" if code else ""))
    client_id = doc.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise RegistrationProblem(f"registration: HTTP status {status}, no client_id")
    secret = doc.get("client_secret")
    method = doc.get("token_endpoint_auth_method")
    if not isinstance(secret, str) or not secret:
        return ClientRegistration(client_id, None, "none")
    if method not in ("client_secret_basic", "client_secret_post"):
        method = "client_secret_basic"
    return ClientRegistration(client_id, secret, method)


class RegistrationProblem(OAuthError, PeerFault):
    """A refused registration; the message is the detail (``registration: HTTP status 400``)."""


def choose_auth_method(server: ServerMetadata, has_secret: bool) -> str:
    """The token endpoint authentication of a pre-registered client."""
    if not has_secret:
        return "none"
    methods = server.token_endpoint_auth_methods
    if "client_secret_basic" in methods or "client_secret_post" not in methods:
        return "client_secret_basic"
    return "client_secret_post"


def client_authentication(
    registration: ClientRegistration, form: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The form and the headers of a token request with the client's authentication."""
    form = dict(form)
    headers: dict[str, str] = {}
    secret = registration.client_secret
    if secret is not None and registration.auth_method == "client_secret_basic":
        # RFC 6749 §2.3.1: each part form-encoded before the Base64.
        pair = f"{quote(registration.client_id, safe='')}:{quote(secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    else:
        form["client_id"] = registration.client_id
        if secret is not None and registration.auth_method == "client_secret_post":
            form["client_secret"] = secret
    return form, headers


def with_resource(form: dict[str, str], resource: str | None, scopes: Sequence[str] = ()) -> dict[str, str]:
    """``form`` with ``resource`` (RFC 8707) unless it is ``None``, and ``scope`` when there are scopes."""
    if resource is not None:
        form["resource"] = resource
    if scopes:
        form["scope"] = " ".join(scopes)
    return form


_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*\Z")


@dataclass(frozen=True, slots=True)
class TokenResponse:
    access_token: str = field(repr=False)
    expires_at: int | None
    refresh_token: str | None = field(repr=False)
    scopes: tuple[str, ...] | None


class TokenProblem(OAuthError, PeerFault):
    """A token request that failed.

    ``error`` is the OAuth error code when the server sent a plain one;
    ``str()`` is the detail without a secret (``HTTP status 400, error invalid_grant``).
    """

    def __init__(
        self, status: int, error: str | None, what: str = "", *, refuses_resource: bool = False
    ) -> None:
        text = f"HTTP status {status}" + (f", error {error}" if error else "") + (f", {what}" if what else "")
        super().__init__(text)
        self.status = status
        self.error = error
        #: The server refused the ``resource`` parameter (:func:`refuses_resource`).
        self.refuses_resource = refuses_resource

    @classmethod
    def of_answer(cls, status: int, doc: Any) -> TokenProblem:
        """The problem of an error answer: its plain error code, and whether it refuses ``resource``."""
        code = answer_error(doc)
        description = doc.get("error_description") if isinstance(doc, dict) else None
        return cls(status, code, refuses_resource=refuses_resource(code, description))

    @property
    def drops_tokens(self) -> bool:
        """A refresh error after which only a new grant helps."""
        return self.error in (
            "invalid_grant",
            "unauthorized_client",
            "unsupported_grant_type",
            "invalid_scope",
        )

    @property
    def drops_client(self) -> bool:
        """The server does not know the client any more: register again."""
        return self.error == "invalid_client"


def token_answer(status: int, doc: Any) -> dict[str, Any]:
    """The JSON object of a 200 answer of the token or the device authorization endpoint.

    Raises:
        TokenProblem: another status, or no JSON object (with the error code of the answer).
    """
    if status != 200 or not isinstance(doc, dict):
        raise TokenProblem.of_answer(status, doc)
    return doc


def token_member(status: int, doc: Mapping[str, Any], name: str, pattern: re.Pattern[str]) -> str:
    """The member ``name`` of the answer ``doc``: a string that ``pattern`` matches.

    Raises:
        TokenProblem: ``no valid <name>`` (the message never holds the value).
    """
    value = doc.get(name)
    if not isinstance(value, str) or not pattern.match(value):
        raise TokenProblem(status, None, f"no valid {name}")
    return value


def token_seconds(status: int, doc: Mapping[str, Any], name: str, *, low: float, high: float) -> float | None:
    """The member ``name`` of the answer ``doc`` as seconds in ``[low, high]``; ``None`` when it is absent.

    The number is read with :func:`mcpbridge.mcp.numbers.peer_seconds`: ``1e400``, an integer of
    400 digits, ``NaN``, ``true`` or a negative number is no number of seconds.

    Raises:
        TokenProblem: ``<name> is not a number from <low> to <high>`` (never the value).
    """
    value = doc.get(name)
    if value is None:
        return None
    try:
        return peer_seconds(value, name=name, low=low, high=high)
    except OutOfRange as exc:
        raise TokenProblem(status, None, str(exc)) from exc


def parse_token_response(status: int, doc: Any, now: float) -> TokenResponse:
    """The tokens of a token endpoint answer (RFC 6749 §5).

    ``expires_in``, when the answer has it, is a number of seconds from 0 to :data:`MAX_EXPIRES_IN`.

    Raises:
        TokenProblem: an error answer, or an answer without a usable Bearer token, or with
            an ``expires_in`` out of its range.
    """
    doc = token_answer(status, doc)
    token = token_member(status, doc, "access_token", _TOKEN68)
    token_type = doc.get("token_type")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenProblem(status, None, "not a Bearer token")
    expires_in = token_seconds(status, doc, "expires_in", low=0, high=MAX_EXPIRES_IN)
    refresh = doc.get("refresh_token")
    scope = doc.get("scope")
    return TokenResponse(
        access_token=token,
        expires_at=None if expires_in is None else int(now + expires_in),
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        scopes=tuple(scope.split()) if isinstance(scope, str) else None,
    )
