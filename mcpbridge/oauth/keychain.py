"""The token store in the keychain of the host (``keyring``), each answer bounded in time.

``keyring`` is imported when the store opens. A record too long for one entry of the
Windows Credential Manager is kept in parts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

from . import identity, stored
from .errors import InvalidRecord, StoreError, StoreOpenError
from .stored import RecordKey
from .tokenstore import MAX_RECORD_BYTES, TokenStore

__all__ = [
    "CREDENTIAL_BLOB_BYTES",
    "KEYCHAIN_TIMEOUT",
    "WINDOWS_PART_CHARS",
    "KeyringStore",
    "keychain_part_chars",
    "keychain_ruled_out",
]

log = logging.getLogger("mcpbridge.oauth")

#: The time limit of one answer of the keychain (a Secret Service can hang).
KEYCHAIN_TIMEOUT: Final = 25.0

T = TypeVar("T")


def _bounded(call: Callable[[], T], timeout: float) -> T:
    """Run ``call`` on a helper thread and wait at most ``timeout`` for it."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(target=run, name="mcpbridge-keychain", daemon=True)
    worker.start()
    if not done.wait(timeout):
        raise StoreError("KeychainUnavailable", f"the keychain did not answer in {int(timeout)} s")
    # The call has returned and its outcome is in: the thread only has its last step left, and a
    # join that runs out changes nothing (the thread is a daemon).
    worker.join(timeout=1.0)
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def keychain_ruled_out(env: Mapping[str, str], system: str = sys.platform) -> str | None:
    """Why the host has no keychain that ``keyring`` could reach, told without importing it; or None.

    On Linux and the BSDs every keychain ``keyring`` knows (the Secret Service, KWallet)
    answers on the D-Bus session bus: with no bus address in ``DBUS_SESSION_BUS_ADDRESS``
    and no socket at ``$XDG_RUNTIME_DIR/bus`` (a remote session, a container, CI) there is
    none, and importing ``keyring`` and searching its backends would only cost the start
    its time. A backend chosen by the user (``PYTHON_KEYRING_BACKEND``, or keyring's
    ``keyringrc.cfg``) is always tried. macOS and Windows always have a keychain.
    """
    if system in ("darwin", "win32") or env.get("PYTHON_KEYRING_BACKEND"):
        return None
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME", ""), ".config")
    if os.path.isabs(config_home) and os.path.exists(
        os.path.join(config_home, "python_keyring", "keyringrc.cfg")
    ):
        return None
    if env.get("DBUS_SESSION_BUS_ADDRESS"):
        return None
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and _is_socket(os.path.join(runtime, "bus")):
        return None
    return "the keychain is not available (no D-Bus session bus)"


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _keychain_error(exc: BaseException) -> StoreError:
    if isinstance(exc, StoreError):
        return exc
    from keyring import errors as keyring_errors

    name = type(exc).__name__
    if isinstance(exc, keyring_errors.KeyringLocked):
        return StoreError("KeychainLocked", "the keychain is locked")
    if isinstance(exc, (keyring_errors.NoKeyringError, keyring_errors.InitError)):
        return StoreError("KeychainUnavailable", f"the keychain is not available ({name})")
    if isinstance(exc, keyring_errors.KeyringError):
        return StoreError("KeychainFailed", f"the keychain failed ({name})")
    return StoreError("KeychainUnavailable", f"the keychain is not available ({name})")


#: The Windows Credential Manager keeps at most 2,560 bytes in the blob of a credential, and
#: keyring's WinVaultKeyring stores a password as UTF-16: 2 bytes for each character.
CREDENTIAL_BLOB_BYTES: Final = 2560
#: The longest password of one Credential Manager entry, in characters (records are ASCII).
WINDOWS_PART_CHARS: Final = CREDENTIAL_BLOB_BYTES // 2
#: The start of an entry that tells where the parts of a split record are.
_PARTS_PREFIX: Final = "mcpbridge-parts:1:"


def keychain_part_chars(backend: Any, system: str = sys.platform) -> int | None:
    """The longest password that the keychain ``backend`` keeps in one entry; ``None``: no limit.

    The Windows Credential Manager (keyring's ``WinVaultKeyring``, also inside a
    chain of backends) has :data:`WINDOWS_PART_CHARS`; so has every backend on Windows.
    """
    if system == "win32":
        return WINDOWS_PART_CHARS
    for candidate in [backend, *getattr(backend, "backends", ())]:
        if type(candidate).__name__ == "WinVaultKeyring":
            return WINDOWS_PART_CHARS
    return None


