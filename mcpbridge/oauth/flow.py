"""The pure rules of the sign-in: identity, PKCE, records, metadata checks, scopes, the redirect.

The URL checks are in :mod:`.urls`, the challenge in :mod:`.challenge`, the
registration and the tokens in :mod:`.tokens`. The names of the bridge in the stored
sign-ins are in :mod:`.identity` and the records with their JSON in :mod:`.stored`,
which the token stores load without this module; this module names them too.

This module does no I/O, starts no thread and reads no clock: the callers pass
the random bytes and the time (``now``, in Unix seconds) in.

The checks follow MCP 2026-07-28 authorization (OAuth 2.1 with PKCE), RFC 9728
(protected resource metadata), RFC 8414 and OpenID discovery (authorization
server metadata), RFC 8707 (``resource``) and RFC 9207 (``iss``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit

from ..mcp.errorbase import PeerFault
from .errors import OAuthError
from .identity import CLIENT_NAME, DEFAULT_REDIRECT_PORT, redirect_uri
from .urls import (
    covers,
    https_endpoint,
    local_upstream,
)

# ---------------------------------------------------------------------------------------------
# The client ID metadata document
# ---------------------------------------------------------------------------------------------

#: The size of the client ID metadata document.
MAX_CLIENT_METADATA_BYTES: Final = 5 * 1024


def client_metadata_document(url: str, redirect: str = redirect_uri(DEFAULT_REDIRECT_PORT)) -> dict[str, Any]:
    """The client ID metadata document of the bridge, published at ``url`` (its ``client_id``).

    It names only the default redirect URI, has no ``scope`` (the authorization
    server does not limit the scopes) and only the grants of a public native client.
    """
    return {
        "client_id": url,
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }


# ---------------------------------------------------------------------------------------------
# PKCE and random values
# ---------------------------------------------------------------------------------------------


def b64url(data: bytes) -> str:
    """Base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def code_challenge(verifier: str) -> str:
    """The S256 code challenge of a PKCE verifier."""
    return b64url(hashlib.sha256(verifier.encode("ascii")).digest())


# ---------------------------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------------------------


class MetadataProblem(OAuthError, PeerFault):
    """Metadata that the bridge cannot use; the message is a short name (``ResourceMismatch``)."""


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """The parts of RFC 9728 protected resource metadata that the bridge uses."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None

    @property
    def issuer(self) -> str:
        return self.authorization_servers[0]


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """The parts of RFC 8414 authorization server metadata that the bridge uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    scopes_supported: tuple[str, ...] | None
    token_endpoint_auth_methods: tuple[str, ...]
    client_id_metadata_document_supported: bool
    iss_parameter_supported: bool
    #: RFC 8628 ``device_authorization_endpoint`` as the server wrote it (checked where it is used:
    #: a device endpoint that is not https takes only the device sign-in away).
    device_authorization_endpoint: str | None = None
    #: ``grant_types_supported``, or ``None`` when the server names none.
    grant_types_supported: tuple[str, ...] | None = None
    #: An OpenID provider: its metadata has ``id_token_signing_alg_values_supported`` (which
    #: OpenID Connect Discovery requires) or ``openid`` in ``scopes_supported``.
    openid_provider: bool = False
    #: ``prompt_values_supported``, or ``None`` when the server names none.
    prompt_values_supported: tuple[str, ...] | None = None
    #: The upstream server is on loopback: an endpoint on loopback may be http (a local test).
    local: bool = False


