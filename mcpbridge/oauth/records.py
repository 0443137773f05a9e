"""The sign-in in use by one authorizer, and its records in the token store.

The record in use comes, at the first need of a token, from the index of the
stored sign-ins (the newest one of the URL and the client); loads, saves and
deletes go to the store, and a failure of the store leaves a log line, never an
error of the request.
"""

from __future__ import annotations

import logging
import threading

from ..log import add_secret
from .errors import SignInFailed, StoreError, StoreOpenError
from .store import IndexedStore
from .stored import Record, RecordKey

__all__ = ["SignInRecords"]

log = logging.getLogger("mcpbridge.oauth")


class SignInRecords:
    """The record in use and the stored records of one upstream URL and client (thread-safe).

    :param store: the stored sign-ins; it opens at the first need of a token.
    :param url: the upstream URL (the index names it).
    :param identity: the ``client`` of the record keys of the account and the client.
    :param client_id: the ``--client-id`` of a pre-registered client: a stored record of
        another client ID is none of this one.
    """

    def __init__(self, store: IndexedStore, *, url: str, identity: str, client_id: str | None) -> None:
        self.store = store
        self._url = url
        self._identity = identity
        self._client_id = client_id
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._record: Record | None = None
        self._loaded = False

    def current(self) -> Record | None:
        """The record in use; on first use, the stored sign-in of the index for this URL.

        Raises:
            SignInFailed: the token store did not open.
        """
        with self._lock:
            if self._record is not None or self._loaded:
                return self._record
        self._open_store()
        return self._first_record()

    def _first_record(self) -> Record | None:
        with self._lock:
            if self._record is not None or self._loaded:
                return self._record
            self._loaded = True
        found = self._from_index()
        with self._lock:
            if self._record is None:
                self._record = found
            return self._record

    def _open_store(self) -> None:
        """Open the token store at the first need of a token (the store logs its line, or its error)."""
        try:
            self.store.open()
        except StoreOpenError as exc:
            raise SignInFailed(f"the token store did not open: {exc.detail}") from exc

    def _from_index(self) -> Record | None:
        try:
            entries = self.store.entries()
        except StoreError as exc:
            log.warning("cannot read the index of the stored sign-ins: %s", exc.detail)
            return None
        for entry in reversed(entries):
            if entry.url != self._url or entry.client != self._identity:
                continue
            record = self.load(entry.key)
            if record is not None and record.access_token:
                log.debug("uses the stored sign-in")
                return record
        return None

    def load(self, key: RecordKey) -> Record | None:
        """The stored record of ``key``, or None (also when the store fails: a log line says so)."""
        try:
            record = self.store.load(key)
        except StoreError as exc:
            log.warning("cannot read the stored sign-in: %s", exc.detail)
            return None
        if record is not None and self._client_id is not None:
            if record.registration.client_id != self._client_id:
                return None
        return record

    def set(self, record: Record | None) -> None:
        """Use ``record`` from now on (``None``: no sign-in)."""
        if record is not None:  # loaded, refreshed or new: the log replaces the tokens
            add_secret(record.access_token)
            add_secret(record.refresh_token)
        with self._lock:
            self._record = record

    def save(self, record: Record) -> None:
        """Use ``record`` and store it; a store that fails keeps it in memory (a log line says so)."""
        self.set(record)
        try:
            self.store.save(record, self._url)
        except StoreError as exc:
            log.warning("cannot store the tokens (%s): they stay in memory for this process", exc.detail)

    def delete(self, key: RecordKey) -> None:
        """Delete the stored record of ``key``; a store that fails leaves a log line."""
        try:
            self.store.delete(key)
        except StoreError as exc:
            log.warning("cannot delete the stored sign-in: %s", exc.detail)
