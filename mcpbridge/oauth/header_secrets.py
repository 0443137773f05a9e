"""Header secrets: values of headers kept in a token store, by name and account.

``mcp-bridge-vscode secret set <name>`` keeps a value once; ``--header-secret
<header>=<name>`` sends it. The value never goes on the command line, into an
environment variable of the configuration or into ``${input:...}`` of VS Code.

The secrets live in the store of the tokens (:mod:`.store`): the keychain of the
host, else the encrypted files when a token key is set. The memory store keeps
nothing after the end of a process, so it holds no secret. Each secret is one
record under the key (``mcpbridge:header-secret``, account, name); the names of an
account are one more record, so ``secret list`` shows them without reading a value.
A value is stored as the base64 of its bytes: the keychain keeps text, and a value
of the command line's world is any byte except the controls.

This module never logs a value, and no error of it holds one.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable, Mapping
from typing import Final

from .config import SECRET_NAME, TokenStoreMode
from .errors import InvalidRecord, StoreOpenError
from .keychain import KeyringStore
from .store import OpenedStore, open_store
from .stored import RecordKey
from .tokenstore import MemoryStore, TokenStore

__all__ = [
    "MAX_SECRET_BYTES",
    "SECRET_NAME",
    "HeaderSecrets",
    "open_secret_store",
]

log = logging.getLogger("mcpbridge.oauth")

#: The issuer part of the record keys of the secrets: no authorization server has it.
SECRET_ISSUER: Final = "mcpbridge:header-secret"
#: The client part of the record that lists the names of an account.
_NAMES: Final = "mcpbridge:names"
#: The largest value: far more than any header that a server accepts.
MAX_SECRET_BYTES: Final = 64 * 1024


def open_secret_store(
    mode: TokenStoreMode,
    *,
    key: bytes | None,
    key_file: str | None,
    env: Mapping[str, str],
    keychain: Callable[[], TokenStore] = KeyringStore.open,
) -> OpenedStore:
    """The store of ``--token-store`` that keeps secrets: never the memory store.

    Raises:
        StoreOpenError: the store does not open, or only the memory would keep the secrets.
    """
    if mode is TokenStoreMode.MEMORY:
        raise StoreOpenError(
            "MemoryStore", "the memory store keeps no secret: use --token-store auto, keychain or file"
        )
    opened = open_store(mode, key=key, key_file=key_file, env=env, keychain=keychain)
    if opened.store.kind == MemoryStore.kind:
        raise StoreOpenError(
            "NoSecretStore",
            "the keychain is not available and no token key is set: set MCP_BRIDGE_TOKEN_KEY "
            "or give --token-key-file to keep the secrets in the file store",
        )
    return opened


class HeaderSecrets:
    """The secrets of one account in a token store."""

    def __init__(self, store: TokenStore, account: str) -> None:
        self._store = store
        self._account = account

    def _key(self, name: str) -> RecordKey:
        return RecordKey(SECRET_ISSUER, self._account, name)

    def _names_key(self) -> RecordKey:
        return RecordKey(SECRET_ISSUER, self._account, _NAMES)

    def get(self, name: str) -> str | None:
        """The value of the secret ``name``, or ``None`` when it is not stored.

        Raises:
            StoreError: the store failed, or the record is damaged.
        """
        data = self._store.get(self._key(name))
        if data is None:
            return None
        try:
            return base64.b64decode(data, validate=True).decode("utf-8", "surrogateescape")
        except (binascii.Error, ValueError) as exc:
            raise InvalidRecord("a stored secret is not valid") from exc

    def set(self, name: str, value: str) -> None:
        """Keep ``value`` as the secret ``name``, replacing the one that was there.

        Raises:
            StoreError: the store failed.
        """
        data = base64.b64encode(value.encode("utf-8", "surrogateescape"))
        self._store.put(self._key(name), data)
        names = self.names()
        if name not in names:
            self._write_names([*names, name])

    def delete(self, name: str) -> bool:
        """Delete the secret ``name``; tell whether it existed.

        Raises:
            StoreError: the store failed.
        """
        existed = self._store.delete(self._key(name))
        names = self.names()
        if name in names:
            self._write_names([n for n in names if n != name])
        return existed

    def names(self) -> list[str]:
        """The names of the stored secrets of the account, in the order they were first set."""
        try:
            data = self._store.get(self._names_key())
        except InvalidRecord:
            log.warning("the list of the secret names is damaged: it starts again empty")
            return []
        if data is None:
            return []
        try:
            value = json.loads(data)
        except ValueError:
            return []
        if not isinstance(value, list):
            return []
        return [n for n in value if isinstance(n, str) and SECRET_NAME.match(n)]

    def _write_names(self, names: list[str]) -> None:
        self._store.put(self._names_key(), json.dumps(names).encode("ascii"))
