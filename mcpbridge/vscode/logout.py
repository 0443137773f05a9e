"""``mcp-bridge-vscode logout [options] <url>`` and ``logout [options] --all``.

Logout deletes stored sign-ins; it never contacts the authorization server.

* ``--token-store memory``: nothing is stored after a process ends; nothing to do.
* ``keychain`` or ``file``: that store only; a store that does not open exits with 2.
* ``auto``: the keychain, then the file store; a store that does not open is skipped.
* ``<url>``: the records that the index lists for the URL and the account (each
  registration of the account). When the index knows none, the protected
  resource metadata of the URL gives the key of the default client, if its
  ``resource`` covers the URL.
* ``--all``: every indexed record and the index of each store, then the whole
  token directory (which needs no key).

Exit codes: 0 when the sign-ins are deleted or there was nothing to delete; 1 when
a deletion failed; 2 when an explicitly chosen store did not open.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from ..oauth import identity
from ..oauth.config import TokenStoreMode
from ..oauth.errors import SignInError, StoreError, StoreOpenError
from ..oauth.filestore import EncryptedFileStore, read_key_file, token_directory
from ..oauth.keychain import KeyringStore
from ..oauth.store import IndexedStore
from ..oauth.stored import IndexEntry, RecordKey
from ..oauth.tokenstore import TokenStore
from . import settings as args

__all__ = ["logout"]

log = logging.getLogger("mcpbridge.vscode")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_NO_STORE = 2


def logout(
    settings: args.LogoutSettings,
    *,
    env: Mapping[str, str] | None = None,
    keychain: Callable[[], TokenStore] = KeyringStore.open,
) -> int:
    """Run the logout of ``settings``; return the exit code."""
    environment = os.environ if env is None else env
    mode = settings.store.token_store
    if mode is TokenStoreMode.MEMORY:
        log.info(
            "the memory store keeps no sign-in after the end of the process: logout has nothing to delete"
        )
        return EXIT_OK
    stores: list[tuple[str, TokenStore]] = []
    kinds = (TokenStoreMode.KEYCHAIN, TokenStoreMode.FILE) if mode is TokenStoreMode.AUTO else (mode,)
    for kind in kinds:
        try:
            stores.append((kind.value, _open(kind, settings, environment, keychain)))
        except StoreOpenError as exc:
            if mode is not TokenStoreMode.AUTO:
                log.error("the token store did not open: %s", exc.detail)
                return EXIT_NO_STORE
            log.info("logout skips the %s store: %s", kind.value, exc.detail)
    if settings.all:
        return _logout_all(stores, mode, environment)
    assert settings.url is not None
    return _logout_url(stores, settings, environment)


def _open(
    kind: TokenStoreMode,
    settings: args.LogoutSettings,
    env: Mapping[str, str],
    keychain: Callable[[], TokenStore],
) -> TokenStore:
    if kind is TokenStoreMode.KEYCHAIN:
        return keychain()
    directory = token_directory(env)
    store = settings.store
    key = read_key_file(store.token_key_file, directory) if store.token_key_file else store.token_key
    if key is None:
        raise StoreOpenError(
            "TokenKeyMissing", "no token key is set (MCP_BRIDGE_TOKEN_KEY or --token-key-file)"
        )
    if not directory.is_dir():
        # Nothing was ever stored there; do not make the directory just to look into it.
        return EncryptedFileStore(directory, key)
    return EncryptedFileStore.open(directory, key)


class _Outcome:
    """What a logout did: how many stored sign-ins it deleted, and whether a step failed."""

    def __init__(self) -> None:
        self.deleted = 0
        self.failed = False

    def entries(self, name: str, indexed: IndexedStore) -> list[IndexEntry] | None:
        """The entries of the index of the store ``name``, or None (logged) when it cannot be read."""
        try:
            return indexed.entries()
        except StoreError as exc:
            log.warning("logout cannot read the index of the %s store: %s", name, exc.detail)
            self.failed = True
            return None

    def delete(self, name: str, delete: Callable[[], bool]) -> None:
        """Delete one stored sign-in of the store ``name``: count it, or log the failure."""
        try:
            if delete():
                self.deleted += 1
        except StoreError as exc:
            log.warning("logout cannot delete a stored sign-in of the %s store: %s", name, exc.detail)
            self.failed = True

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_OK


def _logout_all(stores: list[tuple[str, TokenStore]], mode: TokenStoreMode, env: Mapping[str, str]) -> int:
    """Delete every stored sign-in of ``stores``, and the token directory for the store ``mode``."""
    outcome = _Outcome()
    for name, store in stores:
        indexed = IndexedStore(store)
        entries = outcome.entries(name, indexed)
        if entries is None:
            continue
        for key in dict.fromkeys(entry.key for entry in entries):
            outcome.delete(name, functools.partial(store.delete, key))
        try:
            indexed.delete_index()
        except StoreError as exc:
            log.warning("logout cannot delete the index of the %s store: %s", name, exc.detail)
            outcome.failed = True
    if mode in (TokenStoreMode.AUTO, TokenStoreMode.FILE):
        try:
            directory: Path | None = token_directory(env)
        except StoreOpenError as exc:
            log.info("logout has no token directory: %s", exc.detail)
            directory = None
        if directory is not None and directory.exists():
            try:
                shutil.rmtree(directory)
            except OSError as exc:
                log.error("logout cannot delete the token directory %s: %s", directory, exc.strerror)
                outcome.failed = True
            else:
                log.info("deleted the token directory %s", directory)
    log.info("logout deleted %d stored sign-ins", outcome.deleted)
    return outcome.exit_code


def _logout_url(
    stores: list[tuple[str, TokenStore]], settings: args.LogoutSettings, env: Mapping[str, str]
) -> int:
    assert settings.url is not None
    url = settings.url
    base = identity.base_identity(settings.store.account, identity.redirect_uri(settings.redirect_port))
    outcome = _Outcome()
    known = False
    for name, store in stores:
        indexed = IndexedStore(store)
        entries = outcome.entries(name, indexed)
        if entries is None:
            continue
        keys = [
            e.key for e in entries if e.url == url and (e.client == base or e.client.startswith(base + "|"))
        ]
        for key in dict.fromkeys(keys):
            known = True
            outcome.delete(name, functools.partial(indexed.delete, key))
    if not known and stores:
        found = _key_from_metadata(settings, env, base)
        if found is not None:
            for name, store in stores:
                outcome.delete(name, functools.partial(IndexedStore(store).delete, found))
    if outcome.deleted:
        log.info(
            'logout deleted the stored sign-in of the account "%s". Restart the server in VS Code to sign in '
            "again.",
            settings.store.account,
        )
    elif not outcome.failed:
        log.info('logout found no stored sign-in of the account "%s" for the URL', settings.store.account)
    return outcome.exit_code


def _key_from_metadata(settings: args.LogoutSettings, env: Mapping[str, str], base: str) -> RecordKey | None:
    """The key of the default client from the protected resource metadata of the URL, or None."""
    from ..mcp.transports.http import CaFileError, tls_context
    from ..oauth.discovery import discover_resource
    from ..oauth.web import WebClient

    assert settings.url is not None
    try:
        context = tls_context(settings.ca_file)
    except CaFileError as exc:
        log.warning("logout cannot use the CA certificates of --ca-file: %s", exc.detail)
        return None
    web = WebClient(context, env)
    try:
        resource = discover_resource(web, settings.url, None)
    except SignInError as exc:
        log.info("logout found no protected resource metadata for the URL (%s)", exc.detail)
        return None
    finally:
        web.close()
    return RecordKey(resource.issuer, resource.resource, base)
