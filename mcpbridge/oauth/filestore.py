"""The token store in encrypted files, for a host without a usable keychain.

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

``cryptography`` is imported when the store opens.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .. import platform
from .errors import InvalidRecord, StoreError, StoreOpenError
from .identity import TOKEN_DIRECTORY_PARTS
from .stored import RecordKey
from .tokenstore import MAX_RECORD_BYTES, TokenStore

__all__ = ["EncryptedFileStore", "read_key_file", "token_directory"]

log = logging.getLogger("mcpbridge.oauth")

_MAGIC: Final = b"MCPT\x01"
_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_HKDF_SALT: Final = b"mcpbridge EncryptedFileStore"
_MAX_KEY_FILE_BYTES: Final = 256


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
        return Path(base, *TOKEN_DIRECTORY_PARTS)
    if platform == "darwin":
        home = env.get("HOME", "")
        if not home or not os.path.isabs(home):
            raise StoreOpenError("NoTokenDirectory", "no directory for the tokens: HOME is not set")
        return Path(home, "Library", "Application Support", *TOKEN_DIRECTORY_PARTS)
    state = env.get("XDG_STATE_HOME", "")
    if state and os.path.isabs(state):
        return Path(state, *TOKEN_DIRECTORY_PARTS)
    home = env.get("HOME", "")
    if not home or not os.path.isabs(home):
        raise StoreOpenError(
            "NoTokenDirectory", "no directory for the tokens: neither XDG_STATE_HOME nor HOME is set"
        )
    return Path(home, ".local", "state", *TOKEN_DIRECTORY_PARTS)


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
