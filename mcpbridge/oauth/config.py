"""The sign-in's own options: how the bridge registers its client, and what the authorizer needs.

This module is pure. The command line builds a :class:`SignInOptions` from its settings, and
:func:`~mcpbridge.oauth.session.start_oauth` takes it; the sign-in thus works without the
command line. The fields that can hold a secret are left out of the ``repr``. The authorizer
reads the options of its upstream URL as an :class:`OAuthConfig`.
:func:`remote_session` reads from the environment whether the browser may be far from the
bridge, for the choice of the flow (:func:`.grants.choose_flow`).
"""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from . import identity as names

__all__ = [
    "CLIENT_SECRET_VARIABLE",
    "SANDBOX_VARIABLE",
    "SECRET_NAME",
    "in_sandbox",
    "DEFAULT_RESOURCE_INDICATOR",
    "DEFAULT_SIGN_IN_FLOW",
    "RESOURCE_INDICATOR_MODES",
    "SIGN_IN_FLOWS",
    "TOKEN_KEY_VARIABLE",
    "ClientMetadataDocument",
    "DynamicRegistration",
    "OAuthConfig",
    "PreRegistered",
    "Registration",
    "SignInFlow",
    "SignInOptions",
    "TokenStoreMode",
    "remote_session",
]

#: A secret name of ``--header-secret``: 1 to 64 letters, digits and ``. _ @ + -``.
SECRET_NAME: Final = re.compile(r"[A-Za-z0-9._@+\-]{1,64}\Z")

#: The client secret of ``--client-id``. There is no option for it.
CLIENT_SECRET_VARIABLE: Final = "MCP_BRIDGE_CLIENT_SECRET"
#: The key of the file store, 64 hexadecimal digits. There is no option for it.
TOKEN_KEY_VARIABLE: Final = "MCP_BRIDGE_TOKEN_KEY"
#: The words of ``--resource-indicator``; any other value is the URI to send as ``resource``.
#: ``auto`` sends the resource of the server's metadata and leaves it out once the
#: authorization server refused it; ``off`` never sends it.
RESOURCE_INDICATOR_MODES: Final = ("auto", "off")
DEFAULT_RESOURCE_INDICATOR: Final = "auto"


class SignInFlow(str, enum.Enum):
    """``--sign-in``: how the bridge signs in (:func:`.grants.choose_flow`)."""

    #: The device flow in a remote session when the server offers it, else the browser.
    AUTO = "auto"
    BROWSER = "browser"
    DEVICE = "device"
    #: The client's own tokens (a pre-registered client and its secret), no person.
    CLIENT_CREDENTIALS = "client-credentials"


#: The values of ``--sign-in``.
SIGN_IN_FLOWS: Final = tuple(flow.value for flow in SignInFlow)
DEFAULT_SIGN_IN_FLOW: Final = SignInFlow.AUTO.value


class TokenStoreMode(str, enum.Enum):
    """``--token-store``: where the sign-ins (and the secrets of ``--header-secret``) are kept."""

    #: The keychain; when it does not answer, the file store if it has a key, else the memory.
    AUTO = "auto"
    KEYCHAIN = "keychain"
    #: Encrypted files in the token directory; needs a key.
    FILE = "file"
    #: Nothing kept after the end of the process.
    MEMORY = "memory"


@dataclass(frozen=True, slots=True)
class PreRegistered:
    """``--client-id``: a client that the authorization server issued."""

    client_id: str
    #: ``--client-issuer``, or ``None``: then the client binds to the first authorization
    #: server the upstream server names. A client with a secret always has an issuer.
    issuer: str | None
    #: ``MCP_BRIDGE_CLIENT_SECRET`` (trimmed), or ``None`` for a public client.
    client_secret: str | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class ClientMetadataDocument:
    """A client ID metadata document, used when the authorization server supports it."""

    url: str
    #: True for ``--client-metadata-url``, false for the document of the bridge.
    explicit: bool


@dataclass(frozen=True, slots=True)
class DynamicRegistration:
    """Dynamic client registration only (RFC 7591)."""


Registration: TypeAlias = PreRegistered | ClientMetadataDocument | DynamicRegistration


