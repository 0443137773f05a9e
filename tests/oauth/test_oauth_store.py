"""The token stores: one contract for all, and the rules of the keychain, the files and ``auto``."""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

from mcpbridge.oauth import identity, stored
from mcpbridge.oauth import store as store_module
from mcpbridge.oauth.config import TokenStoreMode
from mcpbridge.oauth.errors import InvalidRecord, StoreError, StoreOpenError
from mcpbridge.oauth.filestore import EncryptedFileStore, read_key_file, token_directory
from mcpbridge.oauth.keychain import (
    CREDENTIAL_BLOB_BYTES,
    WINDOWS_PART_CHARS,
    KeyringStore,
    keychain_part_chars,
    keychain_ruled_out,
)
from mcpbridge.oauth.store import (
    DeferredStore,
    FallbackStore,
    IndexedStore,
    OpenedStore,
    check_options,
    open_store,
)
from mcpbridge.oauth.testing import URL, TokenStoreContract, sample_record
from mcpbridge.oauth.tokenstore import MemoryStore, TokenStore, UnavailableStore
from tests.conftest import WAIT, read_line
from tests.oauth_keyring import FileKeyring

KEY = bytes(range(32))
WAIT_FOR_KEYCHAIN = 10.0
OTHER_KEY = bytes(range(1, 33))


@pytest.fixture
def state_env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


@pytest.fixture
def file_store(tmp_path: Path, state_env: dict[str, str]) -> EncryptedFileStore:
    return EncryptedFileStore.open(token_directory(state_env), KEY)


class TestMemoryStore(TokenStoreContract):
    @pytest.fixture
    def store(self) -> TokenStore:
        return MemoryStore()


class TestEncryptedFileStore(TokenStoreContract):
    @pytest.fixture
    def store(self, file_store: EncryptedFileStore) -> TokenStore:
        return file_store


