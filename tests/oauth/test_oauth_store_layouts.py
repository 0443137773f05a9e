"""Stored sign-ins survive upgrades: each released layout of the token store is read by this version.

``tests/data/signin-layout-<n>/`` holds what the bridge of layout ``n`` wrote for the
sign-ins of :data:`SIGN_INS` (fixed inputs, below):

* ``keychain.json``: the keychain entries (service and user name, then the password),
  as ``tests.oauth_keyring.FileKeyring`` keeps them;
* ``keychain-parts.json``: the same under the limit of the Windows Credential Manager,
  where a large sign-in is split into parts;
* ``tokens/``: the encrypted files of the file store under :data:`TOKEN_KEY`.

A test fails when a change of the code would make a user of that layout sign in again:
the record key, its digest, the identity of the client, the file names, the key
derivation, the encryption or the JSON of a record or of the index. A new layout keeps
the old fixtures and adds its own: ``python -m tests.oauth.test_oauth_store_layouts <n>``
writes them from the current code.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest

from mcpbridge.oauth import identity
from mcpbridge.oauth.authorizer import OAuthAuthorizer, OAuthConfig
from mcpbridge.oauth.config import DynamicRegistration, PreRegistered, Registration
from mcpbridge.oauth.filestore import EncryptedFileStore
from mcpbridge.oauth.keychain import WINDOWS_PART_CHARS, KeyringStore
from mcpbridge.oauth.signin import Gate, Opener, SignIn, SignInSettings
from mcpbridge.oauth.store import IndexedStore
from mcpbridge.oauth.stored import ClientRegistration, Record, RecordKey
from mcpbridge.oauth.tokenstore import TokenStore
from tests.oauth_keyring import FileKeyring

DATA = Path(__file__).resolve().parents[1] / "data"
#: The layouts that released versions wrote.
LAYOUTS = ("signin-layout-1",)
TOKEN_KEY = bytes(range(32))
#: The time of the test: before every expiry of the fixtures.
NOW = 1_900_000_000.0


@dataclasses.dataclass(frozen=True)
class StoredSignIn:
    """One sign-in of the fixtures: the options of the bridge that wrote it, and its record."""

    url: str
    account: str
    registration: Registration
    issuer: str
    access_token: str
    refresh_token: str
    expires_at: int
    client: ClientRegistration
    scopes: tuple[str, ...]

    @property
    def config(self) -> OAuthConfig:
        return OAuthConfig(self.url, self.account, identity.DEFAULT_REDIRECT_PORT, self.registration)

    @property
    def record(self) -> Record:
        key = RecordKey(self.issuer, self.url, self.config.identity)
        return Record(key, self.client, self.access_token, self.expires_at, self.refresh_token, self.scopes)


SIGN_INS = (
    StoredSignIn(
        url="https://mcp.example.com/mcp",
        account="default",
        registration=DynamicRegistration(),
        issuer="https://auth.example.com",
        access_token="at-layout-default",
        refresh_token="rt-layout-default",
        expires_at=2_000_000_000,
        client=ClientRegistration("dyn-client-1", None, "none"),
        scopes=("mcp:read", "offline_access"),
    ),
    StoredSignIn(
        url="https://tools.example.org/v1/mcp",
        account="work",
        registration=PreRegistered("pre-registered-7", "https://login.example.org/tenant", None),
        issuer="https://login.example.org/tenant",
        # As long as the JSON Web Tokens of some servers: more than one Credential Manager entry.
        access_token="eyJ" + "a" * 6000,
        refresh_token="rt-layout-work",
        expires_at=2_000_000_100,
        client=ClientRegistration("pre-registered-7", None, "none"),
        scopes=("tools.read",),
    ),
)


def keychain_store(path: Path, *, parts: bool) -> KeyringStore:
    return KeyringStore(FileKeyring(path), part_chars=WINDOWS_PART_CHARS if parts else None)


def write_layout(directory: Path) -> None:
    """Write the fixtures of the current layout into ``directory`` (see the module docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    stores: list[TokenStore] = [
        keychain_store(directory / "keychain.json", parts=False),
        keychain_store(directory / "keychain-parts.json", parts=True),
        EncryptedFileStore.open(directory / "tokens", TOKEN_KEY),
    ]
    for store in stores:
        indexed = IndexedStore(store)
        for sign_in in SIGN_INS:
            indexed.save(sign_in.record, sign_in.url)
    for name in ("keychain.json", "keychain-parts.json"):
        # One entry a line, in order: a later layout's diff stays readable.
        path = directory / name
        path.write_text(json.dumps(json.loads(path.read_text()), indent=0, sort_keys=True) + "\n")
        path.with_suffix(".lock").unlink()
    (directory / "index.lock").unlink()  # the lock file of the file store's index


def copied(layout: Path, tmp_path: Path) -> Path:
    """A copy of the fixtures: reading a sign-in may rewrite what it read."""
    target = tmp_path / layout.name
    shutil.copytree(layout, target)
    return target


def opened_stores(directory: Path) -> dict[str, TokenStore]:
    return {
        "keychain": keychain_store(directory / "keychain.json", parts=False),
        "keychain with parts": keychain_store(directory / "keychain-parts.json", parts=True),
        "files": EncryptedFileStore(directory / "tokens", TOKEN_KEY),
    }


class NoNetwork:
    """The HTTP client of a sign-in that must not need one."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the stored sign-in needed the network ({name})")


def authorizer(sign_in: StoredSignIn, store: TokenStore) -> OAuthAuthorizer:
    settings = SignInSettings(port=identity.DEFAULT_REDIRECT_PORT, timeout=1.0, no_browser=True)
    return OAuthAuthorizer(
        sign_in.config,
        IndexedStore(store),
        NoNetwork(),  # type: ignore[arg-type]
        SignIn(settings, Gate(), Opener({}, set())),
        clock=lambda: NOW,
    )


def check_layout(directory: Path) -> None:
    """Each sign-in of the fixtures in ``directory`` is found and sent as the bridge of today does."""
    for kind, store in opened_stores(directory).items():
        entries = IndexedStore(store).entries()
        assert [(e.url, e.key) for e in entries] == [(s.url, s.record.key) for s in SIGN_INS], kind
        for sign_in in SIGN_INS:
            assert IndexedStore(store).load(sign_in.record.key) == sign_in.record, kind
            bridge = authorizer(sign_in, store)
            assert bridge.headers() == {"Authorization": f"Bearer {sign_in.access_token}"}, kind
            assert not bridge.interactive(), kind


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_sign_ins_of_a_released_layout_are_used_without_a_new_sign_in(layout, tmp_path):
    fixtures = DATA / layout
    assert (fixtures / "tokens").is_dir(), f"the fixtures of {layout} are missing"
    check_layout(copied(fixtures, tmp_path))


def test_the_fixtures_writer_writes_what_the_check_reads(tmp_path):
    write_layout(tmp_path / "now")
    check_layout(tmp_path / "now")
    assert sorted(p.name for p in (tmp_path / "now").iterdir()) == [
        "keychain-parts.json",
        "keychain.json",
        "tokens",
    ]


def test_the_large_sign_in_of_the_fixtures_is_kept_in_parts():
    entries = json.loads((DATA / LAYOUTS[-1] / "keychain-parts.json").read_text())
    assert any(user.endswith("/2") for user in entries)
    assert all(len(password) <= WINDOWS_PART_CHARS for password in entries.values())


if __name__ == "__main__":
    write_layout(DATA / f"signin-layout-{sys.argv[1]}")