def _str_list(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def check_resource_metadata(doc: Any, url: str) -> ResourceMetadata:
    """Check RFC 9728 metadata for the server at ``url``.

    Raises:
        MetadataProblem: ``InvalidResourceMetadata``, ``ResourceMismatch``,
            ``NoAuthorizationServer`` or ``InsecureEndpoint``.
    """
    if not isinstance(doc, dict):
        raise MetadataProblem("InvalidResourceMetadata")
    resource = doc.get("resource")
    if not isinstance(resource, str) or not resource:
        raise MetadataProblem("InvalidResourceMetadata")
    if not covers(resource, url):
        raise MetadataProblem("ResourceMismatch")
    servers = _str_list(doc.get("authorization_servers"))
    if not servers:
        raise MetadataProblem("NoAuthorizationServer")
    if not https_endpoint(servers[0], local=local_upstream(url)) or urlsplit(servers[0]).query:
        raise MetadataProblem("InsecureEndpoint")
    return ResourceMetadata(resource, servers, _str_list(doc.get("scopes_supported")))


def check_server_metadata(doc: Any, issuer: str, *, local: bool = False) -> ServerMetadata:
    """Check RFC 8414 (or OpenID) metadata of ``issuer``.

    ``local``: the upstream server is on loopback (:func:`.urls.local_upstream`).

    Raises:
        MetadataProblem: ``InvalidServerMetadata``, ``IssuerMismatch`` (not exactly
            ``issuer``), ``InsecureEndpoint`` or ``NoS256`` (PKCE S256 not offered).
    """
    if not isinstance(doc, dict):
        raise MetadataProblem("InvalidServerMetadata")
    if doc.get("issuer") != issuer:
        raise MetadataProblem("IssuerMismatch")
    authorization = doc.get("authorization_endpoint")
    token = doc.get("token_endpoint")
    if not isinstance(authorization, str) or not isinstance(token, str):
        raise MetadataProblem("InvalidServerMetadata")
    if not https_endpoint(authorization, local=local) or not https_endpoint(token, local=local):
        raise MetadataProblem("InsecureEndpoint")
    methods = _str_list(doc.get("code_challenge_methods_supported")) or ()
    if "S256" not in methods:
        raise MetadataProblem("NoS256")
    registration = doc.get("registration_endpoint")
    if registration is not None and not isinstance(registration, str):
        raise MetadataProblem("InvalidServerMetadata")
    auth_methods = _str_list(doc.get("token_endpoint_auth_methods_supported"))
    device = doc.get("device_authorization_endpoint")
    scopes = _str_list(doc.get("scopes_supported"))
    return ServerMetadata(
        issuer=issuer,
        authorization_endpoint=authorization,
        token_endpoint=token,
        registration_endpoint=registration,
        scopes_supported=scopes,
        # RFC 8414: client_secret_basic when the server names none.
        token_endpoint_auth_methods=auth_methods if auth_methods is not None else ("client_secret_basic",),
        client_id_metadata_document_supported=doc.get("client_id_metadata_document_supported") is True,
        iss_parameter_supported=doc.get("authorization_response_iss_parameter_supported") is True,
        device_authorization_endpoint=device if isinstance(device, str) and device else None,
        grant_types_supported=_str_list(doc.get("grant_types_supported")),
        openid_provider="id_token_signing_alg_values_supported" in doc or "openid" in (scopes or ()),
        prompt_values_supported=_str_list(doc.get("prompt_values_supported")),
        local=local,
    )


def choose_scopes(
    *,
    challenged: Sequence[str],
    resource: ResourceMetadata,
    server: ServerMetadata,
    previous: Sequence[str] = (),
    step_up: bool = False,
) -> tuple[str, ...]:
    """The scopes of a sign-in.

    The scopes of the challenge, else (not on a step-up) the ``scopes_supported``
    of the resource. A step-up keeps the earlier scopes (the union).
    ``offline_access`` joins when the authorization server lists it. An empty
    result means: send no ``scope``.
    """
    chosen: list[str] = list(previous) if step_up else []
    if challenged:
        chosen += challenged
    elif not step_up and resource.scopes_supported:
        chosen += resource.scopes_supported
    if chosen and server.scopes_supported and "offline_access" in server.scopes_supported:
        chosen.append("offline_access")
    return tuple(dict.fromkeys(s for s in chosen if s))


def consent_prompt(server: ServerMetadata, scopes: Sequence[str]) -> bool:
    """Whether an authorization request for ``scopes`` asks for ``prompt=consent``.

    OpenID Connect Core §11: an OpenID provider grants ``offline_access`` (and with it
    a refresh token) only after a consent prompt, and a certified one drops the scope
    without it: the sign-in would last one access token. Other authorization servers
    get no prompt: they issue refresh tokens by grant type, and a forced consent is a
    page more, or a sign-in that cannot complete where only an administrator consents.
    A provider whose ``prompt_values_supported`` lacks ``consent`` gets none either.
    """
    if "offline_access" not in scopes or not server.openid_provider:
        return False
    values = server.prompt_values_supported
    return values is None or "consent" in values


def build_authorization_url(
    server: ServerMetadata,
    *,
    client_id: str,
    redirect: str,
    state: str,
    challenge: str,
    resource: str | None,
    scopes: Sequence[str],
) -> str:
    """The authorization request (``response_type=code`` with PKCE S256 and ``resource``).

    ``resource`` ``None``: the request has none (the server refused it, or the options).
    ``prompt=consent`` joins when :func:`consent_prompt` says so.
    """
    params = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect),
        ("state", state),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ]
    if resource is not None:
        params.append(("resource", resource))
    if scopes:
        params.append(("scope", " ".join(scopes)))
    if consent_prompt(server, scopes):
        params.append(("prompt", "consent"))
    query = urlencode(params, quote_via=quote, safe="")
    endpoint = server.authorization_endpoint
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


