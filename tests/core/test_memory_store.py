"""What only the embedded store has: its byte bound, LRU order and counters."""

from __future__ import annotations

import pytest

from mcache import NO_VALUE
from mcache.clock import FakeClock
from mcache.errors import ConfigError
from mcache.stores import MemoryStore
from mcache.stores.memory.store import ITEM_OVERHEAD


def _item_size(key: str, value: bytes) -> int:
    return len(key) + len(value) + ITEM_OVERHEAD


def test_default_bound_is_memcacheds() -> None:
    store = MemoryStore()
    fields = store.stats()["memory"]
    assert fields["limit_maxbytes"] == 64 * 1024 * 1024
    assert fields["item_size_max"] == 1024 * 1024


def test_least_recently_used_is_evicted_first() -> None:
    value = b"x" * 100
    store = MemoryStore(max_bytes=3 * _item_size("k0", value), max_value_size=200)
    store.set("k0", value)
    store.set("k1", value)
    store.set("k2", value)
    assert store.get("k0") == value  # k0 is now the most recently used
    store.set("k3", value)
    assert store.get("k1") is NO_VALUE
    assert store.get_many(["k0", "k2", "k3"]).keys() == {"k0", "k2", "k3"}
    fields = store.stats()["memory"]
    assert fields["evictions"] == 1
    assert fields["curr_items"] == 3
    assert fields["bytes"] == 3 * _item_size("k0", value)


def test_bytes_accounting_follows_overwrites_and_deletes() -> None:
    store = MemoryStore()
    store.set("k", b"12345")
    store.set("k", b"1")
    store.append("k", b"23")
    assert store.stats()["memory"]["bytes"] == _item_size("k", b"123")
    store.delete("k")
    assert store.stats()["memory"]["bytes"] == 0


def test_expired_items_are_reclaimed_not_evicted() -> None:
    clock = FakeClock()
    value = b"x" * 100
    store = MemoryStore(max_bytes=2 * _item_size("k0", value), max_value_size=200, clock=clock)
    store.set("k0", value, 1)
    clock.advance(2)
    store.set("k1", value)
    store.set("k2", value)
    fields = store.stats()["memory"]
    assert fields["evictions"] == 0
    assert fields["reclaimed"] == 1
    assert store.get_many(["k1", "k2"]).keys() == {"k1", "k2"}


def test_hit_and_miss_counters() -> None:
    store = MemoryStore()
    store.set("a", b"1")
    store.get("a")
    store.get_many(["a", "b"])
    store.get("c")
    fields = store.stats()["memory"]
    assert (fields["get_hits"], fields["get_misses"], fields["cmd_get"]) == (2, 2, 4)


def test_cas_tokens_change_on_every_write() -> None:
    store = MemoryStore()
    store.set("k", b"v")
    _, first = store.gets("k")
    store.set("k", b"v")  # the same bytes: memcached still issues a new cas unique
    _, second = store.gets("k")
    assert first != second
    assert store.cas("k", b"w", first) is False


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_bytes": 0}, "max_bytes must be > 0"),
        ({"max_bytes": 100, "max_value_size": 200}, "max_value_size must be between"),
    ],
)
def test_bad_options(options: dict, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        MemoryStore(**options)
