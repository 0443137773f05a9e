"""The stored form of a sign-in: the record, its key, the index of the records, and their JSON.

These are part of the stored records: never change them without a new version. They are
apart from :mod:`.flow` (which names them too), so that the first request, which looks up
the stored sign-in, loads the token stores without the rules of a sign-in.

This module is pure.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import InvalidRecord
from .identity import INDEX_CLIENT, INDEX_ISSUER

__all__ = [
    "INDEX_VERSION",
    "MAX_INDEX_ENTRIES",
    "RECORD_VERSION",
    "REFRESH_MARGIN",
    "ClientRegistration",
    "IndexEntry",
    "Record",
    "RecordKey",
    "index_from_json",
    "index_key",
    "index_to_json",
    "index_with",
    "index_without",
    "record_from_json",
    "record_to_json",
]

RECORD_VERSION: Final = 1
INDEX_VERSION: Final = 1
MAX_INDEX_ENTRIES: Final = 256
#: A token that expires in less than this many seconds is refreshed first.
REFRESH_MARGIN: Final = 60

_KEY_DIGEST_DOMAIN: Final = b"mcpbridge token record key 1"


@dataclass(frozen=True, slots=True)
class RecordKey:
    """The key of a stored sign-in: the authorization server, the resource, the client."""

    issuer: str
    resource: str
    client: str

    def digest(self) -> bytes:
        """SHA-256 over a domain text and the three parts, each after its length (u64 LE)."""
        h = hashlib.sha256(_KEY_DIGEST_DOMAIN)
        for part in (self.issuer, self.resource, self.client):
            data = part.encode("utf-8")
            h.update(struct.pack("<Q", len(data)))
            h.update(data)
        return h.digest()


def index_key(issuer: str = INDEX_ISSUER) -> RecordKey:
    """The key under which a store keeps its index of the stored sign-ins."""
    return RecordKey(issuer, issuer, INDEX_CLIENT)


@dataclass(frozen=True, slots=True)
class ClientRegistration:
    """The client of a sign-in. A pre-registered secret is never part of a stored record."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    #: ``none``, ``client_secret_basic`` or ``client_secret_post``.
    auth_method: str = "none"


@dataclass(frozen=True, slots=True)
class Record:
    """One stored sign-in. A record without an access token keeps only its registration."""

    key: RecordKey
    registration: ClientRegistration
    access_token: str | None = field(default=None, repr=False)
    #: Unix seconds, or ``None`` when the server gave no lifetime.
    expires_at: int | None = None
    refresh_token: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    #: The authorization server refused the ``resource`` of RFC 8707 (see
    #: :func:`.flow.refuses_resource`): the sign-ins and refreshes of this key go without it.
    without_resource: bool = False

    def usable(self, now: float, margin: float = REFRESH_MARGIN) -> bool:
        """An access token that does not expire within ``margin`` seconds."""
        if not self.access_token:
            return False
        return self.expires_at is None or self.expires_at - now > margin

    def without_tokens(self) -> Record:
        return Record(self.key, self.registration, scopes=self.scopes, without_resource=self.without_resource)


def record_to_json(record: Record) -> bytes:
    """The stored form of a record (version 1); absent values are left out.

    A member that a later version adds is optional, so that the records of the
    earlier versions stay valid (``tests/data/signin-layout-*``), and an earlier
    version reads the new records, leaving out only what it does not know.
    """
    registration: dict[str, Any] = {
        "client_id": record.registration.client_id,
        "auth_method": record.registration.auth_method,
    }
    if record.registration.client_secret is not None:
        registration["client_secret"] = record.registration.client_secret
    obj: dict[str, Any] = {
        "version": RECORD_VERSION,
        "issuer": record.key.issuer,
        "resource": record.key.resource,
        "client": record.key.client,
        "registration": registration,
        "scopes": list(record.scopes),
    }
    if record.access_token is not None:
        obj["access_token"] = record.access_token
    if record.expires_at is not None:
        obj["expires_at"] = record.expires_at
    if record.refresh_token is not None:
        obj["refresh_token"] = record.refresh_token
    if record.without_resource:
        obj["without_resource"] = True
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _optional_str(obj: Mapping[str, Any], name: str) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidRecord(f"the member {name} is not a text")
    return value