class TestKeyringStore(TokenStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> TokenStore:
        return KeyringStore(FileKeyring(tmp_path / "keyring.json"))


class CredentialManagerKeyring(KeyringBackend):
    """A keyring backend with the limit of the Windows Credential Manager.

    keyring's WinVaultKeyring hands the password to ``CredWrite`` as UTF-16, and a
    credential blob over 2,560 bytes fails there (pywin32 raises its ``error``, an
    exception outside keyring's, like the ``OSError`` here).
    """

    priority = 1

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        if len(password.encode("utf-16-le")) > CREDENTIAL_BLOB_BYTES:
            raise OSError(1783, "CredWrite: the stub received bad data")
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.entries.pop((service, username), None) is None:
            raise PasswordDeleteError("not found")


class TestKeyringStoreWithTheCredentialManagerLimit(TokenStoreContract):
    @pytest.fixture
    def store(self) -> TokenStore:
        return KeyringStore(CredentialManagerKeyring(), part_chars=WINDOWS_PART_CHARS)


class TestAutoStoreAfterTheKeychainStopped(TokenStoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path, file_store: EncryptedFileStore) -> TokenStore:
        return FallbackStore(
            KeyringStore(FileKeyring(tmp_path / "k.json", mode="locked")), lambda: file_store
        )


# ----------------------------------------------------------------------------- the keychain


def large_record(n: int = 0, size: int = 6000) -> stored.Record:
    """A record over the Credential Manager's limit: the JWT tokens of some servers are this long."""
    return dataclasses.replace(
        sample_record(n), access_token="a" * size, refresh_token="r" * max(1, size // 2)
    )


def test_a_record_over_the_credential_manager_limit_is_refused_whole():
    backend = CredentialManagerKeyring()
    record = large_record()
    with pytest.raises(StoreError):
        KeyringStore(backend).put(record.key, stored.record_to_json(record))
    assert backend.entries == {}


@pytest.mark.parametrize("size", [1, WINDOWS_PART_CHARS, WINDOWS_PART_CHARS * 3, 60_000])
def test_a_record_of_any_size_survives_a_restart_under_the_credential_manager_limit(size):
    backend = CredentialManagerKeyring()
    record = large_record(size=size)
    KeyringStore(backend, part_chars=WINDOWS_PART_CHARS).put(record.key, stored.record_to_json(record))
    assert all(len(p.encode("utf-16-le")) <= CREDENTIAL_BLOB_BYTES for p in backend.entries.values())
    # The next start of the bridge: a new store over the same credentials.
    restarted = IndexedStore(KeyringStore(backend, part_chars=WINDOWS_PART_CHARS))
    assert restarted.load(record.key) == record


def test_a_split_record_replaced_by_a_small_one_or_deleted_leaves_no_part():
    backend = CredentialManagerKeyring()
    store = KeyringStore(backend, part_chars=WINDOWS_PART_CHARS)
    record = large_record()
    store.put(record.key, stored.record_to_json(record))
    assert len(backend.entries) > 2
    small = sample_record()
    store.put(small.key, stored.record_to_json(small))
    assert list(backend.entries) == [(identity.KEYCHAIN_SERVICE, small.key.digest().hex())]
    store.put(record.key, stored.record_to_json(record))
    assert store.delete(record.key) is True
    assert backend.entries == {}


@pytest.mark.parametrize("damage", ["missing", "changed"])
def test_a_split_record_with_a_bad_part_is_damaged_and_deleted(damage, caplog):
    backend = CredentialManagerKeyring()
    store = KeyringStore(backend, part_chars=WINDOWS_PART_CHARS)
    record = large_record()
    store.put(record.key, stored.record_to_json(record))
    part = (identity.KEYCHAIN_SERVICE, record.key.digest().hex() + "/2")
    if damage == "missing":
        del backend.entries[part]
    else:
        backend.entries[part] = "x" + backend.entries[part][1:]
    with pytest.raises(InvalidRecord):
        store.get(record.key)
    caplog.set_level(logging.WARNING, logger="mcpbridge.oauth")
    assert IndexedStore(store).load(record.key) is None
    assert "a stored sign-in is not valid" in caplog.text
    assert backend.entries == {}


class WinVaultKeyring(CredentialManagerKeyring):
    """Named as keyring's backend of the Windows Credential Manager."""


class ChainerBackend(CredentialManagerKeyring):
    def __init__(self, backends: list[KeyringBackend]) -> None:
        super().__init__()
        self.backends = backends


def test_the_credential_manager_limit_applies_on_windows_and_to_its_backend():
    assert keychain_part_chars(CredentialManagerKeyring(), "win32") == WINDOWS_PART_CHARS == 1280
    assert keychain_part_chars(WinVaultKeyring(), "linux") == WINDOWS_PART_CHARS
    assert keychain_part_chars(ChainerBackend([FileKeyring(os.devnull), WinVaultKeyring()]), "linux") == 1280
    assert keychain_part_chars(FileKeyring(os.devnull), "darwin") is None
    assert keychain_part_chars(FileKeyring(os.devnull), "linux") is None


def test_the_keychain_keeps_each_record_under_the_service_and_the_hex_digest_of_its_key(tmp_path):
    backend = FileKeyring(tmp_path / "keyring.json")
    store = KeyringStore(backend)
    record = sample_record()
    IndexedStore(store).save(record, URL)
    entries = backend.entries()
    assert f"{identity.KEYCHAIN_SERVICE}\n{record.key.digest().hex()}" in entries
    assert f"{identity.KEYCHAIN_SERVICE}\n{stored.index_key().digest().hex()}" in entries
    assert (
        store.describe()
        == 'the tokens are in the keychain of the host (service "mcpbridge/mcp-bridge-vscode")'
    )


def test_opening_the_keychain_reads_through_the_keyring_of_the_host(tmp_path):
    backend = FileKeyring(tmp_path / "keyring.json")
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        store = KeyringStore.open()
        store.put(sample_record().key, b"x")
        assert ("get", stored.index_key().digest().hex()) in backend.calls
    finally:
        keyring.set_keyring(previous)


@pytest.mark.parametrize(
    ("mode", "name"), [("locked", "KeychainLocked"), ("unavailable", "KeychainUnavailable")]
)
def test_a_keychain_that_is_locked_or_does_not_answer_does_not_open(tmp_path, mode, name):
    previous = keyring.get_keyring()
    keyring.set_keyring(FileKeyring(tmp_path / "k.json", mode=mode))
    try:
        with pytest.raises(StoreOpenError) as caught:
            KeyringStore.open()
    finally:
        keyring.set_keyring(previous)
    assert caught.value.name == name


def test_the_fail_backend_of_keyring_is_no_keychain():
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        with pytest.raises(StoreOpenError, match="not available") as caught:
            KeyringStore.open()
    finally:
        keyring.set_keyring(previous)
    assert caught.value.name == "KeychainUnavailable"


def test_a_keychain_that_hangs_is_unavailable_after_its_time_limit(tmp_path):
    import threading

    release = threading.Event()

    class Hanging(FileKeyring):
        def get_password(self, service: str, username: str) -> str | None:
            release.wait(10.0)
            return None

    store = KeyringStore(Hanging(tmp_path / "k.json"), timeout=0.2)
    try:
        with pytest.raises(StoreError) as caught:
            store.get(sample_record().key)
    finally:
        release.set()
    assert caught.value.name == "KeychainUnavailable"


# ------------------------------------------------------------------------------- the files


def test_the_token_directory_is_private_and_each_file_too_with_a_name_that_tells_nothing(file_store):
    record = sample_record()
    IndexedStore(file_store).save(record, URL)
    directory = file_store.directory
    assert directory.parts[-3:] == ("mcpbridge", "vscode", "tokens")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    names = sorted(p.name for p in directory.iterdir())
    assert len(names) == 2
    for name in names:
        path = directory / name
        assert len(name) == 64 + len(".token") and name.endswith(".token")
        int(name[:64], 16)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        data = path.read_bytes()
        assert data.startswith(b"MCPT\x01")
        for secret in (b"access-0-token", b"refresh-0-token", b"mcp.example.com", b"client-0"):
            assert secret not in data


def test_a_directory_with_wide_permissions_is_made_private_again(tmp_path, state_env):
    directory = token_directory(state_env)
    directory.mkdir(parents=True)
    directory.chmod(0o755)
    EncryptedFileStore.open(directory, KEY)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_tampered_token_file_is_refused(file_store):
    key = sample_record().key
    file_store.put(key, b"secret record")
    path = file_store.path_of(key)
    data = bytearray(path.read_bytes())
    data[-20] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidRecord):
        file_store.get(key)


def test_a_token_file_moved_to_the_name_of_another_record_is_refused(file_store):
    one, two = sample_record(1).key, sample_record(2).key
    file_store.put(one, b"one")
    file_store.put(two, b"two")
    os.replace(file_store.path_of(one), file_store.path_of(two))
    with pytest.raises(InvalidRecord):
        file_store.get(two)
    assert file_store.get(one) is None


@pytest.mark.parametrize("keep", [0, 4, 17, 33, -1])
def test_a_truncated_token_file_is_refused(file_store, keep):
    key = sample_record().key
    file_store.put(key, b"a record of some length")
    path = file_store.path_of(key)
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    with pytest.raises(InvalidRecord):
        file_store.get(key)


def test_a_token_file_of_another_key_does_not_decrypt(file_store):
    key = sample_record().key
    file_store.put(key, b"record")
    other = EncryptedFileStore(file_store.directory, OTHER_KEY)
    assert other.get(key) is None  # another key gives other file names
    os.replace(file_store.path_of(key), other.path_of(key))
    with pytest.raises(InvalidRecord):
        other.get(key)


def test_a_damaged_record_is_deleted_with_a_warning_and_the_sign_in_is_gone(file_store, caplog):
    record = sample_record()
    indexed = IndexedStore(file_store)
    indexed.save(record, URL)
    file_store.path_of(record.key).write_bytes(b"MCPT\x01" + b"\x00" * 40)
    with caplog.at_level(logging.WARNING, logger="mcpbridge"):
        assert indexed.load(record.key) is None
    assert not file_store.path_of(record.key).exists()
    assert "not valid" in caplog.text


def test_a_damaged_index_is_ignored_with_a_warning(file_store, caplog):
    file_store.put(stored.index_key(), b"not json")
    with caplog.at_level(logging.WARNING, logger="mcpbridge"):
        assert IndexedStore(file_store).entries() == []
    assert "the index of the stored sign-ins is not valid, thus the bridge ignores it" in caplog.text


def test_writes_leave_no_temporary_file(file_store):
    for n in range(5):
        file_store.put(sample_record(n).key, b"x" * n)
    assert not [p for p in file_store.directory.iterdir() if p.suffix == ".tmp"]


def test_a_failed_index_write_does_not_fail_the_record(file_store, caplog):
    class NoIndex(MemoryStore):
        def put(self, key: stored.RecordKey, data: bytes) -> None:
            if key == stored.index_key():
                raise StoreError("FileStoreFailed", "disk full")
            super().put(key, data)

    store = NoIndex()
    record = sample_record()
    with caplog.at_level(logging.WARNING, logger="mcpbridge"):
        IndexedStore(store).save(record, URL)
    assert IndexedStore(store).load(record.key) == record
    assert "cannot add the sign-in to the index of the stored sign-ins: disk full" in caplog.text


# -------------------------------------------------------------------------------- the key


def write_key(path: Path, text: str = KEY.hex(), mode: int = 0o600) -> Path:
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


def test_a_private_key_file_gives_the_key(tmp_path, state_env):
    assert read_key_file(str(write_key(tmp_path / "key")), token_directory(state_env)) == KEY


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o777])
def test_a_key_file_that_others_can_read_is_refused(tmp_path, state_env, mode):
    with pytest.raises(StoreOpenError) as caught:
        read_key_file(str(write_key(tmp_path / "key", mode=mode)), token_directory(state_env))
    assert caught.value.name == "TokenKeyFileNotPrivate"


