"""The contract of a :class:`~.tokenstore.TokenStore`, as a mixin of test classes.

Every store passes the same tests::

    class TestMemoryStore(TokenStoreContract):
        @pytest.fixture
        def store(self) -> TokenStore:
            return MemoryStore()

The mixin uses plain ``assert``; pytest gives the ``store`` fixture to each test
method. It imports no test framework, so the package does not depend on one.
"""

from __future__ import annotations

import threading

from . import stored
from .store import IndexedStore
from .stored import ClientRegistration, Record, RecordKey
from .tokenstore import TokenStore

__all__ = ["TokenStoreContract", "sample_record"]

URL = "https://mcp.example.com/mcp"


def sample_record(
    n: int = 0, *, client: str = "mcp-bridge-vscode|default|http://127.0.0.1:41894/callback"
) -> Record:
    """A record with tokens for the tests of a store."""
    key = RecordKey("https://as.example.com", f"https://mcp.example.com/mcp/{n}", client)
    return Record(
        key,
        ClientRegistration(f"client-{n}", None, "none"),
        access_token=f"access-{n}-token",
        expires_at=2_000_000_000 + n,
        refresh_token=f"refresh-{n}-token",
        scopes=("mcp:read",),
    )


class TokenStoreContract:
    """The tests that every token store passes; the class that mixes it in gives ``store``."""

    def test_a_key_that_was_never_stored_gives_none(self, store: TokenStore) -> None:
        assert store.get(sample_record().key) is None

    def test_stored_bytes_come_back_unchanged(self, store: TokenStore) -> None:
        key = sample_record().key
        store.put(key, b'{"a":1}')
        assert store.get(key) == b'{"a":1}'

    def test_a_second_put_replaces_the_first(self, store: TokenStore) -> None:
        key = sample_record().key
        store.put(key, b"first")
        store.put(key, b"second")
        assert store.get(key) == b"second"

    def test_delete_tells_whether_the_key_existed(self, store: TokenStore) -> None:
        key = sample_record().key
        assert store.delete(key) is False
        store.put(key, b"x")
        assert store.delete(key) is True
        assert store.get(key) is None
        assert store.delete(key) is False

    def test_keys_that_differ_in_one_part_are_separate(self, store: TokenStore) -> None:
        a = RecordKey("https://as", "https://r", "c")
        variants = [RecordKey("https://as2", "https://r", "c"), RecordKey("https://as", "https://r2", "c")]
        variants.append(RecordKey("https://as", "https://r", "c2"))
        store.put(a, b"a")
        for n, key in enumerate(variants):
            store.put(key, str(n).encode())
        assert store.get(a) == b"a"
        assert [store.get(key) for key in variants] == [b"0", b"1", b"2"]

    def test_a_record_of_one_hundred_kibibytes_is_kept(self, store: TokenStore) -> None:
        key = sample_record().key
        data = b"x" * (100 * 1024)
        store.put(key, data)
        assert store.get(key) == data

    def test_records_from_many_threads_are_all_kept(self, store: TokenStore) -> None:
        records = [sample_record(n) for n in range(8)]
        failures: list[BaseException] = []

        def save(record: Record) -> None:
            try:
                store.put(record.key, stored.record_to_json(record))
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=save, args=(r,), name="test-store-writer") for r in records]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10.0)
        assert not any(thread.is_alive() for thread in threads), "a writer of the store did not end in 10 s"
        assert not failures
        for record in records:
            data = store.get(record.key)
            assert data is not None and stored.record_from_json(data, record.key) == record

    def test_an_indexed_record_loads_back_and_is_listed_for_its_url(self, store: TokenStore) -> None:
        indexed = IndexedStore(store)
        record = sample_record(1)
        indexed.save(record, URL)
        assert indexed.load(record.key) == record
        entries = indexed.entries()
        assert [(e.url, e.key) for e in entries] == [(URL, record.key)]

    def test_a_deleted_record_leaves_the_index(self, store: TokenStore) -> None:
        indexed = IndexedStore(store)
        one, two = sample_record(1), sample_record(2)
        indexed.save(one, URL)
        indexed.save(two, URL + "/2")
        assert indexed.delete(one.key) is True
        assert indexed.load(one.key) is None
        assert [e.key for e in indexed.entries()] == [two.key]
        indexed.delete(two.key)
        assert indexed.entries() == []
        assert store.get(stored.index_key()) is None

    def test_the_description_says_where_the_tokens_are_and_holds_no_token(self, store: TokenStore) -> None:
        record = sample_record()
        IndexedStore(store).save(record, URL)
        text = store.describe()
        assert text.startswith("the tokens ")
        assert record.access_token is not None and record.access_token not in text