# ---------------------------------------------------------------------------------------------
# The redirect
# ---------------------------------------------------------------------------------------------

_ERROR_CODE: Final = re.compile(r"[a-z_]{1,48}\Z")


def error_code(value: Any) -> str | None:
    """An error code of the authorization server, kept only when it is ``[a-z_]{1,48}``."""
    return value if isinstance(value, str) and _ERROR_CODE.match(value) else None


def answer_error(doc: Any) -> str | None:
    """The :func:`error_code` of the ``error`` member of a JSON answer, if the answer is an object."""
    return error_code(doc.get("error")) if isinstance(doc, dict) else None


#: An error description that names the ``resource`` parameter: Microsoft Entra ID's
#: ``AADSTS901002: The 'resource' request parameter is not supported`` and ``AADSTS9010010:
#: The resource parameter provided in the request doesn't match with the requested scopes``.
_NAMES_RESOURCE: Final = re.compile(
    r"""['"`]resource['"`]|\bresource[ _-](?:request[ _-])?(?:parameter|indicator)""", re.IGNORECASE
)


def refuses_resource(error: str | None, description: Any) -> bool:
    """Whether an error answer refuses the ``resource`` of RFC 8707.

    ``invalid_target`` (RFC 8707 §2), or any error whose ``error_description``
    names the parameter. The description is only matched, never logged.
    """
    if error == "invalid_target":
        return True
    return (
        error is not None and isinstance(description, str) and _NAMES_RESOURCE.search(description) is not None
    )


@dataclass(frozen=True, slots=True)
class Redirect:
    """The query of the redirect to the receiver (state already matched)."""

    code: str | None = field(repr=False)
    error: str | None
    iss: str | None
    #: ``error_description``: matched by :func:`refuses_resource`, never shown.
    description: str | None = field(default=None, repr=False)

    @property
    def refuses_resource(self) -> bool:
        return refuses_resource(self.error, self.description)


class RedirectProblem(OAuthError, PeerFault):
    """The redirect is not valid for this sign-in; the message is a short name."""


class AuthorizationDenied(OAuthError, PeerFault):
    """The authorization server answered ``access_denied``."""


class AuthorizationError(OAuthError, PeerFault):
    """Another error of the authorization server; ``code`` is kept when it is a plain code."""

    def __init__(self, code: str | None) -> None:
        super().__init__(code or "unknown")
        self.code = code


def check_redirect(redirect: Redirect, *, issuer: str, iss_required: bool) -> str:
    """The code of a redirect, after the RFC 9207 check of ``iss``.

    ``iss``, when present, must equal ``issuer`` exactly, also in an error
    answer; it must be present when the server advertises it.

    Raises:
        RedirectProblem: ``IssuerMismatch``, ``MissingIssuer`` or ``MissingCode``.
        AuthorizationDenied: ``error=access_denied``.
        AuthorizationError: any other error.
    """
    if redirect.iss is not None:
        if redirect.iss != issuer:
            raise RedirectProblem("IssuerMismatch")
    elif iss_required:
        raise RedirectProblem("MissingIssuer")
    if redirect.error is not None:
        if redirect.error == "access_denied":
            raise AuthorizationDenied()
        raise AuthorizationError(error_code(redirect.error))
    if not redirect.code:
        raise RedirectProblem("MissingCode")
    return redirect.code
