"""The token stores: which one opens, the fallback between them, and the index of the sign-ins.

The stores themselves are in :mod:`.tokenstore` (the contract, memory), :mod:`.keychain`
and :mod:`.filestore`.

A :class:`TokenStore` keeps opaque bytes under a :class:`~.stored.RecordKey`.
:class:`IndexedStore` keeps the records of the sign-ins (JSON, see
:func:`.stored.record_to_json`) and an index of them in the same store, so
``logout`` finds them without the network.

``--token-store auto`` (:func:`open_store`) takes the keychain of the host; if
the keychain is unavailable or locked, the encrypted files when a key is set
(``MCP_BRIDGE_TOKEN_KEY`` or ``--token-key-file``); else the memory. A
keychain that stops to answer later hands over to the next store once, for the
rest of the process.

``keyring`` and ``cryptography`` are imported when a store needs them. The URL
form opens its store at the first request that needs a token
(:class:`DeferredStore`); :func:`check_options` tells at the start what is wrong
with the options without opening anything.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

from .. import platform
from . import stored
from .config import TokenStoreMode
from .errors import InvalidRecord, StoreError, StoreOpenError
from .filestore import EncryptedFileStore, read_key_file, token_directory
from .keychain import KEYCHAIN_TIMEOUT, KeyringStore
from .stored import IndexEntry, Record, RecordKey
from .tokenstore import MemoryStore, TokenStore

__all__ = [
    "DeferredStore",
    "FallbackStore",
    "IndexedStore",
    "OpenedStore",
    "check_options",
    "open_store",
]

log = logging.getLogger("mcpbridge.oauth")

#: The longest wait of a use of a :class:`DeferredStore` for the open that runs on its own
#: thread: each call of the keychain is bounded by :data:`.keychain.KEYCHAIN_TIMEOUT`, and
#: opening makes at most two of them.
EARLY_OPEN_WAIT: Final = 2 * KEYCHAIN_TIMEOUT + 5.0
#: The longest wait for the lock of the index that another bridge holds.
INDEX_LOCK_TIMEOUT: Final = 10.0

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# auto: the keychain, then the next store
# ---------------------------------------------------------------------------------------------


class FallbackStore(TokenStore):
    """The keychain until it stops to answer; then, once, the next store for the rest of the process."""

    def __init__(self, primary: TokenStore, make_next: Callable[[], TokenStore]) -> None:
        self._primary = primary
        self._make_next = make_next
        self._next: TokenStore | None = None
        self._lock = threading.Lock()

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self._current().kind

    @property
    def lock_path(self) -> Path | None:  # type: ignore[override]
        return self._current().lock_path

    def _current(self) -> TokenStore:
        with self._lock:
            return self._next if self._next is not None else self._primary

    def _switch(self, error: StoreError) -> TokenStore:
        with self._lock:
            if self._next is None:
                self._next = self._make_next()
                log.warning(
                    "the keychain stopped to answer (%s). For the rest of the process, %s",
                    error.detail,
                    self._next.describe(),
                )
            return self._next

    def _run(self, call: Callable[[TokenStore], T]) -> T:
        store = self._current()
        try:
            return call(store)
        except StoreError as exc:
            if store is not self._primary or exc.name not in ("KeychainUnavailable", "KeychainLocked"):
                raise
            return call(self._switch(exc))

    def get(self, key: RecordKey) -> bytes | None:
        return self._run(lambda s: s.get(key))

    def put(self, key: RecordKey, data: bytes) -> None:
        self._run(lambda s: s.put(key, data))

    def delete(self, key: RecordKey) -> bool:
        return self._run(lambda s: s.delete(key))

    def describe(self) -> str:
        return self._current().describe()


# ---------------------------------------------------------------------------------------------
# Opening a store
# ---------------------------------------------------------------------------------------------

_MEMORY_EXPLICIT: Final = "the tokens stay in memory (--token-store memory): each start needs a new sign-in"


@dataclass(frozen=True)
class OpenedStore:
    store: TokenStore
    #: The info line: where the tokens are.
    line: str


def _file_key(key: bytes | None, key_file: str | None, directory: Path) -> bytes | None:
    if key_file is not None:
        return read_key_file(key_file, directory)
    return key


def _share_index_lock(store: TokenStore, env: Mapping[str, str]) -> None:
    """Give the keychain the lock file of the index: ``<state dir>/mcpbridge/vscode/index.lock``."""
    if isinstance(store, KeyringStore) and store.lock_path is None:
        try:
            store.lock_path = token_directory(env).parent / "index.lock"
        except StoreOpenError:
            log.debug("no state directory: the index of the keychain is not locked between processes")


def open_store(
    mode: TokenStoreMode,
    *,
    key: bytes | None,
    key_file: str | None,
    env: Mapping[str, str],
    keychain: Callable[[], TokenStore] = KeyringStore.open,
) -> OpenedStore:
    """Open the store of ``--token-store`` (``auto``, ``keychain``, ``file`` or ``memory``).

    :param key: the key of ``MCP_BRIDGE_TOKEN_KEY`` (already checked by the parser).
    :param key_file: ``--token-key-file``.
    :param keychain: opens the keychain (tests give another one).

    Raises:
        StoreOpenError: an explicit store did not open, or the key file is not usable.
    """
    if mode is TokenStoreMode.MEMORY:
        return OpenedStore(MemoryStore(_MEMORY_EXPLICIT), _MEMORY_EXPLICIT)
    if mode is TokenStoreMode.KEYCHAIN:
        store = keychain()
        _share_index_lock(store, env)
        return OpenedStore(store, store.describe())
    if mode is TokenStoreMode.FILE:
        directory = token_directory(env)
        file_key = _file_key(key, key_file, directory)
        if file_key is None:
            raise StoreOpenError(
                "TokenKeyMissing",
                "the file store needs a key: set MCP_BRIDGE_TOKEN_KEY, or give --token-key-file",
            )
        store = EncryptedFileStore.open(directory, file_key)
        return OpenedStore(store, store.describe())
    return _open_auto(key=key, key_file=key_file, env=env, keychain=keychain)


def _open_auto(
    *, key: bytes | None, key_file: str | None, env: Mapping[str, str], keychain: Callable[[], TokenStore]
) -> OpenedStore:
    """``--token-store auto``: the keychain, with the next store for when it stops to answer."""
    try:
        primary = keychain()
    except StoreOpenError as exc:
        if exc.name not in ("KeychainUnavailable", "KeychainLocked"):
            raise
        store, line = _after_keychain(exc, key=key, key_file=key_file, env=env)
        return OpenedStore(store, line)
    if key_file is not None:
        # A key file that cannot be used is an error also while the keychain works.
        read_key_file(key_file, token_directory(env))
    _share_index_lock(primary, env)

    def make_next() -> TokenStore:
        why = StoreError("KeychainUnavailable", "it stopped to answer")
        return _after_keychain(why, key=key, key_file=key_file, env=env)[0]

    return OpenedStore(FallbackStore(primary, make_next), primary.describe())


def _after_keychain(
    why: StoreError, *, key: bytes | None, key_file: str | None, env: Mapping[str, str]
) -> tuple[TokenStore, str]:
    """The store after the keychain (``why``: its failure) and the line that says so."""
    reason = why.detail
    try:
        directory = token_directory(env)
    except StoreOpenError as exc:
        if key is None and key_file is None:
            text = (
                f"the tokens stay in memory: {reason}, and no token key is set (MCP_BRIDGE_TOKEN_KEY or "
                "--token-key-file). Each start needs a new sign-in"
            )
        else:
            text = (
                f"the tokens stay in memory: {reason}, and the file store did not start ({exc.detail}). "
                "Each start needs a new sign-in"
            )
        return MemoryStore(text), text
    file_key = _file_key(key, key_file, directory)
    if file_key is None:
        text = (
            f"the tokens stay in memory: {reason}, and no token key is set (MCP_BRIDGE_TOKEN_KEY or "
            "--token-key-file). Each start needs a new sign-in"
        )
        return MemoryStore(text), text
    try:
        store = EncryptedFileStore.open(directory, file_key)
    except StoreOpenError as exc:
        text = (
            f"the tokens stay in memory: {reason}, and the file store did not start ({exc.detail}). "
            "Each start needs a new sign-in"
        )
        return MemoryStore(text), text
    return store, f"{reason}: {store.describe()}"


def check_options(
    mode: TokenStoreMode, *, key: bytes | None, key_file: str | None, env: Mapping[str, str]
) -> None:
    """The failures of :func:`open_store` that need neither the keychain nor ``cryptography``.

    ``file`` needs a token directory and a key; the file of ``--token-key-file``
    must be usable (with ``auto`` too, where :func:`open_store` reads it whether
    the keychain answers or not). Nothing is opened, created or imported.

    Raises:
        StoreOpenError: the error that :func:`open_store` would raise for these options.
    """
    if mode is TokenStoreMode.FILE:
        directory = token_directory(env)
        if _file_key(key, key_file, directory) is None:
            raise StoreOpenError(
                "TokenKeyMissing",
                "the file store needs a key: set MCP_BRIDGE_TOKEN_KEY, or give --token-key-file",
            )
    elif mode is TokenStoreMode.AUTO and key_file is not None:
        try:
            directory = token_directory(env)
        except StoreOpenError:
            return  # the keychain decides: the memory store follows, or open_store raises
        read_key_file(key_file, directory)


class DeferredStore(TokenStore):
    """A store that opens at its first use: the keychain, ``keyring`` and ``cryptography`` load then.

    :param opener: opens the store (for example a call of :func:`open_store`).

    The info line of the opened store is logged when it opens, but for the memory
    store: its line ("each start needs a new sign-in") waits for the first need of a
    sign-in (:meth:`sign_in_needed`), so a server that needs none never shows it. A
    store that does not open stays closed: the error is logged once, and every use
    raises the same :class:`~.errors.StoreOpenError`.
    """

    def __init__(self, opener: Callable[[], OpenedStore]) -> None:
        self._opener: Callable[[], OpenedStore] | None = opener
        self._opened: OpenedStore | None = None
        self._error: StoreOpenError | None = None
        self._lock = threading.Lock()
        self._opening: threading.Thread | None = None
        self._start_lock = threading.Lock()
        #: The line of the memory store, until a sign-in needs it (see :meth:`sign_in_needed`).
        self._held_line: str | None = None
        self._sign_in_needed = False
        self._held_lock = threading.Lock()  # not the lock of the open, which an open holds while it runs

    def open_early(self) -> None:
        """Start to open the store on its own thread (``mcpbridge-token-store``); return at once.

        For the time while the first request is prepared: the first use then waits
        for that thread (at most :data:`EARLY_OPEN_WAIT`) instead of opening the store
        itself. Does nothing once the store opened, failed or began to open.
        """
        with self._start_lock:  # not the lock of the open, which an open holds while it runs
            if self._opening is not None or self._opened is not None or self._error is not None:
                return
            thread = threading.Thread(target=self._open_quietly, name="mcpbridge-token-store", daemon=True)
            self._opening = thread
        thread.start()

    def _open_quietly(self) -> None:
        try:
            self.open()
        except StoreOpenError:
            pass  # logged by open(); each use raises it again

    def open(self) -> OpenedStore:
        """The opened store; the first call opens it (or waits for :meth:`open_early`).

        Raises:
            StoreOpenError: the store did not open (now or at an earlier call).
        """
        opening = self._opening
        if opening is not None and opening is not threading.current_thread():
            opening.join(timeout=EARLY_OPEN_WAIT)
            if opening.is_alive():
                raise StoreOpenError(
                    "KeychainUnavailable", f"the token store did not open in {EARLY_OPEN_WAIT:g} s"
                )
        with self._lock:
            if self._opened is not None:
                return self._opened
            if self._error is not None:
                raise self._error
            opener, self._opener = self._opener, None
            assert opener is not None
            try:
                self._opened = opener()
            except StoreOpenError as exc:
                self._error = exc
                log.error("the token store did not open: %s", exc.detail)
                raise
            with self._held_lock:
                hold = self._opened.store.kind == MemoryStore.kind and not self._sign_in_needed
                if hold:
                    self._held_line = self._opened.line
            if not hold:
                log.info("%s", self._opened.line)
            return self._opened

    def sign_in_needed(self) -> None:
        """A sign-in is needed (a challenge came): the line of a memory store is logged now, once."""
        with self._held_lock:
            self._sign_in_needed = True
            line, self._held_line = self._held_line, None
        if line is not None:
            log.info("%s", line)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.open().store.kind

    @property
    def lock_path(self) -> Path | None:  # type: ignore[override]
        return self.open().store.lock_path

    def get(self, key: RecordKey) -> bytes | None:
        return self.open().store.get(key)

    def put(self, key: RecordKey, data: bytes) -> None:
        self.open().store.put(key, data)

    def delete(self, key: RecordKey) -> bool:
        return self.open().store.delete(key)

    def describe(self) -> str:
        return self.open().line


# ---------------------------------------------------------------------------------------------
# Records and the index
# ---------------------------------------------------------------------------------------------


class IndexedStore:
    """The records of the sign-ins in a :class:`TokenStore`, with their index.

    Damaged records are deleted; a damaged index is ignored with a warning. A
    failure of the index never fails the save of a record.

    Each change of the index reads it, changes it and writes it back under the
    lock file of the store (:attr:`TokenStore.lock_path`), so two bridges that
    save at once lose no entry. The wait for the lock is bounded
    (:data:`INDEX_LOCK_TIMEOUT`); the system frees the lock of a killed bridge.
    """

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        self._lock = threading.Lock()

    def open(self) -> None:
        """Open a :class:`DeferredStore` now; other stores are open already.

        Raises:
            StoreOpenError: the store did not open.
        """
        if isinstance(self.store, DeferredStore):
            self.store.open()

    def open_early(self) -> None:
        """Start to open a :class:`DeferredStore` on its own thread (:meth:`DeferredStore.open_early`)."""
        if isinstance(self.store, DeferredStore):
            self.store.open_early()

    def sign_in_needed(self) -> None:
        """A sign-in is needed: see :meth:`DeferredStore.sign_in_needed`."""
        if isinstance(self.store, DeferredStore):
            self.store.sign_in_needed()

    def load(self, key: RecordKey) -> Record | None:
        """The record of ``key``; ``None`` when there is none or it was damaged.

        Raises:
            StoreError: the store failed.
        """
        try:
            data = self.store.get(key)
            if data is None:
                return None
            return stored.record_from_json(data, key)
        except InvalidRecord:
            log.warning("a stored sign-in is not valid, thus the bridge deletes it")
            try:
                self.store.delete(key)
            except StoreError as exc:
                log.warning("cannot delete the stored sign-in that is not valid: %s", exc.detail)
            return None

    def save(self, record: Record, url: str) -> None:
        """Keep ``record`` and add it to the index for ``url``.

        Raises:
            StoreError: the record was not stored.
        """
        self.store.put(record.key, stored.record_to_json(record))
        entry = IndexEntry(url, record.key.issuer, record.key.resource, record.key.client)
        with self._lock:
            try:
                with self._shared():
                    entries = self._entries()
                    if entries and entries[-1] == entry:
                        return
                    self._write(stored.index_with(entries, entry))
            except StoreError as exc:
                log.warning("cannot add the sign-in to the index of the stored sign-ins: %s", exc.detail)

    def delete(self, key: RecordKey) -> bool:
        """Delete the record of ``key`` and its index entries; tell whether the record existed.

        Raises:
            StoreError: the record was not deleted.
        """
        existed = self.store.delete(key)
        with self._lock:
            try:
                with self._shared():
                    entries = self._entries()
                    kept = stored.index_without(entries, key)
                    if len(kept) != len(entries):
                        self._write(kept)
            except StoreError as exc:
                log.warning("cannot update the index of the stored sign-ins: %s", exc.detail)
        return existed

    def entries(self) -> list[IndexEntry]:
        """The index; empty when it is missing or not valid.

        Raises:
            StoreError: the store failed.
        """
        with self._lock:
            return self._entries()

    def delete_index(self) -> None:
        with self._lock, self._shared():
            self.store.delete(stored.index_key())

    @contextlib.contextmanager
    def _shared(self) -> Iterator[None]:
        """Hold the lock file of the store, if it has one.

        Raises:
            StoreError: ``IndexLocked``: the lock stayed taken, or its file cannot be made.
        """
        path = self.store.lock_path
        if path is None:
            yield
            return
        try:
            lock = platform.file_lock(path, INDEX_LOCK_TIMEOUT)
            lock.__enter__()
        except platform.LockTimeout as exc:
            raise StoreError(
                "IndexLocked", f"another bridge held the index for {INDEX_LOCK_TIMEOUT:g} s"
            ) from exc
        except OSError as exc:
            raise StoreError(
                "IndexLocked", f"the lock of the index cannot be made ({exc.strerror or type(exc).__name__})"
            ) from exc
        try:
            yield
        finally:
            lock.__exit__(None, None, None)

    def _entries(self) -> list[IndexEntry]:
        try:
            data = self.store.get(stored.index_key())
            return [] if data is None else stored.index_from_json(data)
        except InvalidRecord:
            log.warning("the index of the stored sign-ins is not valid, thus the bridge ignores it")
            return []

    def _write(self, entries: list[IndexEntry]) -> None:
        if entries:
            self.store.put(stored.index_key(), stored.index_to_json(entries))
        else:
            self.store.delete(stored.index_key())
