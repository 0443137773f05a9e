"""The sign-in's own options: how the bridge registers its client, and what the authorizer needs.

This module is pure. The command line builds a :class:`SignInOptions` from its settings, and
:func:`~mcpbridge.oauth.authorizer.start_oauth` takes it; the sign-in thus works without the
command line. The fields that can hold a secret are left out of the ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, TypeAlias

__all__ = [
    "CLIENT_SECRET_VARIABLE",
    "DEFAULT_SIGN_IN_FLOW",
    "SIGN_IN_FLOWS",
    "TOKEN_KEY_VARIABLE",
    "ClientMetadataDocument",
    "DynamicRegistration",
    "PreRegistered",
    "Registration",
    "SignInOptions",
]

#: The client secret of ``--client-id``. There is no option for it.
CLIENT_SECRET_VARIABLE: Final = "MCP_BRIDGE_CLIENT_SECRET"
#: The key of the file store, 64 hexadecimal digits. There is no option for it.
TOKEN_KEY_VARIABLE: Final = "MCP_BRIDGE_TOKEN_KEY"
#: The values of ``--sign-in``.
SIGN_IN_FLOWS: Final = ("auto", "browser", "device", "client-credentials")
DEFAULT_SIGN_IN_FLOW: Final = "auto"


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
    #: ``auto``, ``keychain``, ``file`` or ``memory``.
    token_store: str
    #: The 32 bytes of ``MCP_BRIDGE_TOKEN_KEY``, for the stores ``auto`` and ``file``.
    token_key: bytes | None = field(repr=False)
    token_key_file: str | None
    no_browser: bool
    sign_in_timeout: float
    #: ``--sign-in``: ``auto``, ``browser``, ``device`` or ``client-credentials``.
    sign_in: str = "auto"
    #: The variables of ``--header-env``: like the client secret and the token key, a browser
    #: program must not get them.
    header_variables: frozenset[str] = frozenset()

    @property
    def secret_variables(self) -> set[str]:
        """The variables that a browser program must not get."""
        return {CLIENT_SECRET_VARIABLE, TOKEN_KEY_VARIABLE, *self.header_variables}
