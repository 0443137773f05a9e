"""The pure rules of the sign-ins without a browser on the host of the bridge.

* The choice of the flow for ``--sign-in auto|browser|device|client-credentials``
  from the environment of the bridge and the metadata of the authorization server.
* The device authorization grant (RFC 8628): the request, its answer, and the
  answers of the token endpoint while the person signs in elsewhere.
* The client credentials grant (RFC 6749 §4.4) of a confidential client.

This module does no I/O, starts no thread and reads no clock: the callers pass
the environment and the time (``now``, in Unix seconds) in. The ``device_code``
is a secret: it is left out of every ``repr`` and never part of an error text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from ..mcp.errorbase import PeerFault, UsageFault
from .config import SignInFlow
from .errors import OAuthError
from .flow import ServerMetadata, answer_error
from .identity import PROGRAM
from .stored import ClientRegistration
from .tokens import (
    DEVICE_CODE_GRANT,
    MAX_EXPIRES_IN,
    TokenProblem,
    TokenResponse,
    choose_auth_method,
    parse_token_response,
    token_answer,
    token_member,
    token_seconds,
    with_resource,
)
from .urls import https_endpoint, url_syntax_problem

__all__ = [
    "CLIENT_CREDENTIALS_GRANT",
    "DEFAULT_INTERVAL",
    "DEVICE_CODE_GRANT",
    "INTERVAL_RANGE",
    "SLOW_DOWN_STEP",
    "DeviceAuthorization",
    "DeviceDenied",
    "DeviceExpired",
    "DeviceUnavailable",
    "FlowChoice",
    "Poll",
    "choose_flow",
    "client_credentials_form",
    "client_credentials_registration",
    "device_authorization_form",
    "device_endpoint_problem",
    "device_message",
    "device_sign_in_line",
    "device_token_form",
    "offered_flows",
    "parse_device_authorization",
    "poll_answer",
]

Flow: TypeAlias = Literal["browser", "device", "client-credentials"]

CLIENT_CREDENTIALS_GRANT: Final = "client_credentials"
#: RFC 8628 §3.2: the interval when the server names none.
DEFAULT_INTERVAL: Final = 5
#: RFC 8628 §3.5: ``slow_down`` adds this many seconds to the interval.
SLOW_DOWN_STEP: Final = 5
#: The longest interval the bridge waits between two token requests; a longer one is cut to this.
MAX_INTERVAL: Final = 60
#: The range of the ``interval`` of a device authorization answer: outside it, the answer is refused.
INTERVAL_RANGE: Final = (0, 24 * 3600)
MAX_USER_CODE_CHARS: Final = 64
MAX_DEVICE_CODE_CHARS: Final = 4096

_USER_CODE: Final = re.compile(rf"[!-~](?:[ -~]{{0,{MAX_USER_CODE_CHARS - 2}}}[!-~])?\Z")
_DEVICE_CODE: Final = re.compile(rf"[!-~]{{1,{MAX_DEVICE_CODE_CHARS}}}\Z")


# ---------------------------------------------------------------------------------------------
# The choice of the flow
# ---------------------------------------------------------------------------------------------


def device_endpoint_problem(server: ServerMetadata) -> str | None:
    """Why the device sign-in of ``server`` cannot run: ``NoDeviceEndpoint`` or ``InsecureEndpoint``.

    The device endpoint follows the rules of the other endpoints: https, a safe URL.
    """
    endpoint = server.device_authorization_endpoint
    if endpoint is None:
        return "NoDeviceEndpoint"
    if not https_endpoint(endpoint, local=server.local):
        return "InsecureEndpoint"
    return None


def offered_flows(server: ServerMetadata) -> dict[Flow, bool | None]:
    """Which flows ``server`` offers: True, False, or ``None`` when its metadata does not say.

    The browser flow is always offered (the metadata checks demand its endpoint and
    PKCE). The client credentials grant is offered when ``grant_types_supported``
    lists it; without that list, only a token request can tell.
    """
    grants = server.grant_types_supported
    return {
        "browser": True,
        "device": device_endpoint_problem(server) is None,
        "client-credentials": None if grants is None else CLIENT_CREDENTIALS_GRANT in grants,
    }


@dataclass(frozen=True, slots=True)
class FlowChoice:
    """The flow of a sign-in and why (a short text for a log line and ``check``)."""

    flow: Flow
    reason: str


class DeviceUnavailable(OAuthError, UsageFault):
    """``--sign-in device`` and the server offers no device sign-in; the message is the short name."""


def choose_flow(requested: SignInFlow, *, remote: str | None, server: ServerMetadata) -> FlowChoice:
    """The flow for ``--sign-in requested``.

    ``auto`` takes the device flow when the bridge runs in a remote session
    (:func:`.config.remote_session` gave a reason) and the server offers it, else the browser.

    Raises:
        DeviceUnavailable: ``device`` was asked for and :func:`device_endpoint_problem`
            found a problem (the message is that problem).
    """
    if requested is SignInFlow.BROWSER:
        return FlowChoice("browser", "--sign-in browser")
    if requested is SignInFlow.CLIENT_CREDENTIALS:
        return FlowChoice("client-credentials", "--sign-in client-credentials")
    problem = device_endpoint_problem(server)
    if requested is SignInFlow.DEVICE:
        if problem is not None:
            raise DeviceUnavailable(problem)
        return FlowChoice("device", "--sign-in device")
    if remote is None:
        return FlowChoice("browser", "the bridge runs on the machine of the browser")
    if problem is None:
        return FlowChoice("device", f"a remote session ({remote}) and the server offers the device sign-in")
    what = (
        "offers no device sign-in"
        if problem == "NoDeviceEndpoint"
        else "has a device endpoint that is not https"
    )
    return FlowChoice("browser", f"a remote session ({remote}), but the server {what}")


# ---------------------------------------------------------------------------------------------
# The device authorization grant (RFC 8628)
# ---------------------------------------------------------------------------------------------


def device_authorization_form(*, resource: str | None, scopes: Sequence[str]) -> dict[str, str]:
    """The form of the device authorization request, before the client's authentication.

    The client ID (or its authentication) joins with :func:`.tokens.client_authentication`.
    """
    return with_resource({}, resource, scopes)


@dataclass(frozen=True, slots=True)
class DeviceAuthorization:
    """The answer of the device authorization endpoint (RFC 8628 §3.2)."""

    device_code: str = field(repr=False)
    user_code: str
    verification_uri: str
    #: The page with the user code in it, or ``None`` (also when it failed the URL checks).
    verification_uri_complete: str | None
    #: Seconds from the answer until the device code expires.
    expires_in: float
    #: Seconds between two token requests.
    interval: int
    #: The server sent a ``verification_uri_complete`` that failed the URL checks.
    dropped_complete: bool = False

    @property
    def page(self) -> str:
        """The page to open: the complete verification URI when there is one."""
        return self.verification_uri_complete or self.verification_uri


class InvalidVerificationUri(OAuthError, PeerFault):
    """The ``verification_uri`` fails the URL checks; the message says why (no URL)."""


def parse_device_authorization(status: int, doc: Any, *, local: bool = False) -> DeviceAuthorization:
    """The device authorization of an answer of the device endpoint.

    ``local``: the upstream server is on loopback; a verification URI on loopback may be http.

    ``expires_in`` is a number of seconds from 1 to :data:`.tokens.MAX_EXPIRES_IN`.
    ``interval``, when the answer has it, is a number in :data:`INTERVAL_RANGE`: less than
    1 s counts as :data:`DEFAULT_INTERVAL`, more than :data:`MAX_INTERVAL` as that.

    Raises:
        TokenProblem: an error answer, or an answer without a usable ``device_code``,
            ``user_code`` or ``expires_in``, or with an ``interval`` out of its range (the
            message names the member, never a value).
        InvalidVerificationUri: the ``verification_uri`` is not a safe https URL.
    """
    doc = token_answer(status, doc)
    device_code = token_member(status, doc, "device_code", _DEVICE_CODE)
    user_code = token_member(status, doc, "user_code", _USER_CODE)
    uri = doc.get("verification_uri")
    if not isinstance(uri, str):
        raise TokenProblem(status, None, "no verification_uri")
    problem = url_syntax_problem(uri, local=local)
    if problem is not None:
        raise InvalidVerificationUri(problem)
    complete = doc.get("verification_uri_complete")
    dropped = False
    if complete is not None and (
        not isinstance(complete, str) or url_syntax_problem(complete, local=local) is not None
    ):
        complete, dropped = None, True
    expires_in = token_seconds(status, doc, "expires_in", low=1, high=MAX_EXPIRES_IN)
    if expires_in is None:
        raise TokenProblem(status, None, "no valid expires_in")
    low, high = INTERVAL_RANGE
    interval = token_seconds(status, doc, "interval", low=low, high=high)
    seconds = DEFAULT_INTERVAL if interval is None or interval < 1 else min(MAX_INTERVAL, int(interval))
    return DeviceAuthorization(device_code, user_code, uri, complete, expires_in, seconds, dropped)


def device_token_form(authorization: DeviceAuthorization, *, resource: str | None) -> dict[str, str]:
    """The form of one token request of the device flow (before the client's authentication)."""
    form = {"grant_type": DEVICE_CODE_GRANT, "device_code": authorization.device_code}
    return with_resource(form, resource)


class DeviceDenied(OAuthError, PeerFault):
    """The person refused the access (``access_denied``)."""


class DeviceExpired(OAuthError, PeerFault):
    """The device code expired before the person signed in (``expired_token``)."""


@dataclass(frozen=True, slots=True)
class Poll:
    """The outcome of one token request of the device flow: the tokens, or the next interval."""

    tokens: TokenResponse | None
    interval: int


def poll_answer(status: int, doc: Any, *, interval: int, now: float) -> Poll:
    """Read one answer of the token endpoint while the person signs in (RFC 8628 §3.5).

    ``authorization_pending`` keeps the interval, ``slow_down`` adds
    :data:`SLOW_DOWN_STEP` seconds (up to :data:`MAX_INTERVAL`).

    Raises:
        DeviceDenied: ``access_denied``.
        DeviceExpired: ``expired_token``.
        TokenProblem: any other error, or tokens that cannot be used.
    """
    if status == 200:
        return Poll(parse_token_response(status, doc, now), interval)
    code = answer_error(doc)
    if code == "authorization_pending":
        return Poll(None, interval)
    if code == "slow_down":
        return Poll(None, min(MAX_INTERVAL, interval + SLOW_DOWN_STEP))
    if code == "access_denied":
        raise DeviceDenied()
    if code == "expired_token":
        raise DeviceExpired()
    raise TokenProblem.of_answer(status, doc)


def device_sign_in_line(authorization: DeviceAuthorization) -> str:
    """The sign-in line of the device flow for stderr (one line, with its newline).

    It names the verification URI and the user code; never the device code.
    """
    return f"{PROGRAM}: sign in at {authorization.verification_uri} with the code {authorization.user_code}\n"


def device_message(authorization: DeviceAuthorization) -> str:
    """The message of the URL elicitation of the device flow: the code to enter or to compare."""
    if authorization.verification_uri_complete is not None:
        return (
            "The upstream server needs a sign-in. Open the page of its authorization server and confirm "
            f"the code {authorization.user_code}."
        )
    return (
        "The upstream server needs a sign-in. Open the page of its authorization server and enter "
        f"the code {authorization.user_code}."
    )


# ---------------------------------------------------------------------------------------------
# The client credentials grant
# ---------------------------------------------------------------------------------------------


def client_credentials_registration(
    client_id: str, secret: str, server: ServerMetadata
) -> ClientRegistration:
    """The confidential client of ``--sign-in client-credentials``.

    ``client_secret_basic``, or ``client_secret_post`` when the server lists only that
    (:func:`.tokens.choose_auth_method`).
    """
    return ClientRegistration(client_id, secret, choose_auth_method(server, True))


def client_credentials_form(*, resource: str | None, scopes: Sequence[str]) -> dict[str, str]:
    """The form of the token request of the client credentials grant."""
    return with_resource({"grant_type": CLIENT_CREDENTIALS_GRANT}, resource, scopes)
