"""Store URLs build the right store, and a bad URL says what is wrong and how to fix it."""

from __future__ import annotations

import pytest

from mcache.clock import FakeClock
from mcache.errors import ConfigError
from mcache.model.ring import KetamaRing, ModuloRing, Server
from mcache.stores import MemcachedStore, MemoryStore, RedisStore, from_url


def test_memory_url_with_sizes() -> None:
    store = from_url("memory://?max_bytes=8m&max_value_size=64k")
    assert isinstance(store, MemoryStore)
    assert store.max_bytes == 8 * 1024 * 1024
    assert store.max_value_size == 64 * 1024


def test_memory_url_keyword_options() -> None:
    clock = FakeClock()
    store = from_url("memory://", max_bytes=4096, max_value_size=1024, clock=clock)
    assert isinstance(store, MemoryStore)
    assert (store.max_bytes, store.max_value_size) == (4096, 1024)


def test_memcached_url_servers_weights_options() -> None:
    store = from_url(
        "memcached://10.0.0.1:11211:2,[::1]:11212,cache.local?hashing=modulo&timeout=0.25"
    )
    assert isinstance(store, MemcachedStore)
    assert store.servers == (
        Server("10.0.0.1", 11211, 2),
        Server("::1", 11212, 1),
        Server("cache.local", 11211, 1),
    )
    assert isinstance(store.ring, ModuloRing)
    assert store.timeout == 0.25
    assert isinstance(from_url("memcached://h:1").ring, KetamaRing)  # type: ignore[attr-defined]


def test_redis_url() -> None:
    store = from_url("redis://:secret@127.0.0.1:6390/3?socket_timeout=0.5&max_value_size=2m")
    assert isinstance(store, RedisStore)
    assert store.max_value_size == 2 * 1024 * 1024
    assert "secret" not in repr(store)


def test_a_sentinel_url_names_its_sentinels_service_and_database() -> None:
    from mcache.stores.redis.sentinel import parse_sentinel_url

    found = parse_sentinel_url("redis+sentinel://:p%40ss@h1:26380,h2,[::1]:26381/site/3")
    assert found.sentinels == (("h1", 26380), ("h2", 26379), ("::1", 26381))
    assert (found.service, found.db, found.password) == ("site", 3, "p@ss")
    store = from_url("redis+sentinel://:secret@h1:26380/site/3?replica_reads=true")
    assert "secret" not in repr(store)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("localhost:11211", "must look like scheme://"),
        ("memcache://h:1", "unknown store scheme 'memcache' (did you mean 'memcached'?)"),
        ("rediss+cluster://h:1", "(did you mean 'redis+cluster'?)"),
        ("postgres+sql://h/db", "(did you mean 'postgresql'?)"),
        ("memcached://", "no memcached servers"),
        ("memcached://h:port", "port of memcached server 'h:port'"),
        ("memcached://h:11211:0", "weight must be >= 1"),
        ("memcached://h:11211:x", "weight of memcached server"),
        ("memcached://h:99999", "bad port 99999"),
        ("memcached://h:1,h:1", "listed twice"),
        ("memcached://h:1?hashing=rendezvous", "hashing must be 'ketama' or 'modulo'"),
        ("memcached://h:1?timout=1", "option 'timout' (did you mean 'timeout'?)"),
        ("memcached://h:1?timeout=soon", "timeout='soon'"),
        ("memory://host", "memory:// takes no host"),
        ("memory://?max_bytes=lots", "not a size"),
        ("memory://?max_bytes=0", "max_bytes must be > 0"),
        ("redis://h:6379/zero", "redis database must be a number"),
        ("redis://h:6379/0?db=1", "unknown redis store option 'db'"),
        ("redis+sentinel:///site/0", "no sentinel named"),
        ("redis+sentinel://h:26379", "no service (the primary's name)"),
        ("redis+sentinel://h:26379/site/zero", "redis database must be a number"),
        ("redis+sentinel://h:port/site/0", "bad sentinel port 'port'"),
        ("redis+sentinel://h/site/0?replica_reads=maybe", "not a boolean"),
        ("redis+cluster://", "no cluster node named"),
        ("redis+cluster://h:port", "bad cluster node port 'port'"),
        ("redis+cluster://h:7000/1", "Redis Cluster has only database 0"),
        ("redis+cluster://h:7000?tag_copies=0", "tag_copies must be 1…1024"),
        ("redis+cluster://h:7000?read_replicas=1", "unknown redis+cluster store option"),
        ("valkey+cluster://h:port", "bad cluster node port 'port'"),
        ("postgresql://h/db?max_connections=0", "max_connections must be >= 1"),
    ],
)
def test_bad_urls_name_the_problem(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_url(url)
    assert says in str(caught.value)


def test_bad_keyword_option() -> None:
    with pytest.raises(ConfigError, match=r"'max_byte' \(did you mean 'max_bytes'\?\)"):
        from_url("memory://", max_byte=10)


def test_error_shows_a_valid_example() -> None:
    with pytest.raises(ConfigError, match=r"memcached://127\.0\.0\.1:11211"):
        from_url("memcached://")


def test_keyword_options_are_parsed_and_checked_as_the_query_strings_are() -> None:
    assert from_url("memory://", max_bytes="8m").max_bytes == 8 * 1024 * 1024
    with pytest.raises(ConfigError, match="max_bytes='8q'"):
        from_url("memory://", max_bytes="8q")
    with pytest.raises(ConfigError, match="timeout must be a number, got"):
        from_url("memcached://127.0.0.1:11211", timeout=[1])
    with pytest.raises(ConfigError, match="flush_on_rejoin must be True or False"):
        from_url("memcached://127.0.0.1:11211", flush_on_rejoin=1)


def test_keyword_options_take_store_tiers_and_whole_floats() -> None:
    tiered = from_url("tiered://", hot=MemoryStore(), cold=MemoryStore(), hot_ttl=2.0)
    assert tiered.hot_ttl == 2
    assert from_url("memory://", max_bytes=64e6).max_bytes == 64_000_000
    with pytest.raises(ConfigError, match="max_bytes must be a size"):
        from_url("memory://", max_bytes=1.5)
