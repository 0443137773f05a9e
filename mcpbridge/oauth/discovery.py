"""The requests of the sign-in to the upstream server and its authorization server.

* :func:`discover_resource`: RFC 9728 protected resource metadata (the
  ``resource_metadata`` of the challenge, then the well-known URLs); its
  ``resource`` must cover the URL of the upstream server.
* :func:`discover_server`: RFC 8414 and OpenID discovery; ``issuer`` must be the
  issuer exactly, the endpoints https, and PKCE S256 offered.
* :func:`register`: RFC 7591 dynamic registration of a public native client.
* :func:`exchange_code` and :func:`refresh`: the token endpoint, with ``resource``
  (RFC 8707).
* :func:`request_device_code` and :func:`poll_device_token`: the device
  authorization grant (RFC 8628); :func:`client_credentials`: the client
  credentials grant. Both with ``resource`` and the scopes.

Each failure raises a :class:`~.errors.SignInError` whose detail names the step
and never holds a URL or a secret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from . import flow, grants
from .errors import RegistrationFailed, RegistrationUnavailable, SignInFailed
from .flow import ClientRegistration, ResourceMetadata, ServerMetadata, TokenResponse
from .grants import DeviceAuthorization, Poll
from .web import WebClient, WebError

__all__ = [
    "client_credentials",
    "discover_resource",
    "discover_server",
    "exchange_code",
    "poll_device_token",
    "refresh",
    "register",
    "request_device_code",
]

log = logging.getLogger("mcpbridge.oauth")

_M = TypeVar("_M", ResourceMetadata, ServerMetadata)


def discover_resource(web: WebClient, url: str, from_challenge: str | None) -> ResourceMetadata:
    """The protected resource metadata of the upstream server at ``url``.

    Raises:
        SignInFailed: detail ``InsecureEndpoint`` (a candidate is not https),
            ``ResourceMismatch``, ``NoResourceMetadata`` or a request failure.
    """
    found = _first_metadata(
        web,
        _https_only(flow.resource_metadata_candidates(url, from_challenge)),
        lambda doc: flow.check_resource_metadata(doc, url),
        what="resource metadata",
        missing="NoResourceMetadata",
    )
    log.debug("found the protected resource metadata")
    return found


def discover_server(web: WebClient, issuer: str) -> ServerMetadata:
    """The metadata of the authorization server ``issuer``.

    Raises:
        SignInFailed: detail ``NoServerMetadata``, ``IssuerMismatch``, ``NoS256``,
            ``InsecureEndpoint`` or a request failure.
    """
    found = _first_metadata(
        web,
        flow.server_metadata_candidates(issuer),
        lambda doc: flow.check_server_metadata(doc, issuer),
        what="authorization server metadata",
        missing="NoServerMetadata",
    )
    log.debug("found the metadata of the authorization server")
    return found


def _https_only(candidates: Iterable[str]) -> Iterator[str]:
    """The candidates in order; one that is not https stops the search when it is reached.

    Raises:
        SignInFailed: detail ``InsecureEndpoint``.
    """
    for candidate in candidates:
        if not flow.https_endpoint(candidate):
            raise SignInFailed("InsecureEndpoint")
        yield candidate


def _first_metadata(
    web: WebClient, candidates: Iterable[str], check: Callable[[Any], _M], *, what: str, missing: str
) -> _M:
    """The metadata of the first candidate whose JSON answer ``check`` accepts.

    A candidate that answers no JSON or not 200 is passed over, and so is one whose
    answer ``check`` refuses; the last refusal is the detail when no candidate fits.

    Raises:
        SignInFailed: detail ``missing``, the last :class:`~.flow.MetadataProblem`, or
            ``what: <request failure>``.
    """
    problem: str | None = None
    for candidate in candidates:
        try:
            answer = web.get_json(candidate)
        except WebError as exc:
            raise SignInFailed(f"{what}: {exc}") from exc
        if answer.status != 200 or answer.json is None:
            continue
        try:
            return check(answer.json)
        except flow.MetadataProblem as exc:
            problem = str(exc)
    raise SignInFailed(problem or missing)


def register(
    web: WebClient, server: ServerMetadata, redirect: str, *, device: bool = False
) -> ClientRegistration:
    """Register the bridge as a public native client (RFC 7591).

    ``device``: ask for the device authorization grant as well.

    Raises:
        RegistrationUnavailable: the server has no https registration endpoint.
        RegistrationFailed: the server refused; detail ``registration: HTTP status N[, error E]``.
        SignInFailed: the request failed.
    """
    endpoint = server.registration_endpoint
    if endpoint is None or not flow.https_endpoint(endpoint):
        raise RegistrationUnavailable(redirect_uri=redirect)
    try:
        answer = web.post_json(endpoint, flow.registration_body(redirect, server, device=device))
    except WebError as exc:
        raise SignInFailed(f"registration: {exc}") from exc
    try:
        registration = flow.parse_registration(answer.status, answer.json)
    except flow.RegistrationProblem as exc:
        raise RegistrationFailed(str(exc), redirect_uri=redirect) from exc
    log.info("the authorization server registered the bridge as a client")
    return registration


def _token_request(
    web: WebClient,
    server: ServerMetadata,
    registration: ClientRegistration,
    form: dict[str, str],
    now: float,
    what: str,
) -> TokenResponse:
    body, headers = flow.client_authentication(registration, form)
    try:
        answer = web.post_form(server.token_endpoint, body, headers)
    except WebError as exc:
        raise SignInFailed(f"{what}: {exc}") from exc
    return flow.parse_token_response(answer.status, answer.json, now)


def exchange_code(
    web: WebClient,
    server: ServerMetadata,
    registration: ClientRegistration,
    *,
    code: str,
    verifier: str,
    redirect: str,
    resource: str,
    now: float,
) -> TokenResponse:
    """Trade the code of the redirect for tokens.

    Raises:
        flow.TokenProblem: the server refused.
        SignInFailed: the request failed.
    """
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect,
        "code_verifier": verifier,
        "resource": resource,
    }
    return _token_request(web, server, registration, form, now, "token request")


def refresh(
    web: WebClient,
    server: ServerMetadata,
    registration: ClientRegistration,
    *,
    refresh_token: str,
    resource: str,
    scopes: Sequence[str],
    now: float,
) -> TokenResponse:
    """Get a new access token with the refresh token.

    Raises:
        flow.TokenProblem: the server refused.
        SignInFailed: the request failed.
    """
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "resource": resource}
    if scopes:
        form["scope"] = " ".join(scopes)
    return _token_request(web, server, registration, form, now, "refresh")


def request_device_code(
    web: WebClient,
    server: ServerMetadata,
    registration: ClientRegistration,
    *,
    resource: str,
    scopes: Sequence[str],
) -> DeviceAuthorization:
    """Ask the device authorization endpoint for a device code and a user code (RFC 8628 §3.1).

    The caller checked the endpoint (:func:`.grants.device_endpoint_problem`).

    Raises:
        flow.TokenProblem: the server refused, or its answer cannot be used.
        grants.InvalidVerificationUri: the verification URI is not a safe https URL.
        SignInFailed: the request failed.
    """
    endpoint = server.device_authorization_endpoint
    assert endpoint is not None
    body, headers = flow.client_authentication(
        registration, grants.device_authorization_form(resource=resource, scopes=scopes)
    )
    try:
        answer = web.post_form(endpoint, body, headers)
    except WebError as exc:
        raise SignInFailed(f"device authorization: {exc}") from exc
    return grants.parse_device_authorization(answer.status, answer.json)


def poll_device_token(
    web: WebClient,
    server: ServerMetadata,
    registration: ClientRegistration,
    authorization: DeviceAuthorization,
    *,
    resource: str,
    interval: int,
    now: float,
) -> Poll:
    """One token request of the device flow (RFC 8628 §3.4).

    Raises:
        grants.DeviceDenied: the person refused.
        grants.DeviceExpired: the device code expired.
        flow.TokenProblem: another error.
        SignInFailed: the request failed.
    """
    body, headers = flow.client_authentication(
        registration, grants.device_token_form(authorization, resource=resource)
    )
    try:
        answer = web.post_form(server.token_endpoint, body, headers)
    except WebError as exc:
        raise SignInFailed(f"token request: {exc}") from exc
    return grants.poll_answer(answer.status, answer.json, interval=interval, now=now)


def client_credentials(
    web: WebClient,
    server: ServerMetadata,
    registration: ClientRegistration,
    *,
    resource: str,
    scopes: Sequence[str],
    now: float,
) -> TokenResponse:
    """A token of the client credentials grant (RFC 6749 §4.4).

    Raises:
        flow.TokenProblem: the server refused.
        SignInFailed: the request failed.
    """
    form = grants.client_credentials_form(resource=resource, scopes=scopes)
    return _token_request(web, server, registration, form, now, "client credentials")