@dataclass(frozen=True, slots=True)
class SignInOptions:
    """What the sign-in of one upstream URL needs: the account, the client, the token store."""

    url: str = field(repr=False)
    account: str
    redirect_port: int
    registration: Registration
    token_store: TokenStoreMode
    #: The 32 bytes of ``MCP_BRIDGE_TOKEN_KEY``, for the stores ``auto`` and ``file``.
    token_key: bytes | None = field(repr=False)
    token_key_file: str | None
    no_browser: bool
    sign_in_timeout: float
    #: ``--sign-in``.
    sign_in: SignInFlow = SignInFlow.AUTO
    #: ``--resource-indicator``: ``auto``, ``off`` or the URI to send as ``resource``.
    resource_indicator: str = DEFAULT_RESOURCE_INDICATOR
    #: The variables of ``--header-env``: like the client secret and the token key, a browser
    #: program must not get them.
    header_variables: frozenset[str] = frozenset()

    @property
    def names_files(self) -> bool:
        """Whether the token store options name files that the start checks: the file store,
        or a key file (:func:`.store.check_options` checks nothing else)."""
        return self.token_store is TokenStoreMode.FILE or self.token_key_file is not None

    @property
    def secret_variables(self) -> set[str]:
        """The variables that a browser program must not get."""
        return {CLIENT_SECRET_VARIABLE, TOKEN_KEY_VARIABLE, *self.header_variables}


def _set(env: Mapping[str, str], name: str) -> bool:
    return bool(env.get(name, "").strip())


#: The variable that the sandbox runtime of VS Code sets to ``1`` for a sandboxed server.
SANDBOX_VARIABLE: Final = "SANDBOX_RUNTIME"


def in_sandbox(env: Mapping[str, str]) -> bool:
    """Whether ``env`` says that the bridge runs in the sandbox of VS Code."""
    return env.get(SANDBOX_VARIABLE, "").strip() == "1"


def remote_session(
    env: Mapping[str, str], *, platform: str, wsl_localhost_forwarding: bool = True
) -> str | None:
    """Why a browser of the person possibly cannot reach the loopback address of the bridge.

    ``None`` when the bridge seems to run on the machine of the person. The reason
    names what the bridge found, never a value: ``the sandbox of VS Code (SANDBOX_RUNTIME
    is set)``, where no browser starts and the redirect port is closed, ``SSH_CONNECTION is set``,
    ``SSH_TTY is set``, ``REMOTE_CONTAINERS is set``, ``CODESPACES is set``,
    ``a WSL session without localhost forwarding`` or ``no DISPLAY or WAYLAND_DISPLAY``.

    :param platform: ``sys.platform``.
    :param wsl_localhost_forwarding: in a WSL session (``WSL_DISTRO_NAME`` is set),
        whether Windows forwards its loopback address into the session (the WSL default).
    """
    if in_sandbox(env):
        return f"the sandbox of VS Code ({SANDBOX_VARIABLE} is set)"
    for name in ("SSH_CONNECTION", "SSH_TTY", "REMOTE_CONTAINERS", "CODESPACES"):
        if _set(env, name):
            return f"{name} is set"
    if platform.startswith("linux"):
        if _set(env, "WSL_DISTRO_NAME"):
            # The browser runs on Windows; with forwarding it reaches 127.0.0.1 of the session.
            return None if wsl_localhost_forwarding else "a WSL session without localhost forwarding"
        if not _set(env, "DISPLAY") and not _set(env, "WAYLAND_DISPLAY"):
            return "no DISPLAY or WAYLAND_DISPLAY"
    return None


@dataclass(frozen=True)
class OAuthConfig:
    """The sign-in options of one upstream URL."""

    url: str
    account: str
    port: int
    registration: Registration
    #: ``--sign-in``.
    sign_in: SignInFlow = SignInFlow.AUTO
    #: Why the bridge seems to run far from the browser (:func:`remote_session`).
    remote: str | None = None
    #: ``--resource-indicator``: ``auto``, ``off`` or the URI to send as ``resource``.
    resource_indicator: str = "auto"

    @classmethod
    def of(cls, options: SignInOptions, env: Mapping[str, str]) -> OAuthConfig:
        """The config of the sign-in options of a command line, in the environment ``env``."""
        return cls(
            options.url,
            options.account,
            options.redirect_port,
            options.registration,
            sign_in=options.sign_in,
            remote=remote_session(env, platform=sys.platform),
            resource_indicator=options.resource_indicator,
        )

    @property
    def redirect_uri(self) -> str:
        return names.redirect_uri(self.port)

    @property
    def client_credentials(self) -> bool:
        return self.sign_in is SignInFlow.CLIENT_CREDENTIALS

    @property
    def identity(self) -> str:
        """The ``client`` of the record keys of this account and client.

        The tokens of the client credentials grant are the client's own, not a
        person's: they are kept apart from the sign-ins of the same client ID.
        """
        choice = self.registration
        if isinstance(choice, PreRegistered):
            identity = names.storage_identity(self.account, self.redirect_uri, client_id=choice.client_id)
            return identity + "|grant=client_credentials" if self.client_credentials else identity
        if isinstance(choice, ClientMetadataDocument) and choice.explicit:
            return names.storage_identity(self.account, self.redirect_uri, metadata_url=choice.url)
        return names.storage_identity(self.account, self.redirect_uri)
