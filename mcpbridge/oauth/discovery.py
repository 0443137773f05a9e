"""The requests of the sign-in to the upstream server and its authorization server.

* :func:`discover_resource`: RFC 9728 protected resource metadata (the
  ``resource_metadata`` of the challenge, then the well-known URLs); its
  ``resource`` must cover the URL of the upstream server.
* :func:`discover_server`: RFC 8414 and OpenID discovery; ``issuer`` must be the
  issuer exactly, the endpoints https (or http when they and the upstream server are
  both on loopback), and PKCE S256 offered.
* :func:`register`: RFC 7591 dynamic registration of a public native client.
* :class:`TokenClient`: the requests of one client at the token and device
  endpoints, with ``resource`` (RFC 8707): the code exchange and the refresh, the
  device authorization grant (RFC 8628) and the client credentials grant, both
  with ``resource`` and the scopes.

Each failure raises a :class:`~.errors.SignInError` whose detail names the step
and never holds a URL or a secret. A request that does not end by its deadline
(:mod:`.web`) fails with ``sign_in_timeout``, its detail naming the step.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from . import flow, grants, identity, tokens, urls
from .errors import (
    RegistrationFailed,
    RegistrationUnavailable,
    SignInError,
    SignInFailed,
    SignInInvalidUrl,
    SignInTimeout,
)
from .flow import ResourceMetadata, ServerMetadata
from .grants import DeviceAuthorization, Poll
from .stored import ClientRegistration
from .tokens import TokenResponse
from .web import WebClient, WebError, WebResponse, WebTimeout

__all__ = ["ResourceParameter", "TokenClient", "discover_resource", "discover_server", "register"]

log = logging.getLogger("mcpbridge.oauth")

_M = TypeVar("_M", ResourceMetadata, ServerMetadata)
_T = TypeVar("_T")


def request_failed(what: str, exc: WebError) -> SignInError:
    """The error of a request of the step ``what`` that got no answer.

    A request that did not end by its deadline is a ``sign_in_timeout`` (detail
    ``<what>: no complete answer in N s``); any other failure a ``sign_in_failed``.
    """
    if isinstance(exc, WebTimeout):
        log.warning("the sign-in stopped: the %s did not come in time", what)
        return SignInTimeout(f"{what}: {exc}", seconds=max(1, math.ceil(exc.seconds)), name=identity.PROGRAM)
    return SignInFailed(f"{what}: {exc}")


def discover_resource(web: WebClient, url: str, from_challenge: str | None) -> ResourceMetadata:
    """The protected resource metadata of the upstream server at ``url``.

    Raises:
        SignInFailed: detail ``InsecureMetadataUrl`` (a candidate is not https, nor http on
            loopback with an upstream server on loopback),
            ``ResourceMismatch``, ``NoResourceMetadata`` or a request failure.
        SignInTimeout: a request did not end in time.
    """
    found = _first_metadata(
        web,
        _https_only(urls.resource_metadata_candidates(url, from_challenge), local=urls.local_upstream(url)),
        lambda doc: flow.check_resource_metadata(doc, url),
        what="resource metadata",
        missing="NoResourceMetadata",
    )
    log.debug("found the protected resource metadata")
    return found


def discover_server(web: WebClient, issuer: str, *, local: bool = False) -> ServerMetadata:
    """The metadata of the authorization server ``issuer``.

    ``local``: the upstream server is on loopback (:func:`.urls.local_upstream`).

    Raises:
        SignInFailed: detail ``NoServerMetadata``, ``IssuerMismatch``, ``NoS256``,
            ``InsecureEndpoint`` or a request failure.
        SignInTimeout: a request did not end in time.
    """
    found = _first_metadata(
        web,
        urls.server_metadata_candidates(issuer),
        lambda doc: flow.check_server_metadata(doc, issuer, local=local),
        what="authorization server metadata",
        missing="NoServerMetadata",
    )
    log.debug("found the metadata of the authorization server")
    return found


def _https_only(candidates: Iterable[str], *, local: bool) -> Iterator[str]:
    """The candidates in order; one that is not https stops the search when it is reached.

    Raises:
        SignInFailed: detail ``InsecureMetadataUrl``.
    """
    for candidate in candidates:
        if not urls.https_endpoint(candidate, local=local):
            raise SignInFailed("InsecureMetadataUrl")
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
            raise request_failed(what, exc) from exc
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
        SignInTimeout: the request did not end in time.
    """
    endpoint = server.registration_endpoint
    if endpoint is None or not urls.https_endpoint(endpoint, local=server.local):
        raise RegistrationUnavailable(redirect_uri=redirect)
    try:
        answer = web.post_json(endpoint, tokens.registration_body(redirect, server, device=device))
    except WebError as exc:
        raise request_failed("registration", exc) from exc
    try:
        registration = tokens.parse_registration(answer.status, answer.json)
    except tokens.RegistrationProblem as exc:
        raise RegistrationFailed(str(exc), redirect_uri=redirect) from exc
    log.info("the authorization server registered the bridge as a client")
    return registration