def test_a_key_file_inside_the_token_directory_is_refused(tmp_path, state_env):
    directory = token_directory(state_env)
    directory.mkdir(parents=True)
    with pytest.raises(StoreOpenError) as caught:
        read_key_file(str(write_key(directory / "key")), directory)
    assert caught.value.name == "TokenKeyInTokenDirectory"


@pytest.mark.parametrize("text", ["", "abc", KEY.hex()[:-1] + "g", KEY.hex() + "00", "x" * 300])
def test_a_key_file_without_64_hexadecimal_digits_is_refused(tmp_path, state_env, text):
    with pytest.raises(StoreOpenError) as caught:
        read_key_file(str(write_key(tmp_path / "key", text)), token_directory(state_env))
    assert caught.value.name == "InvalidTokenKey"
    assert text[:10] not in str(caught.value) or not text


def test_a_missing_key_file_is_unreadable(tmp_path, state_env):
    with pytest.raises(StoreOpenError) as caught:
        read_key_file(str(tmp_path / "missing"), token_directory(state_env))
    assert caught.value.name == "TokenKeyFileUnreadable"


def test_the_token_directory_follows_xdg_state_home_then_home_then_localappdata():
    assert token_directory({"XDG_STATE_HOME": "/s", "HOME": "/h"}) == Path("/s/mcpbridge/vscode/tokens")
    assert token_directory({"XDG_STATE_HOME": "rel", "HOME": "/h"}) == Path(
        "/h/.local/state/mcpbridge/vscode/tokens"
    )
    assert token_directory({"LOCALAPPDATA": "C:/Users/u/AppData/Local"}, platform="win32").parts[-3:] == (
        "mcpbridge",
        "vscode",
        "tokens",
    )
    with pytest.raises(StoreOpenError) as caught:
        token_directory({})
    assert caught.value.name == "NoTokenDirectory"