class KeyringStore(TokenStore):
    """The keychain of the host through ``keyring``: one entry per record.

    The service is :data:`~.identity.KEYCHAIN_SERVICE`; the user name of an entry is
    the hex digest of its record key, and its password the record.

    A keychain with a limit per entry (``part_chars``: the Windows Credential
    Manager) gets a record that does not fit in parts: the entries ``<digest>/1``,
    ``<digest>/2``... hold its pieces, written first, and the entry of the record
    holds ``mcpbridge-parts:1:<count>:<SHA-256 of the record>``, written last. A
    part that is missing or does not match makes the record damaged.
    """

    kind = "keychain"

    def __init__(
        self,
        backend: Any,
        service: str = identity.KEYCHAIN_SERVICE,
        timeout: float = KEYCHAIN_TIMEOUT,
        *,
        part_chars: int | None = None,
    ) -> None:
        if part_chars is not None and part_chars <= len(_PARTS_PREFIX) + 80:
            raise ValueError("part_chars is too small for the entry of a split record")
        self._backend = backend
        self._service = service
        self._timeout = timeout
        self._part_chars = part_chars
        #: Set by :func:`~.store.open_store` from the state directory, when there is one.
        self.lock_path: Path | None = None

    @classmethod
    def open(
        cls, service: str = identity.KEYCHAIN_SERVICE, timeout: float = KEYCHAIN_TIMEOUT
    ) -> KeyringStore:
        """The keychain of the host, after one read that proves it answers.

        Raises:
            StoreOpenError: ``KeychainUnavailable``, ``KeychainLocked`` or ``KeychainFailed``.
        """
        # A program that loaded keyring already (and may have set its backend) lets it decide.
        absent = None if "keyring" in sys.modules else keychain_ruled_out(os.environ)
        if absent is not None:
            raise StoreOpenError("KeychainUnavailable", absent)
        try:
            import keyring
            from keyring.backends import fail
        except ImportError as exc:
            raise StoreOpenError("KeychainUnavailable", "the keychain is not available (no keyring)") from exc
        try:
            backend = _bounded(keyring.get_keyring, timeout)
        except BaseException as exc:  # noqa: BLE001 - a backend can raise anything at its start
            error = _keychain_error(exc)
            raise StoreOpenError(error.name, error.detail) from exc
        if isinstance(backend, fail.Keyring) or _priority(backend) <= 0:
            raise StoreOpenError("KeychainUnavailable", "the keychain is not available (no backend)")
        store = cls(backend, service, timeout, part_chars=keychain_part_chars(backend))
        try:
            store.get(stored.index_key())
        except StoreError as exc:
            raise StoreOpenError(exc.name, exc.detail) from exc
        return store

    def _call(self, call: Callable[[], T]) -> T:
        try:
            return _bounded(call, self._timeout)
        except BaseException as exc:  # noqa: BLE001 - mapped to the failures of the store
            raise _keychain_error(exc) from exc

    def _get_text(self, user: str) -> str | None:
        text = self._call(lambda: self._backend.get_password(self._service, user))
        if text is not None and not isinstance(text, str):
            raise InvalidRecord("not a text")
        return text

    def _set_text(self, user: str, text: str) -> None:
        self._call(lambda: self._backend.set_password(self._service, user, text))

    def _delete_entry(self, user: str) -> bool:
        from keyring.errors import PasswordDeleteError

        def remove() -> bool:
            try:
                self._backend.delete_password(self._service, user)
            except PasswordDeleteError:
                return False
            return True

        return self._call(remove)

    @staticmethod
    def _parts_of(text: str | None) -> tuple[int, str] | None:
        """The count and the digest of a split record's entry; ``None`` for a whole record.

        Raises:
            InvalidRecord: the entry starts as one of a split record but is not valid.
        """
        if text is None or not text.startswith(_PARTS_PREFIX):
            return None
        count, _, digest = text[len(_PARTS_PREFIX) :].partition(":")
        if not count.isdigit() or not 1 <= int(count) <= MAX_RECORD_BYTES or len(digest) != 64:
            raise InvalidRecord("the entry of a split record is not valid")
        return int(count), digest

    def get(self, key: RecordKey) -> bytes | None:
        user = key.digest().hex()
        text = self._get_text(user)
        if text is None:
            return None
        parts = self._parts_of(text)
        if parts is None:
            return text.encode("utf-8")
        count, digest = parts
        pieces: list[str] = []
        for n in range(1, count + 1):
            piece = self._get_text(f"{user}/{n}")
            if piece is None:
                raise InvalidRecord("a part of a split record is missing")
            pieces.append(piece)
        data = "".join(pieces).encode("utf-8")
        if hashlib.sha256(data).hexdigest() != digest:
            raise InvalidRecord("the parts of a split record do not match")
        return data

    def put(self, key: RecordKey, data: bytes) -> None:
        user = key.digest().hex()
        text = data.decode("ascii")
        limit = self._part_chars
        if limit is None:
            self._set_text(user, text)
            return
        try:
            old = self._parts_of(self._get_text(user))
        except InvalidRecord:
            old = None
        count = 0
        if len(text) <= limit:
            self._set_text(user, text)
        else:
            pieces = [text[i : i + limit] for i in range(0, len(text), limit)]
            for n, piece in enumerate(pieces, start=1):
                self._set_text(f"{user}/{n}", piece)
            count = len(pieces)
            self._set_text(user, f"{_PARTS_PREFIX}{count}:{hashlib.sha256(data).hexdigest()}")
        if old is not None:
            for n in range(count + 1, old[0] + 1):
                self._delete_entry(f"{user}/{n}")

    def delete(self, key: RecordKey) -> bool:
        user = key.digest().hex()
        parts = None
        if self._part_chars is not None:
            try:
                parts = self._parts_of(self._get_text(user))
            except InvalidRecord:
                parts = None
        existed = self._delete_entry(user)
        if parts is not None:
            for n in range(1, parts[0] + 1):
                self._delete_entry(f"{user}/{n}")
        return existed

    def describe(self) -> str:
        return f'the tokens are in the keychain of the host (service "{self._service}")'


def _priority(backend: Any) -> float:
    try:
        return float(backend.priority)
    except Exception:  # noqa: BLE001 - a backend without a usable priority
        return 1.0
