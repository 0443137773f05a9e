"""The identity of the bridge in the stored sign-ins: its name, the redirect URI, the record's client.

These values are part of the stored records: never change them. They are apart from
:mod:`.flow` (which names them too), so that the options of the sign-in
(:mod:`.config`) and the gate of a sign-in (:mod:`.signin`) load without the rules
of the flow at each start of the bridge.

This module is pure.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT_NAME",
    "DEFAULT_REDIRECT_PORT",
    "INDEX_CLIENT",
    "INDEX_ISSUER",
    "KEYCHAIN_SERVICE",
    "PROGRAM",
    "TOKEN_DIRECTORY_PARTS",
    "base_identity",
    "redirect_uri",
    "storage_identity",
]

PROGRAM: Final = "mcp-bridge-vscode"
#: ``client_name`` of the dynamic registration and of the client ID metadata document.
CLIENT_NAME: Final = "mcp-bridge-vscode (mcpbridge)"
#: The service of the keychain entries.
KEYCHAIN_SERVICE: Final = "mcpbridge/mcp-bridge-vscode"
#: The folders of the file store below the state directory.
TOKEN_DIRECTORY_PARTS: Final = ("mcpbridge", "vscode", "tokens")
#: The key of the index of the stored sign-ins.
INDEX_ISSUER: Final = "urn:mcpbridge:index"
INDEX_CLIENT: Final = PROGRAM
#: The default port of the redirect URI.
DEFAULT_REDIRECT_PORT: Final = 41894


def redirect_uri(port: int) -> str:
    """The redirect URI of the receiver: always the literal loopback address."""
    return f"http://127.0.0.1:{port}/callback"


def base_identity(account: str, redirect: str) -> str:
    """The storage identity of an account: ``mcp-bridge-vscode|<account>|<redirect URI>``."""
    return f"{PROGRAM}|{account}|{redirect}"


def storage_identity(
    account: str, redirect: str, *, client_id: str | None = None, metadata_url: str | None = None
) -> str:
    """The ``client`` of the record key.

    Dynamic registration and the document of the bridge use :func:`base_identity`; a
    pre-registered client adds ``|client=<id>``, another client ID metadata document
    adds ``|cimd=<url>``. Thus the sign-ins of different clients never mix.
    """
    identity = base_identity(account, redirect)
    if client_id is not None:
        return f"{identity}|client={client_id}"
    if metadata_url is not None:
        return f"{identity}|cimd={metadata_url}"
    return identity