def test_the_token_directory_of_each_system():
    env = {"XDG_STATE_HOME": "/s", "HOME": "/Users/u", "LOCALAPPDATA": "C:\\Users\\u\\AppData\\Local"}
    assert token_directory(env, platform="linux") == Path("/s/mcpbridge/vscode/tokens")
    assert token_directory(env, platform="darwin") == Path(
        "/Users/u/Library/Application Support/mcpbridge/vscode/tokens"
    )
    assert token_directory(env, platform="win32") == Path(
        "C:\\Users\\u\\AppData\\Local", "mcpbridge", "vscode", "tokens"
    )
    for system, missing in (("darwin", {"XDG_STATE_HOME": "/s"}), ("win32", {"HOME": "/h"})):
        with pytest.raises(StoreOpenError) as caught:
            token_directory(missing, platform=system)
        assert caught.value.name == "NoTokenDirectory"


# ------------------------------------------------------------------------- opening stores


def unavailable() -> TokenStore:
    raise StoreOpenError("KeychainUnavailable", "the keychain is not available (no backend)")


def test_memory_is_memory_and_says_so():
    opened = open_store(TokenStoreMode.MEMORY, key=None, key_file=None, env={})
    assert isinstance(opened.store, MemoryStore)
    assert opened.line == "the tokens stay in memory (--token-store memory): each start needs a new sign-in"