def _required_str(obj: Mapping[str, Any], name: str) -> str:
    value = _optional_str(obj, name)
    if value is None:
        raise InvalidRecord(f"the member {name} is missing")
    return value


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidRecord("not JSON") from exc
    if not isinstance(obj, dict):
        raise InvalidRecord("not a JSON object")
    return obj


def record_from_json(data: bytes, key: RecordKey) -> Record:
    """Read a stored record.

    Raises:
        InvalidRecord: not version 1, not of ``key``, or a member is not valid.
    """
    obj = _json_object(data)
    if obj.get("version") != RECORD_VERSION:
        raise InvalidRecord("another version")
    stored = RecordKey(
        _required_str(obj, "issuer"), _required_str(obj, "resource"), _required_str(obj, "client")
    )
    if stored != key:
        raise InvalidRecord("the record of another key")
    registration = obj.get("registration")
    if not isinstance(registration, dict):
        raise InvalidRecord("the member registration is missing")
    auth_method = _required_str(registration, "auth_method")
    if auth_method not in ("none", "client_secret_basic", "client_secret_post"):
        raise InvalidRecord("an unknown auth_method")
    expires_at = obj.get("expires_at")
    if expires_at is not None and (not isinstance(expires_at, int) or isinstance(expires_at, bool)):
        raise InvalidRecord("the member expires_at is not an integer")
    scopes = obj.get("scopes", [])
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise InvalidRecord("the member scopes is not a list of texts")
    without_resource = obj.get("without_resource", False)
    if not isinstance(without_resource, bool):
        raise InvalidRecord("the member without_resource is not a boolean")
    return Record(
        key=stored,
        registration=ClientRegistration(
            _required_str(registration, "client_id"),
            _optional_str(registration, "client_secret"),
            auth_method,
        ),
        access_token=_optional_str(obj, "access_token"),
        expires_at=expires_at,
        refresh_token=_optional_str(obj, "refresh_token"),
        scopes=tuple(scopes),
        without_resource=without_resource,
    )


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One stored sign-in in the index: the upstream URL and the key of its record."""

    url: str = field(repr=False)
    issuer: str
    resource: str
    client: str

    @property
    def key(self) -> RecordKey:
        return RecordKey(self.issuer, self.resource, self.client)


def index_to_json(entries: Sequence[IndexEntry]) -> bytes:
    obj = {
        "version": INDEX_VERSION,
        "entries": [
            {"url": e.url, "issuer": e.issuer, "resource": e.resource, "client": e.client} for e in entries
        ],
    }
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def index_from_json(data: bytes) -> list[IndexEntry]:
    """Read the index.

    Raises:
        InvalidRecord: the index is not valid.
    """
    obj = _json_object(data)
    if obj.get("version") != INDEX_VERSION or not isinstance(obj.get("entries"), list):
        raise InvalidRecord("not an index of version 1")
    entries: list[IndexEntry] = []
    for item in obj["entries"]:
        if not isinstance(item, dict):
            raise InvalidRecord("an entry is not an object")
        entries.append(
            IndexEntry(
                _required_str(item, "url"),
                _required_str(item, "issuer"),
                _required_str(item, "resource"),
                _required_str(item, "client"),
            )
        )
    return entries[-MAX_INDEX_ENTRIES:]


def index_with(entries: Sequence[IndexEntry], entry: IndexEntry) -> list[IndexEntry]:
    """The index with ``entry`` last; the oldest entries go beyond :data:`MAX_INDEX_ENTRIES`."""
    kept = [e for e in entries if e.key != entry.key or e.url != entry.url]
    kept.append(entry)
    return kept[-MAX_INDEX_ENTRIES:]


def index_without(entries: Sequence[IndexEntry], key: RecordKey) -> list[IndexEntry]:
    return [e for e in entries if e.key != key]
