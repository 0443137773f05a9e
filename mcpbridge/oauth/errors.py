"""The errors of the sign-in.

Each class names one cause of the error table of the bridge
(:data:`mcpbridge.bridge.rules.errortable.ERRORS`). Some messages of that table have
placeholders (``{seconds}``, ``{port}``, ``{redirect_uri}``, ``{name}``); a
:class:`SignInError` carries their values in ``placeholders``, and the error
table builds the error object (:func:`mcpbridge.bridge.rules.errortable.error_from_sign_in`):
this layer does not know the table.

``detail`` is a short text without a secret, a token, a code or a URL: an error
code of the authorization server, an HTTP status, the name of a failed check.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar, Final

from ..mcp.errorbase import BridgeError, LocalFault
from ..mcp.errors import McpError

__all__ = [
    "SIGN_IN_PROBLEMS",
    "OAuthError",
    "AccessRefused",
    "ClientCredentialsRefused",
    "DeviceSignInUnavailable",
    "InvalidClientMetadataUrl",
    "IssuerNotRegistered",
    "ReauthorizationRequired",
    "RedirectPortUnavailable",
    "RegistrationFailed",
    "RegistrationUnavailable",
    "ResourceUnknown",
    "Sandbox",
    "SignInDenied",
    "SignInError",
    "SignInClosed",
    "SignInFailed",
    "SignInInvalidUrl",
    "SignInStartReused",
    "SignInTimeout",
    "SignInAuthorizationError",
    "StoreError",
    "StoreOpenError",
    "InvalidRecord",
    "problem_text",
    "problem_words",
]

_OWNER_OF_SERVER = "ask the owner of the server to correct it"
_OWNER_OF_AUTH = "ask the owner of the authorization server to correct it"
_HTTPS_OR_LOOPBACK = (
    "serve the authorization server over https, or run it and the upstream server both on loopback "
    "(127.0.0.1, ::1 or localhost) for a local test"
)

#: The problems of the sign-in that an error names in its ``detail`` (a check of the
#: metadata, of the redirect, of the device endpoint): problem -> (what happened, what to do).
SIGN_IN_PROBLEMS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "InsecureEndpoint": (
            "an address of the authorization server is not a safe https URL, which the bridge refuses: "
            "it allows http only when the address and the upstream server are both on loopback",
            _HTTPS_OR_LOOPBACK,
        ),
        "InsecureUpstream": (
            "the URL of the upstream server is http on another machine, where a sign-in would send "
            "its tokens unencrypted, which the bridge refuses",
            "give the https URL of the server, or run it on loopback (127.0.0.1, ::1 or localhost) "
            "for a local test",
        ),
        "InsecureMetadataUrl": (
            "the protected resource metadata is at an http address, which the bridge refuses: it allows "
            "http only when the address and the upstream server are both on loopback",
            "serve the metadata over https, or run the upstream server and its authorization server both "
            "on loopback (127.0.0.1, ::1 or localhost) for a local test",
        ),
        "NoResourceMetadata": (
            "the server publishes no protected resource metadata",
            "check the URL, or send a token with --header-env Authorization=<variable>",
        ),
        "InvalidResourceMetadata": (
            "the protected resource metadata of the server is not valid",
            _OWNER_OF_SERVER,
        ),
        "ResourceMismatch": (
            "the protected resource metadata is for another URL",
            "check the URL: use the one that the metadata of the server names",
        ),
        "NoAuthorizationServer": (
            "the protected resource metadata names no authorization server",
            _OWNER_OF_SERVER,
        ),
        "NoServerMetadata": ("the authorization server publishes no metadata", _OWNER_OF_AUTH),
        "InvalidServerMetadata": ("the metadata of the authorization server is not valid", _OWNER_OF_AUTH),
        "IssuerMismatch": ("the metadata of the authorization server names another issuer", _OWNER_OF_AUTH),
        "NoS256": (
            "the authorization server does not offer PKCE with S256",
            "the bridge signs in only with it: ask the owner of the authorization server to offer it",
        ),
        "NoDeviceEndpoint": ("the authorization server offers no device sign-in", "use --sign-in browser"),
        "MissingIssuer": (
            "the redirect of the sign-in does not name the issuer that the authorization server promised",
            "restart the server to sign in again",
        ),
        "MissingCode": ("the redirect of the sign-in holds no code", "restart the server to sign in again"),
    }
)


def problem_words(detail: str) -> str:
    """What happened, in words, for a problem of :data:`SIGN_IN_PROBLEMS`; any other detail as it is."""
    found = SIGN_IN_PROBLEMS.get(detail)
    return found[0] if found is not None else detail


def problem_text(detail: str) -> str:
    """What happened and what to do, for a problem of :data:`SIGN_IN_PROBLEMS`; any other detail
    as it is."""
    found = SIGN_IN_PROBLEMS.get(detail)
    return f"{found[0]}; {found[1]}" if found is not None else detail


class OAuthError(BridgeError):
    """The root of the errors of :mod:`mcpbridge.oauth`."""


class SignInError(McpError, OAuthError):
    """A sign-in that failed; the root of the sign-in causes."""

    cause: ClassVar[str] = "sign_in_failed"

    def __init__(self, detail: str | None = None, **placeholders: object) -> None:
        super().__init__(detail)
        #: The values of the placeholders of the message of the cause.
        self.placeholders = placeholders


class SignInFailed(SignInError):
    """Any other failure: discovery, a token request, an end of the connection."""

    cause = "sign_in_failed"


class SignInClosed(SignInFailed):
    """The connection closed while the sign-in waited for the person: no fault of the sign-in,
    so it starts no cool-down (the detail ``closed``, the words of :class:`SignInFailed`)."""

    def __init__(self) -> None:
        super().__init__("closed")


class SignInTimeout(SignInError):
    """The browser did not come back in time; needs ``seconds`` and ``name``."""

    cause = "sign_in_timeout"


class SignInDenied(SignInError):
    """The authorization server answered ``access_denied``."""

    cause = "sign_in_denied"


class SignInAuthorizationError(SignInError):
    """The authorization server answered another error; detail ``error <code>``."""

    cause = "sign_in_error"


class SignInInvalidUrl(SignInError):
    """The authorization URL failed its checks; the bridge neither wrote nor opened it."""

    cause = "sign_in_invalid_url"


class SignInStartReused(SignInError):
    """The one-time start URL got a second request before the redirect."""

    cause = "sign_in_start_reused"


class RedirectPortUnavailable(SignInError):
    """The receiver cannot listen on the redirect port; needs ``port``."""

    cause = "redirect_port_unavailable"


class RegistrationUnavailable(SignInError):
    """The authorization server offers no registration the bridge can use; needs ``redirect_uri``."""

    cause = "registration_unavailable"


class RegistrationFailed(SignInError):
    """The dynamic registration was refused; needs ``redirect_uri``."""

    cause = "registration_failed"


class IssuerNotRegistered(SignInError):
    """``--client-id`` belongs to another authorization server."""

    cause = "issuer_not_registered"


class InvalidClientMetadataUrl(SignInError):
    """``--client-metadata-url`` cannot be a client ID."""

    cause = "invalid_client_metadata_url"


class AccessRefused(SignInError):
    """The upstream server still refused the request after the sign-in or the step-up."""

    cause = "access_refused"


class ResourceUnknown(AccessRefused):
    """The upstream server refused the token of a sign-in that went without ``resource``
    because the authorization server refused the upstream server's address as a resource
    (the fallback of ``--resource-indicator auto``): the token is not for this server."""

    cause = "resource_unknown"


class ReauthorizationRequired(SignInError):
    """A sign-in after start-up without the consent of the client.

    detail: ``declined``, ``no_consent`` or ``cooldown``.
    """

    cause = "reauthorization_required"


class Sandbox(SignInError):
    """``SANDBOX_RUNTIME=1``: the sandbox of VS Code blocks the browser and the port."""

    cause = "sandbox"


class DeviceSignInUnavailable(SignInError):
    """``--sign-in device``, and the authorization server offers no device sign-in.

    detail: ``NoDeviceEndpoint`` or ``InsecureEndpoint``.
    """

    cause = "device_sign_in_unavailable"


class ClientCredentialsRefused(SignInError):
    """The authorization server refused the client credentials; detail ``HTTP status N, error E``."""

    cause = "client_credentials_refused"


class StoreError(OAuthError, LocalFault):
    """A token store failed. ``name`` is the kind of the failure, ``detail`` says more.

    Names: ``KeychainUnavailable``, ``KeychainLocked``, ``KeychainFailed``,
    ``FileStoreFailed``, ``NoTokenDirectory``, ``InvalidTokenKey``,
    ``TokenKeyFileNotPrivate``, ``TokenKeyFileUnreadable``,
    ``TokenKeyInTokenDirectory``, ``TokenKeyMissing``.
    """

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"{name}: {detail}")
        self.name = name
        self.detail = detail

    def __str__(self) -> str:
        return self.detail


class StoreOpenError(StoreError):
    """A token store did not open: the executable exits with 2."""


class InvalidRecord(OAuthError, LocalFault):
    """A stored record that is not valid: tampered, moved, truncated, or of another key."""
