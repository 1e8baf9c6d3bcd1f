"""Tiers that nest: memory over memcached over PostgreSQL, and what survives a flush."""

from __future__ import annotations

import threading
from urllib.parse import urlencode

import pytest

from mcache import Cache
from mcache.contract.store import NO_VALUE
from mcache.stores import TieredStore, from_url
from mcache.stores.sql.store import SqlStore


def tiered(hot: str, cold: str, **options: object) -> str:
    return "tiered://?" + urlencode({"hot": hot, "cold": cold, **options})


@pytest.fixture
def durable(memcached_url: str, postgres_url: str) -> TieredStore:
    store = from_url(tiered(memcached_url, postgres_url))
    assert isinstance(store, TieredStore) and isinstance(store.cold, SqlStore)
    yield store
    store.close()


def test_three_tiers_nest_by_url(memcached_url: str, postgres_url: str) -> None:
    store = from_url(tiered("memory://", tiered(memcached_url, postgres_url)))
    assert isinstance(store.cold, TieredStore) and isinstance(store.cold.cold, SqlStore)
    assert store.hot_ttl == 5 and store.cold.hot_ttl is None
    assert store.shared is store.cold, "tags and locks live where every process sees them"
    store.set("k", b"v", 300)
    assert store.cold.hot.get("k") == b"v" and store.cold.cold.get("k") == b"v"
    assert store.delete("k") is True
    assert all(tier.get("k") is NO_VALUE for tier in (store.hot, store.cold.hot, store.cold.cold))


def test_a_flushed_memcached_refills_from_postgres_without_a_build(durable: TieredStore) -> None:
    cache = Cache(durable)
    builds = []

    def build() -> str:
        builds.append(1)
        return "expensive"

    assert cache.get_or_build("report", build, ttl=600, tags=["org:1"]) == "expensive"
    durable.hot.flush()  # memcached restarted, empty
    assert cache.get_or_build("report", build, ttl=600, tags=["org:1"]) == "expensive"
    assert builds == [1], "the entry and its tag versions came back from PostgreSQL"
    store_key = cache._store_key("report")
    assert durable.hot.get(store_key) is not NO_VALUE, "the hot tier holds the copy again"
    left = durable.cold.get_many_expiring([store_key])[store_key][1]
    assert 600 < left <= 1200, "the entry's hard TTL: ttl plus its stale window"


def test_a_tag_bump_invalidates_every_tier(durable: TieredStore) -> None:
    cache = Cache(durable)
    built = []
    cache.get_or_build("page", lambda: built.append(1) or "v1", ttl=600, tags=["post:7"])
    cache.invalidate("post:7")
    durable.hot.flush()  # the bump must have reached PostgreSQL too
    assert (
        cache.get_or_build("page", lambda: built.append(2) or "v2", ttl=600, tags=["post:7"])
        == "v2"
    )
    assert built == [1, 2]


def test_racing_bumps_never_move_the_hot_copy_back(durable: TieredStore) -> None:
    durable.set("n", b"0")
    threads = [
        threading.Thread(target=lambda: [durable.incr("n", 1) for _ in range(25)]) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert durable.cold.get("n") == b"200"
    assert durable.hot.get("n") == b"200", "the hot copy ends at the cold count"


def test_a_view_counter_survives_a_memcached_restart_exactly(trio, postgres_url: str) -> None:
    node = trio[0]
    cache = Cache(from_url(tiered(f"memcached://{node.address}", postgres_url)))
    counter = cache.view_counter("views:post", lambda pk: 100)
    for _ in range(37):
        counter.incr(5)
    node.restart()  # killed: every count it held is gone
    assert counter.value(5) == 137


def test_a_failed_hot_tier_is_skipped(trio, postgres_url: str) -> None:
    node = trio[0]
    cache = Cache(from_url(tiered(f"memcached://{node.address}?dead_timeout=30", postgres_url)))
    cache.set("k", "kept")
    node.kill()
    assert cache.get("k") == "kept", "read from PostgreSQL while memcached is down"
    cache.set("k", "new")
    assert cache.get("k") == "new"
