"""The contract of a token store, and the stores without a place: memory and none.

A :class:`TokenStore` keeps opaque bytes under a :class:`~.stored.RecordKey`; the
keychain (:mod:`.keychain`) and the encrypted files (:mod:`.filestore`) are the others.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Final

from .errors import StoreError
from .stored import RecordKey

__all__ = ["MAX_RECORD_BYTES", "MemoryStore", "TokenStore", "UnavailableStore"]

#: The largest stored record.
MAX_RECORD_BYTES: Final = 1024 * 1024


class TokenStore(ABC):
    """Bytes under record keys. Thread-safe."""

    #: ``keychain``, ``file`` or ``memory``.
    kind: str = ""
    #: The lock file that serializes the changes of the index between processes
    #: (``None``: the store is not shared with other processes).
    lock_path: Path | None = None

    @abstractmethod
    def get(self, key: RecordKey) -> bytes | None:
        """The bytes of ``key``, or ``None``.

        Raises:
            InvalidRecord: the stored bytes are damaged (the caller deletes them).
            StoreError: the store failed.
        """

    @abstractmethod
    def put(self, key: RecordKey, data: bytes) -> None:
        """Keep ``data`` under ``key``, replacing what was there.

        Raises:
            StoreError: the store failed.
        """

    @abstractmethod
    def delete(self, key: RecordKey) -> bool:
        """Delete ``key``; tell whether it existed.

        Raises:
            StoreError: the store failed.
        """

    @abstractmethod
    def describe(self) -> str:
        """Where the tokens are, for the log line at the start."""


class MemoryStore(TokenStore):
    """Keeps the records until the end of the process."""

    kind = "memory"

    def __init__(self, description: str = "the tokens stay in memory") -> None:
        self._items: dict[RecordKey, bytes] = {}
        self._lock = threading.Lock()
        self._description = description

    def get(self, key: RecordKey) -> bytes | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: RecordKey, data: bytes) -> None:
        with self._lock:
            self._items[key] = bytes(data)

    def delete(self, key: RecordKey) -> bool:
        with self._lock:
            return self._items.pop(key, None) is not None

    def describe(self) -> str:
        return self._description


class UnavailableStore(TokenStore):
    """A store that keeps nothing: every ``get`` is empty, and ``put`` and ``delete`` fail."""

    kind = "unavailable"

    def __init__(self, reason: StoreError) -> None:
        self.reason = reason

    def get(self, key: RecordKey) -> bytes | None:
        return None

    def put(self, key: RecordKey, data: bytes) -> None:
        raise self.reason

    def delete(self, key: RecordKey) -> bool:
        raise self.reason

    def describe(self) -> str:
        return f"the tokens are not stored: {self.reason.detail}"
