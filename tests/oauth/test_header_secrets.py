"""The header secrets in the token stores: the test keychain behind keyring's backend seam,
and the encrypted file store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mcpbridge.oauth.config import TokenStoreMode
from mcpbridge.oauth.errors import InvalidRecord, StoreError, StoreOpenError
from mcpbridge.oauth.filestore import EncryptedFileStore, token_directory
from mcpbridge.oauth.header_secrets import SECRET_ISSUER, HeaderSecrets, open_secret_store
from mcpbridge.oauth.keychain import KeyringStore
from mcpbridge.oauth.stored import RecordKey
from mcpbridge.oauth.tokenstore import TokenStore
from tests.oauth_keyring import FileKeyring

KEY = bytes(range(32))
#: Bytes of a command line's world: UTF-8, and one byte that is not (kept with surrogateescape).
ODD_VALUE = "Bearer t\u00f6ken-\udcff-end"


@pytest.fixture(params=["keychain", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> TokenStore:
    if request.param == "keychain":
        return KeyringStore(FileKeyring(tmp_path / "keyring.json"))
    return EncryptedFileStore.open(token_directory({"XDG_STATE_HOME": str(tmp_path)}), KEY)


def test_a_secret_keeps_its_bytes_and_the_names_their_order(store: TokenStore) -> None:
    secrets = HeaderSecrets(store, "default")
    assert secrets.get("a") is None and secrets.names() == []
    secrets.set("b", ODD_VALUE)
    secrets.set("a", "first")
    secrets.set("a", "second")  # a new value replaces the old one, the name stays once
    assert secrets.get("b") == ODD_VALUE and secrets.get("a") == "second"
    assert secrets.names() == ["b", "a"]
    assert secrets.delete("b") and not secrets.delete("b")
    assert secrets.names() == ["a"] and secrets.get("b") is None


def test_accounts_are_apart_and_a_secret_is_not_a_sign_in(store: TokenStore) -> None:
    HeaderSecrets(store, "work").set("api", "w-value")
    assert HeaderSecrets(store, "default").get("api") is None
    assert HeaderSecrets(store, "default").names() == []
    assert store.get(RecordKey(SECRET_ISSUER, "work", "api")) is not None


def test_the_keychain_keeps_the_base64_not_the_value(tmp_path: Path) -> None:
    backend = FileKeyring(tmp_path / "keyring.json")
    HeaderSecrets(KeyringStore(backend), "default").set("api", "plain-value-123")
    assert "plain-value-123" not in (tmp_path / "keyring.json").read_text()


def test_a_damaged_secret_is_an_invalid_record_without_its_text(tmp_path: Path) -> None:
    store = KeyringStore(FileKeyring(tmp_path / "keyring.json"))
    store.put(RecordKey(SECRET_ISSUER, "default", "api"), b"not base64 !")
    with pytest.raises(InvalidRecord) as info:
        HeaderSecrets(store, "default").get("api")
    assert "not base64" not in str(info.value)


def locked_keychain(tmp_path: Path) -> Callable[[], TokenStore]:
    """Opens a locked keychain as :meth:`KeyringStore.open` opens one: one read that fails."""

    def open_locked() -> TokenStore:
        store = KeyringStore(FileKeyring(tmp_path / "k.json", mode="locked"))
        try:
            store.get(RecordKey("x", "y", "z"))
        except StoreError as exc:
            raise StoreOpenError(exc.name, exc.detail) from exc
        return store

    return open_locked


def test_the_memory_store_and_a_locked_keychain_without_a_key_keep_no_secret(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    with pytest.raises(StoreOpenError) as memory:
        open_secret_store(TokenStoreMode.MEMORY, key=None, key_file=None, env=env)
    assert memory.value.name == "MemoryStore"
    with pytest.raises(StoreOpenError) as auto:
        open_secret_store(
            TokenStoreMode.AUTO, key=None, key_file=None, env=env, keychain=locked_keychain(tmp_path)
        )
    assert auto.value.name == "NoSecretStore"
    opened = open_secret_store(
        TokenStoreMode.AUTO, key=KEY, key_file=None, env=env, keychain=locked_keychain(tmp_path)
    )
    assert opened.store.kind == "file"
