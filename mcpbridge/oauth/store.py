"""The token stores: the keychain of the host, encrypted files, memory; and their index.

A :class:`TokenStore` keeps opaque bytes under a :class:`~.flow.RecordKey`.
:class:`IndexedStore` keeps the records of the sign-ins (JSON, see
:func:`.flow.record_to_json`) and an index of them in the same store, so
``logout`` finds them without the network.

``--token-store auto`` (:func:`open_store`) takes the keychain of the host; if
the keychain is unavailable or locked, the encrypted files when a key is set
(``MCP_BRIDGE_TOKEN_KEY`` or ``--token-key-file``); else the memory. A
keychain that stops to answer later hands over to the next store once, for the
rest of the process.

The file store (:class:`EncryptedFileStore`):

* the directory ``<state dir>/mcpbridge/vscode/tokens`` has mode 0700 and each
  file mode 0600; a file is written to a temporary name and renamed;
* keys: HKDF-SHA256 of the 32-byte token key gives an encryption key and a
  file name key;
* a file name is the hex of HMAC-SHA256(name key, digest of the record key)
  plus ``.token``, so the names tell nothing of the sign-ins;
* a file is ``MCPT``, version 1, a 12-byte nonce and the AES-256-GCM
  ciphertext with its tag; the additional data binds the ciphertext to the file
  name, so a moved, truncated or changed file does not decrypt.

``keyring`` and ``cryptography`` are imported when a store needs them. The URL
form opens its store at the first request that needs a token
(:class:`DeferredStore`); :func:`check_options` tells at the start what is wrong
with the options without opening anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import stat
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from .. import platform
from . import flow
from .errors import InvalidRecord, StoreError, StoreOpenError
from .flow import IndexEntry, Record, RecordKey

__all__ = [
    "DeferredStore",
    "EncryptedFileStore",
    "FallbackStore",
    "IndexedStore",
    "KeyringStore",
    "MemoryStore",
    "OpenedStore",
    "TokenStore",
    "UnavailableStore",
    "check_options",
    "open_store",
    "read_key_file",
    "token_directory",
]

log = logging.getLogger("mcpbridge.oauth")

#: The largest stored record.
MAX_RECORD_BYTES: Final = 1024 * 1024
#: The time limit of one answer of the keychain (a Secret Service can hang).
KEYCHAIN_TIMEOUT: Final = 25.0
#: The longest wait of a use of a :class:`DeferredStore` for the open that runs on its own
#: thread: each call of the keychain is bounded by :data:`KEYCHAIN_TIMEOUT`, and opening
#: makes at most two of them.
EARLY_OPEN_WAIT: Final = 2 * KEYCHAIN_TIMEOUT + 5.0
#: The longest wait for the lock of the index that another bridge holds.
INDEX_LOCK_TIMEOUT: Final = 10.0

_MAGIC: Final = b"MCPT\x01"
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_HKDF_SALT: Final = b"mcpbridge EncryptedFileStore"
_MAX_KEY_FILE_BYTES: Final = 256

T = TypeVar("T")


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


# ---------------------------------------------------------------------------------------------
# Memory and the null store
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# The keychain
# ---------------------------------------------------------------------------------------------


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
    # The call has returned; the thread only has its last step left.
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

    The service is :data:`~.flow.KEYCHAIN_SERVICE`; the user name of an entry is
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
        service: str = flow.KEYCHAIN_SERVICE,
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
        #: Set by :func:`open_store` from the state directory, when there is one.
        self.lock_path: Path | None = None

    @classmethod
    def open(cls, service: str = flow.KEYCHAIN_SERVICE, timeout: float = KEYCHAIN_TIMEOUT) -> KeyringStore:
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
            store.get(flow.index_key())
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


# ---------------------------------------------------------------------------------------------
# Encrypted files
# ---------------------------------------------------------------------------------------------


def _hkdf(key: bytes, info: bytes, length: int = 32) -> bytes:
    """HKDF-SHA256 (RFC 5869) with the salt of the file store."""
    prk = hmac.new(_HKDF_SALT, key, hashlib.sha256).digest()
    out, block = b"", b""
    counter = 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def token_directory(env: Mapping[str, str], *, platform: str = sys.platform) -> Path:
    """``<state dir>/mcpbridge/vscode/tokens``.

    The state directory is ``%LOCALAPPDATA%`` on Windows, ``~/Library/Application
    Support`` on macOS, else ``$XDG_STATE_HOME`` (when absolute) or ``~/.local/state``.

    Raises:
        StoreOpenError: ``NoTokenDirectory``.
    """
    if platform == "win32":
        base = env.get("LOCALAPPDATA", "")
        if not base:
            raise StoreOpenError("NoTokenDirectory", "no directory for the tokens: LOCALAPPDATA is not set")
        return Path(base, *flow.TOKEN_DIRECTORY_PARTS)
    if platform == "darwin":
        home = env.get("HOME", "")
        if not home or not os.path.isabs(home):
            raise StoreOpenError("NoTokenDirectory", "no directory for the tokens: HOME is not set")
        return Path(home, "Library", "Application Support", *flow.TOKEN_DIRECTORY_PARTS)
    state = env.get("XDG_STATE_HOME", "")
    if state and os.path.isabs(state):
        return Path(state, *flow.TOKEN_DIRECTORY_PARTS)
    home = env.get("HOME", "")
    if not home or not os.path.isabs(home):
        raise StoreOpenError(
            "NoTokenDirectory", "no directory for the tokens: neither XDG_STATE_HOME nor HOME is set"
        )
    return Path(home, ".local", "state", *flow.TOKEN_DIRECTORY_PARTS)


def read_key_file(path: str, directory: Path) -> bytes:
    """The 32-byte key in the file of ``--token-key-file``.

    The file must belong to the user of the bridge, without permissions for
    others, outside the token directory, and hold 64 hexadecimal digits.

    Raises:
        StoreOpenError: ``TokenKeyFileUnreadable``, ``TokenKeyFileNotPrivate``,
            ``TokenKeyInTokenDirectory`` or ``InvalidTokenKey``.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise StoreOpenError(
            "TokenKeyFileUnreadable", f"the file of --token-key-file cannot be read ({exc.strerror})"
        ) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreOpenError(
                "TokenKeyFileUnreadable", "the file of --token-key-file is not a regular file"
            )
        if sys.platform != "win32" and (info.st_uid != os.geteuid() or info.st_mode & 0o077):
            raise StoreOpenError(
                "TokenKeyFileNotPrivate",
                "the file of --token-key-file is not private: it must belong to the user of the bridge, "
                "with no permission for the group and others (chmod 600)",
            )
        data = os.read(fd, _MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise StoreOpenError(
            "TokenKeyFileUnreadable", f"the file of --token-key-file cannot be read ({exc.strerror})"
        ) from exc
    finally:
        os.close(fd)
    real_key = os.path.realpath(path)
    real_dir = os.path.realpath(directory)
    if os.path.commonpath([real_key, real_dir]) == real_dir:
        raise StoreOpenError(
            "TokenKeyInTokenDirectory", "the file of --token-key-file is inside the token directory"
        )
    if len(data) > _MAX_KEY_FILE_BYTES:
        raise StoreOpenError(
            "InvalidTokenKey", "the file of --token-key-file is not valid: use 64 hexadecimal digits"
        )
    text = data.decode("ascii", "replace").strip()
    if len(text) != 64 or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise StoreOpenError(
            "InvalidTokenKey", "the file of --token-key-file is not valid: use 64 hexadecimal digits"
        )
    return bytes.fromhex(text)


class EncryptedFileStore(TokenStore):
    """One encrypted file per record; see the module docstring."""

    kind = "file"

    def __init__(self, directory: Path, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the token key has 32 bytes")
        self.directory = directory
        self.lock_path: Path | None = directory.parent / "index.lock"
        self._encryption_key = _hkdf(key, b"encryption")
        self._name_key = _hkdf(key, b"file name")
        self._lock = threading.Lock()

    @classmethod
    def open(cls, directory: Path, key: bytes) -> EncryptedFileStore:
        """Make the directory private and check that AES-GCM is there.

        Private is mode 0700 on POSIX; on Windows a protected ACL that allows the
        user of the bridge only (no entry inherited from the parent folders).

        Raises:
            StoreOpenError: ``FileStoreFailed``.
        """
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: F401
        except ImportError as exc:
            raise StoreOpenError("FileStoreFailed", "the file store needs the package cryptography") from exc
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
            try:
                directory.mkdir(mode=0o700)
            except FileExistsError:
                pass
            info = os.lstat(directory)
            if not stat.S_ISDIR(info.st_mode):
                raise StoreOpenError("FileStoreFailed", f"{directory} is not a directory")
            if sys.platform == "win32":
                platform.protect_directory(directory)
            elif stat.S_IMODE(info.st_mode) != 0o700:
                os.chmod(directory, 0o700)
        except OSError as exc:
            raise StoreOpenError(
                "FileStoreFailed",
                f"the token directory cannot be made ({exc.strerror or type(exc).__name__})",
            ) from exc
        return cls(directory, key)

    def _name_mac(self, key: RecordKey) -> bytes:
        return hmac.new(self._name_key, key.digest(), hashlib.sha256).digest()

    def path_of(self, key: RecordKey) -> Path:
        """The file of ``key``."""
        return self.directory / (self._name_mac(key).hex() + ".token")

    def get(self, key: RecordKey) -> bytes | None:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        path = self.path_of(key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError("FileStoreFailed", f"a token file cannot be read ({exc.strerror})") from exc
        try:
            data = b""
            while len(data) <= MAX_RECORD_BYTES + 64:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
        except OSError as exc:
            raise StoreError("FileStoreFailed", f"a token file cannot be read ({exc.strerror})") from exc
        finally:
            os.close(fd)
        minimum = len(_MAGIC) + _NONCE_BYTES + _TAG_BYTES
        if len(data) < minimum or len(data) > MAX_RECORD_BYTES + 64 or not data.startswith(_MAGIC):
            raise InvalidRecord("a token file is not valid")
        nonce = data[len(_MAGIC) : len(_MAGIC) + _NONCE_BYTES]
        sealed = data[len(_MAGIC) + _NONCE_BYTES :]
        try:
            return AESGCM(self._encryption_key).decrypt(nonce, sealed, _MAGIC + self._name_mac(key))
        except InvalidTag as exc:
            raise InvalidRecord("a token file does not decrypt") from exc

    def put(self, key: RecordKey, data: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if len(data) > MAX_RECORD_BYTES:
            raise StoreError("FileStoreFailed", "a record is longer than 1 MiB")
        mac = self._name_mac(key)
        nonce = secrets.token_bytes(_NONCE_BYTES)
        blob = _MAGIC + nonce + AESGCM(self._encryption_key).encrypt(nonce, data, _MAGIC + mac)
        final = self.directory / (mac.hex() + ".token")
        temporary = self.directory / f"{mac.hex()}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(
                temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600
            )
            try:
                view = memoryview(blob)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, final)
        except OSError as exc:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise StoreError("FileStoreFailed", f"a token file cannot be written ({exc.strerror})") from exc

    def delete(self, key: RecordKey) -> bool:
        try:
            os.unlink(self.path_of(key))
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StoreError("FileStoreFailed", f"a token file cannot be deleted ({exc.strerror})") from exc
        return True

    def describe(self) -> str:
        return f"the tokens are in encrypted files in {self.directory}"


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
    mode: str,
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
    if mode == "memory":
        return OpenedStore(MemoryStore(_MEMORY_EXPLICIT), _MEMORY_EXPLICIT)
    if mode == "keychain":
        store = keychain()
        _share_index_lock(store, env)
        return OpenedStore(store, store.describe())
    if mode == "file":
        directory = token_directory(env)
        file_key = _file_key(key, key_file, directory)
        if file_key is None:
            raise StoreOpenError(
                "TokenKeyMissing",
                "the file store needs a key: set MCP_BRIDGE_TOKEN_KEY, or give --token-key-file",
            )
        store = EncryptedFileStore.open(directory, file_key)
        return OpenedStore(store, store.describe())
    if mode != "auto":
        raise ValueError(f"unknown token store {mode!r}")

    def after_keychain(why: StoreError) -> tuple[TokenStore, str]:
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

    try:
        primary = keychain()
    except StoreOpenError as exc:
        if exc.name not in ("KeychainUnavailable", "KeychainLocked"):
            raise
        store, line = after_keychain(exc)
        return OpenedStore(store, line)
    if key_file is not None:
        # A key file that cannot be used is an error also while the keychain works.
        read_key_file(key_file, token_directory(env))
    _share_index_lock(primary, env)

    def make_next() -> TokenStore:
        return after_keychain(StoreError("KeychainUnavailable", "it stopped to answer"))[0]

    return OpenedStore(FallbackStore(primary, make_next), primary.describe())


def check_options(mode: str, *, key: bytes | None, key_file: str | None, env: Mapping[str, str]) -> None:
    """The failures of :func:`open_store` that need neither the keychain nor ``cryptography``.

    ``file`` needs a token directory and a key; the file of ``--token-key-file``
    must be usable (with ``auto`` too, where :func:`open_store` reads it whether
    the keychain answers or not). Nothing is opened, created or imported.

    Raises:
        StoreOpenError: the error that :func:`open_store` would raise for these options.
    """
    if mode == "file":
        directory = token_directory(env)
        if _file_key(key, key_file, directory) is None:
            raise StoreOpenError(
                "TokenKeyMissing",
                "the file store needs a key: set MCP_BRIDGE_TOKEN_KEY, or give --token-key-file",
            )
    elif mode == "auto" and key_file is not None:
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
            return flow.record_from_json(data, key)
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
        self.store.put(record.key, flow.record_to_json(record))
        entry = IndexEntry(url, record.key.issuer, record.key.resource, record.key.client)
        with self._lock:
            try:
                with self._shared():
                    entries = self._entries()
                    if entries and entries[-1] == entry:
                        return
                    self._write(flow.index_with(entries, entry))
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
                    kept = flow.index_without(entries, key)
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
            self.store.delete(flow.index_key())

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
            data = self.store.get(flow.index_key())
            return [] if data is None else flow.index_from_json(data)
        except InvalidRecord:
            log.warning("the index of the stored sign-ins is not valid, thus the bridge ignores it")
            return []

    def _write(self, entries: list[IndexEntry]) -> None:
        if entries:
            self.store.put(flow.index_key(), flow.index_to_json(entries))
        else:
            self.store.delete(flow.index_key())