@dataclass(frozen=True)
class TokenClient:
    """The requests of one client at the token and device endpoints of one authorization server.

    The authentication of :attr:`registration` joins each request
    (:func:`.tokens.client_authentication`).
    """

    web: WebClient
    server: ServerMetadata
    registration: ClientRegistration

    def exchange_code(
        self, *, code: str, verifier: str, redirect: str, resource: str | None, now: float
    ) -> TokenResponse:
        """Trade the code of the redirect for tokens (``resource`` ``None``: without one).

        Raises:
            tokens.TokenProblem: the server refused.
            SignInFailed: the request failed.
            SignInTimeout: the request did not end in time.
        """
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "code_verifier": verifier,
        }
        return self._tokens(tokens.with_resource(form, resource), now, "token request")

    def refresh(
        self, *, refresh_token: str, resource: str | None, scopes: Sequence[str], now: float
    ) -> TokenResponse:
        """Get a new access token with the refresh token.

        Raises:
            tokens.TokenProblem: the server refused.
            SignInFailed: the request failed.
            SignInTimeout: the request did not end in time.
        """
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        return self._tokens(tokens.with_resource(form, resource, scopes), now, "refresh")

    def request_device_code(self, *, resource: str | None, scopes: Sequence[str]) -> DeviceAuthorization:
        """Ask the device authorization endpoint for a device code and a user code (RFC 8628 §3.1).

        The caller checked the endpoint (:func:`.grants.device_endpoint_problem`).

        Raises:
            tokens.TokenProblem: the server refused, or its answer cannot be used.
            SignInInvalidUrl: the verification URI is not a safe https URL.
            SignInFailed: the request failed.
            SignInTimeout: the request did not end in time.
        """
        endpoint = self.server.device_authorization_endpoint
        assert endpoint is not None
        form = grants.device_authorization_form(resource=resource, scopes=scopes)
        answer = self._post(endpoint, form, "device authorization")
        try:
            authorization = grants.parse_device_authorization(
                answer.status, answer.json, local=self.server.local
            )
        except grants.InvalidVerificationUri as exc:
            log.warning("the verification URI is not valid (%s), thus the bridge does not show it", exc)
            raise SignInInvalidUrl(str(exc)) from exc
        if authorization.dropped_complete:
            log.info("the complete verification URI is not valid: the bridge shows the verification URI")
        return authorization

    def poll_device_token(
        self, authorization: DeviceAuthorization, *, resource: str | None, interval: int, now: float
    ) -> Poll:
        """One token request of the device flow (RFC 8628 §3.4).

        Raises:
            grants.DeviceDenied: the person refused.
            grants.DeviceExpired: the device code expired.
            tokens.TokenProblem: another error.
            SignInFailed: the request failed.
            SignInTimeout: the request did not end in time.
        """
        form = grants.device_token_form(authorization, resource=resource)
        answer = self._post(self.server.token_endpoint, form, "token request")
        return grants.poll_answer(answer.status, answer.json, interval=interval, now=now)

    def client_credentials(self, *, resource: str | None, scopes: Sequence[str], now: float) -> TokenResponse:
        """A token of the client credentials grant (RFC 6749 §4.4).

        Raises:
            tokens.TokenProblem: the server refused.
            SignInFailed: the request failed.
            SignInTimeout: the request did not end in time.
        """
        form = grants.client_credentials_form(resource=resource, scopes=scopes)
        return self._tokens(form, now, "client credentials")

    def _tokens(self, form: dict[str, str], now: float, what: str) -> TokenResponse:
        answer = self._post(self.server.token_endpoint, form, what)
        return tokens.parse_token_response(answer.status, answer.json, now)

    def _post(self, endpoint: str, form: dict[str, str], what: str) -> WebResponse:
        """POST ``form`` with the client's authentication; ``what`` names the step in an error."""
        body, headers = tokens.client_authentication(self.registration, form)
        try:
            return self.web.post_form(endpoint, body, headers)
        except WebError as exc:
            raise request_failed(what, exc) from exc


class ResourceParameter:
    """The ``resource`` (RFC 8707) of the requests of one sign-in or refresh, and its one fallback.

    :param value: the ``resource`` of each request; ``None``: the requests have none.
    :param fallback: when the authorization server refuses ``value``
        (:func:`.flow.refuses_resource`), the request goes once more without it, and so do
        the later requests of the sign-in. There is never a second fallback: a request
        without ``resource`` that is refused fails.

    Some servers refuse it: Microsoft Entra ID answers ``AADSTS901002`` (the parameter
    is not supported) or ``AADSTS9010010`` (it does not match the scopes).
    """

    def __init__(self, value: str | None, *, fallback: bool) -> None:
        self.value = value
        self._fallback = fallback and value is not None
        #: The server refused ``resource`` during this sign-in, and the rest went without it.
        self.dropped = False

    @property
    def can_drop(self) -> bool:
        """A refusal of ``resource`` is answered with one more request without it."""
        return self._fallback

    def drop(self, where: str, detail: str) -> None:
        """Go on without ``resource``: one info line says where the server refused it, and how."""
        assert self._fallback
        self.value, self._fallback, self.dropped = None, False, True
        log.info(
            "the authorization server refused the resource indicator at its %s (%s): the bridge tries once "
            "more without it, and remembers that for the sign-in of this server",
            where,
            detail,
        )

    def send(self, request: Callable[..., _T], where: str) -> _T:
        """``request(resource=value)``; after a refusal of ``resource`` that may fall back,
        ``request(resource=None)``. ``where`` names the endpoint in the info line.

        Raises:
            tokens.TokenProblem: the server refused (also the request without ``resource``).
        """
        try:
            return request(resource=self.value)
        except tokens.TokenProblem as problem:
            if not (problem.refuses_resource and self._fallback):
                raise
            self.drop(where, str(problem))
        return request(resource=self.value)