def test_auto_takes_the_keychain_when_it_answers(tmp_path, state_env):
    keychain = KeyringStore(FileKeyring(tmp_path / "k.json"))
    opened = open_store(TokenStoreMode.AUTO, key=KEY, key_file=None, env=state_env, keychain=lambda: keychain)
    assert opened.line.startswith("the tokens are in the keychain of the host")
    assert opened.store.kind == "keychain"


def test_auto_without_keychain_takes_the_files_when_a_key_is_set(state_env):
    opened = open_store(TokenStoreMode.AUTO, key=KEY, key_file=None, env=state_env, keychain=unavailable)
    assert isinstance(opened.store, EncryptedFileStore)
    assert opened.line == (
        f"the keychain is not available (no backend): the tokens are in encrypted files in "
        f"{token_directory(state_env)}"
    )


def test_auto_with_a_locked_keychain_takes_the_files_and_says_why_in_one_line(tmp_path, state_env):
    locked = FileKeyring(tmp_path / "k.json", mode="locked")

    def keychain() -> TokenStore:
        store = KeyringStore(locked, timeout=WAIT_FOR_KEYCHAIN)
        try:
            store.get(stored.index_key())
        except StoreError as exc:
            raise StoreOpenError(exc.name, exc.detail) from None
        return store

    opened = open_store(TokenStoreMode.AUTO, key=KEY, key_file=None, env=state_env, keychain=keychain)
    assert isinstance(opened.store, EncryptedFileStore)
    assert opened.line == (
        f"the keychain is locked: the tokens are in encrypted files in {token_directory(state_env)}"
    )
    assert "\n" not in opened.line


def test_auto_without_keychain_and_key_keeps_the_tokens_in_memory_and_says_why(state_env):
    opened = open_store(TokenStoreMode.AUTO, key=None, key_file=None, env=state_env, keychain=unavailable)
    assert isinstance(opened.store, MemoryStore)
    assert opened.line == (
        "the tokens stay in memory: the keychain is not available (no backend), "
        "and no token key is set (MCP_BRIDGE_TOKEN_KEY or --token-key-file). Each start needs a new sign-in"
    )


def test_auto_with_a_file_store_that_does_not_start_keeps_the_tokens_in_memory(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the state directory should be")
    env = {"XDG_STATE_HOME": str(blocked)}
    opened = open_store(TokenStoreMode.AUTO, key=KEY, key_file=None, env=env, keychain=unavailable)
    assert isinstance(opened.store, MemoryStore) and "the file store did not start" in opened.line


def test_an_explicit_store_that_does_not_open_is_an_error(state_env, tmp_path):
    with pytest.raises(StoreOpenError):
        open_store(TokenStoreMode.KEYCHAIN, key=None, key_file=None, env=state_env, keychain=unavailable)
    with pytest.raises(StoreOpenError) as caught:
        open_store(TokenStoreMode.FILE, key=None, key_file=None, env=state_env)
    assert caught.value.name == "TokenKeyMissing"
    with pytest.raises(StoreOpenError) as caught:
        key_file = write_key(tmp_path / "key", mode=0o644)
        open_store(TokenStoreMode.AUTO, key=None, key_file=str(key_file), env=state_env, keychain=unavailable)
    assert caught.value.name == "TokenKeyFileNotPrivate"


def test_a_keychain_that_stops_later_hands_over_to_the_next_store_once_with_a_warning(tmp_path, caplog):
    backend = FileKeyring(tmp_path / "k.json")
    made: list[MemoryStore] = []

    def next_store() -> TokenStore:
        made.append(MemoryStore("the tokens stay in memory"))
        return made[-1]

    store = FallbackStore(KeyringStore(backend), next_store)
    key = sample_record().key
    store.put(key, b"in the keychain")
    backend.mode = "locked"
    with caplog.at_level(logging.WARNING, logger="mcpbridge"):
        store.put(key, b"in memory")
        assert store.get(key) == b"in memory"
        store.put(key, b"again")
    assert len(made) == 1 and store.kind == "memory"
    assert caplog.text.count("the keychain stopped to answer") == 1


def test_the_unavailable_store_keeps_nothing():
    store = UnavailableStore(StoreError("FileStoreFailed", "no disk"))
    assert store.get(sample_record().key) is None
    with pytest.raises(StoreError):
        store.put(sample_record().key, b"x")
    assert store.describe() == "the tokens are not stored: no disk"


def test_keyring_and_cryptography_load_only_when_a_store_needs_them():
    code = (
        "import sys\n"
        "import mcpbridge.oauth.authorizer, mcpbridge.vscode.logout, mcpbridge.vscode.serve_url\n"
        "from mcpbridge.oauth.config import TokenStoreMode\nfrom mcpbridge.oauth.store import open_store\n"
        "open_store(TokenStoreMode.MEMORY, key=None, key_file=None, env={})\n"
        "print('keyring' in sys.modules, 'cryptography' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "False"]


# ------------------------------------------------------------------- opening at first use


def test_check_options_refuses_at_once_what_open_store_would_refuse_without_a_keychain(tmp_path, state_env):
    loose = str(write_key(tmp_path / "key", mode=0o644))
    cases = [
        (TokenStoreMode.FILE, None, None, state_env, "TokenKeyMissing"),
        (TokenStoreMode.FILE, KEY, None, {}, "NoTokenDirectory"),
        (TokenStoreMode.FILE, None, loose, state_env, "TokenKeyFileNotPrivate"),
        (TokenStoreMode.AUTO, None, loose, state_env, "TokenKeyFileNotPrivate"),
    ]
    for mode, key, key_file, env, name in cases:
        with pytest.raises(StoreOpenError) as caught:
            check_options(mode, key=key, key_file=key_file, env=env)
        assert caught.value.name == name
    good = str(write_key(tmp_path / "good"))
    for mode, key, key_file, env in [
        (TokenStoreMode.KEYCHAIN, None, None, {}),
        (TokenStoreMode.MEMORY, None, None, {}),
        (TokenStoreMode.AUTO, None, None, {}),
        (TokenStoreMode.AUTO, None, loose, {}),  # no token directory: the keychain decides at the opening
        (TokenStoreMode.FILE, None, good, state_env),
        (TokenStoreMode.FILE, KEY, None, state_env),
    ]:
        check_options(mode, key=key, key_file=key_file, env=env)
    assert not token_directory(state_env).exists()  # nothing was made


def test_a_deferred_store_opens_once_at_its_first_use_and_logs_its_line(caplog):
    opened: list[int] = []

    def opener() -> OpenedStore:
        opened.append(1)
        return OpenedStore(MemoryStore(), "the tokens stay here")

    store = DeferredStore(opener)
    assert opened == []
    with caplog.at_level(logging.INFO, logger="mcpbridge"):
        indexed = IndexedStore(store)
        indexed.open()
        indexed.save(sample_record(), URL)
        assert indexed.load(sample_record().key) == sample_record()
        # The line of the memory store waits for a sign-in that needs it, then comes once.
        assert caplog.records == []
        indexed.sign_in_needed()
        indexed.sign_in_needed()
    assert opened == [1]
    assert store.kind == "memory" and store.describe() == "the tokens stay here"
    assert [r.getMessage() for r in caplog.records] == ["the tokens stay here"]


def test_a_deferred_store_that_does_not_open_raises_the_same_error_each_time_and_logs_it_once(caplog):
    calls: list[int] = []

    def opener() -> OpenedStore:
        calls.append(1)
        raise StoreOpenError("KeychainLocked", "the keychain is locked")

    store = DeferredStore(opener)
    with caplog.at_level(logging.INFO, logger="mcpbridge"):
        for _ in range(3):
            with pytest.raises(StoreOpenError) as caught:
                IndexedStore(store).open()
            assert caught.value.name == "KeychainLocked"
        with pytest.raises(StoreError):
            store.get(sample_record().key)
    assert calls == [1]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["the token store did not open: the keychain is locked"]


def test_an_early_open_runs_on_its_own_thread_and_the_first_use_waits_for_it():
    started = threading.Event()
    go_on = threading.Event()
    threads: list[str] = []

    def opener() -> OpenedStore:
        threads.append(threading.current_thread().name)
        started.set()
        assert go_on.wait(WAIT)
        return OpenedStore(MemoryStore(), "the tokens stay here")

    store = DeferredStore(opener)
    indexed = IndexedStore(store)
    indexed.open_early()
    assert started.wait(WAIT)
    indexed.open_early()  # once only
    user = threading.Thread(target=indexed.open, name="test-first-use")
    user.start()
    user.join(0.05)
    assert user.is_alive()  # the first use waits for the early open
    go_on.set()
    user.join(WAIT)
    assert not user.is_alive()
    assert threads == ["mcpbridge-token-store"]  # opened once, on the named thread
    assert store.describe() == "the tokens stay here"
    assert not any(t.name == "mcpbridge-token-store" for t in threading.enumerate())


def test_an_early_open_that_fails_fails_each_use_with_its_error():
    def opener() -> OpenedStore:
        raise StoreOpenError("KeychainLocked", "the keychain is locked")

    store = DeferredStore(opener)
    store.open_early()
    for _ in range(2):
        with pytest.raises(StoreOpenError) as caught:
            store.open()
        assert caught.value.name == "KeychainLocked"


def test_a_use_waits_for_an_early_open_at_most_its_bound(monkeypatch):
    monkeypatch.setattr(store_module, "EARLY_OPEN_WAIT", 0.2)
    release = threading.Event()

    def opener() -> OpenedStore:
        assert release.wait(WAIT)
        return OpenedStore(MemoryStore(), "the tokens stay here")

    store = DeferredStore(opener)
    store.open_early()
    try:
        with pytest.raises(StoreOpenError) as caught:
            store.open()
        assert caught.value.detail == "the token store did not open in 0.2 s"
    finally:
        release.set()
    assert store.open().line == "the tokens stay here"  # the early open ended; its store serves


# --------------------------------------------------------------- two bridges, one index

#: A bridge that saves sign-ins: argv is the repository, the token directory, the first record
#: number and the count. It starts at the line "go" on its stdin, so both writers run at once.
SAVER = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from mcpbridge.oauth.filestore import EncryptedFileStore
from mcpbridge.oauth.store import IndexedStore
from mcpbridge.oauth.testing import URL, sample_record
store = IndexedStore(EncryptedFileStore.open(Path(sys.argv[2]), bytes(range(32))))
first, count = int(sys.argv[3]), int(sys.argv[4])
print("ready", flush=True)
assert sys.stdin.readline() == "go\\n"
for n in range(first, first + count):
    store.save(sample_record(n), f"{URL}/{n}")
print("done", flush=True)
"""


def test_two_bridges_that_save_at_once_lose_no_index_entry(tmp_path, caplog):
    directory = tmp_path / "tokens"
    count = 60
    savers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                SAVER,
                str(Path(__file__).resolve().parents[2]),
                str(directory),
                str(first),
                str(count),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for first in (0, 1000)
    ]
    try:
        for saver in savers:
            assert saver.stdout is not None
            assert read_line(saver.stdout, "the line 'ready' of a saver") == "ready\n"
        for saver in savers:
            assert saver.stdin is not None
            saver.stdin.write("go\n")
            saver.stdin.flush()
        for saver in savers:
            assert saver.stdout is not None
            assert read_line(saver.stdout, "the line 'done' of a saver") == "done\n"
            assert saver.wait(30) == 0
    finally:
        for saver in savers:
            saver.kill()
            saver.wait(30)
            for stream in (saver.stdin, saver.stdout):
                if stream is not None:
                    stream.close()
    indexed = IndexedStore(EncryptedFileStore.open(directory, KEY))
    urls = sorted(e.url for e in indexed.entries())
    expected = sorted(f"{URL}/{n}" for first in (0, 1000) for n in range(first, first + count))
    assert urls == expected
    assert (directory.parent / "index.lock").exists()


def test_the_keychain_shares_the_lock_file_of_the_state_directory(tmp_path, state_env):
    keychain = KeyringStore(FileKeyring(tmp_path / "k.json"))
    opened = open_store(
        TokenStoreMode.AUTO, key=None, key_file=None, env=state_env, keychain=lambda: keychain
    )
    assert opened.store.lock_path == token_directory(state_env).parent / "index.lock"
    IndexedStore(opened.store).save(sample_record(), URL)
    assert opened.store.lock_path is not None and opened.store.lock_path.exists()
    assert MemoryStore().lock_path is None


def test_an_index_whose_lock_stays_taken_fails_in_bounded_time_and_keeps_the_record(
    file_store, caplog, monkeypatch
):
    import mcpbridge.oauth.store as store_module

    monkeypatch.setattr(store_module, "INDEX_LOCK_TIMEOUT", 0.2)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); sys.stdin.read()",
            str(file_store.lock_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert read_line(holder.stdout, "the line 'held' of the holder") == "held\n"
        caplog.set_level(logging.WARNING, logger="mcpbridge.oauth")
        record = sample_record()
        indexed = IndexedStore(file_store)
        indexed.save(record, URL)
        assert indexed.load(record.key) == record
        assert "another bridge held the index for 0.2 s" in caplog.text
        assert file_store.get(stored.index_key()) is None
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(30)
        holder.stdout.close()


# --- a host without a keychain is told without loading keyring ---------------------------------


def _bus_socket(directory: Path) -> Path:
    import socket

    path = directory / "bus"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.close()
    return path


def test_linux_without_a_session_bus_has_no_keychain(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    (tmp_path / "run").mkdir()
    why = keychain_ruled_out(env, "linux")
    assert why == "the keychain is not available (no D-Bus session bus)"
    # A file named like the bus is not the bus.
    (tmp_path / "run" / "bus").write_text("")
    assert keychain_ruled_out(env, "linux") == why


@pytest.mark.parametrize("system", ["darwin", "win32"])
def test_macos_and_windows_always_ask_keyring(tmp_path, system):
    assert keychain_ruled_out({"HOME": str(tmp_path)}, system) is None


def test_a_session_bus_or_a_chosen_backend_lets_keyring_decide(tmp_path):
    home = {"HOME": str(tmp_path)}
    assert keychain_ruled_out({**home, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"}, "linux") is None
    assert keychain_ruled_out({**home, "PYTHON_KEYRING_BACKEND": "a.B"}, "linux") is None
    run = tmp_path / "run"
    run.mkdir()
    _bus_socket(run)
    assert keychain_ruled_out({**home, "XDG_RUNTIME_DIR": str(run)}, "linux") is None
    config = tmp_path / "cfg" / "python_keyring"
    config.mkdir(parents=True)
    (config / "keyringrc.cfg").write_text("[backend]\ndefault-keyring=a.B\n")
    assert keychain_ruled_out({**home, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}, "linux") is None
    (tmp_path / ".config").symlink_to(tmp_path / "cfg")
    assert keychain_ruled_out(home, "linux") is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the D-Bus rule is the rule of Linux")
def test_the_keychain_of_a_host_without_a_bus_fails_to_open_without_importing_keyring(tmp_path):
    program = (
        "import sys\n"
        "from mcpbridge.oauth.keychain import KeyringStore\n"
        "from mcpbridge.oauth.errors import StoreOpenError\n"
        "try:\n"
        "    KeyringStore.open()\n"
        "except StoreOpenError as exc:\n"
        "    print(exc.name, exc.detail, 'keyring' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "PYTHON_KEYRING", "XDG_"))}
    env["HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=WAIT, check=True
    )
    assert (
        done.stdout.strip()
        == "KeychainUnavailable the keychain is not available (no D-Bus session bus) False"
    )
