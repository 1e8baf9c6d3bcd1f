"""Sharing servers with other programs: python-memcached's own server choice under
``hashing=modulo``, and raw keys and values it (or redis-py) writes and reads."""

from __future__ import annotations

import memcache  # python-memcached: the classic client whose choices mcache must match
import pytest
import redis

from mcache import Cache
from mcache.errors import InvalidKey
from mcache.model.ring import ModuloRing, Server, classic_hash
from mcache.stores import from_url

KEYS = [f"user:{i}:profile" for i in range(2000)]


def node_holding(key: str, nodes) -> int:
    """Return the index of the one node of ``nodes`` that holds ``key``, asked one by one."""
    holders = [i for i, node in enumerate(nodes) if memcache.Client([node.address]).get(key)]
    assert len(holders) == 1, (key, holders)
    return holders[0]


def test_the_classic_hash_is_python_memcacheds() -> None:
    for key in KEYS[:500]:
        assert classic_hash(key.encode()) == memcache.cmemcache_hash(key.encode())


def test_modulo_puts_every_key_on_the_server_python_memcached_picks(trio) -> None:
    weighted = [(trio[0].address, 2), (trio[1].address, 1), (trio[2].address, 3)]
    theirs = memcache.Client(weighted)
    url = "memcached://" + ",".join(f"{a}:{w}" for a, w in weighted) + "?hashing=modulo"
    cache = Cache(url)
    ring = cache.store.ring
    assert isinstance(ring, ModuloRing)
    for key in KEYS:
        theirs_server, _ = theirs._get_server(key.encode())
        assert theirs_server.port == ring.server_for(key).port, key
    counts = [0, 0, 0]
    for key in KEYS[:300]:
        theirs.set(key, "theirs")
        held_by = node_holding(key, trio)
        counts[held_by] += 1
        assert held_by == [n.port for n in trio].index(ring.server_for(key).port)
        assert cache.raw.get(key) == b"theirs"
    assert all(counts), counts  # every server took its share


def test_mcache_reads_what_python_memcached_wrote_on_a_shared_modulo_pool(trio) -> None:
    addresses = [n.address for n in trio]
    theirs = memcache.Client(addresses)
    cache = Cache(from_url("memcached://" + ",".join(addresses) + "?hashing=modulo"))
    for i, key in enumerate(KEYS[:500]):
        theirs.set(key, f"value {i}")
    found = cache.raw.get_many(KEYS[:500])
    assert found == {key: f"value {i}".encode() for i, key in enumerate(KEYS[:500])}
    for i, key in enumerate(KEYS[500:1000]):
        assert cache.raw.set(key, f"ours {i}")
    assert theirs.get_multi(KEYS[500:1000]) == {
        key: f"ours {i}".encode() for i, key in enumerate(KEYS[500:1000])
    }


def test_failover_tries_the_server_python_memcached_retries() -> None:
    servers = [Server("10.0.0.1"), Server("10.0.0.2"), Server("10.0.0.3"), Server("10.0.0.4")]
    ring = ModuloRing(servers)
    for key in KEYS[:200]:
        hashed = memcache.cmemcache_hash(key.encode())
        owner = hashed % 4
        retried = memcache.cmemcache_hash(f"{hashed}0".encode())
        order = [servers.index(s) for s in ring.iter_servers(key)]
        assert order[0] == owner and sorted(order) == [0, 1, 2, 3]
        if retried % 4 != owner:
            assert order[1] == retried % 4, key


def test_raw_values_cross_between_the_two_clients(memcached_url: str) -> None:
    address = memcached_url.removeprefix("memcached://")
    theirs = memcache.Client([address])
    raw = Cache(memcached_url, namespace="ours").raw
    theirs.set("from:them:bytes", b"\x00\xffbin")
    theirs.set("from:them:text", "caf\u00e9")
    theirs.set("from:them:int", 41)
    assert raw.get("from:them:bytes") == b"\x00\xffbin"
    assert raw.get("from:them:text") == "caf\u00e9".encode()
    assert raw.incr("from:them:int") == 42
    assert theirs.get("from:them:int") == 42
    raw.set("from:us:text", "na\u00efve")
    raw.set("from:us:bytes", b"\x01\x02")
    raw.set("from:us:int", 7)
    assert theirs.get("from:us:text") == "na\u00efve".encode()
    assert theirs.get("from:us:bytes") == b"\x01\x02"
    assert theirs.incr("from:us:int", 3) == 10
    assert raw.add("from:us:int", 1) is False and raw.get("from:us:int") == b"10"
    assert raw.delete("from:us:int") and theirs.get("from:us:int") is None
    assert raw.get("absent", b"none") == b"none"


def test_raw_keys_are_neither_namespaced_nor_framed_on_redis(redis_url: str) -> None:
    theirs = redis.Redis.from_url(redis_url)
    cache = Cache(redis_url, namespace="site")
    assert cache.raw.set("shared:greeting", "hello", ttl=60)
    assert theirs.get("shared:greeting") == b"hello"
    assert 0 < theirs.ttl("shared:greeting") <= 60
    theirs.set("shared:counter", 5)
    assert cache.raw.incr("shared:counter", 2) == 7
    assert cache.raw.get_many(["shared:greeting", "nope"]) == {"shared:greeting": b"hello"}
    assert cache.get("shared:greeting", None) is None  # the namespaced API never sees it


def test_bad_raw_input_is_refused_with_the_reason(memcached_url: str) -> None:
    raw = Cache(memcached_url).raw
    with pytest.raises(InvalidKey, match="whitespace and control characters"):
        raw.get("two words")
    with pytest.raises(TypeError, match=r"a raw value is bytes, str or int, got dict"):
        raw.set("k", {"a": 1})
    with pytest.raises(InvalidKey, match="the limit is 250"):
        raw.set("k" * 251, b"x")


def test_a_store_down_degrades_raw_reads_and_writes() -> None:
    raw = Cache("memcached://127.0.0.1:9?connect_timeout=0.2&timeout=0.2").raw
    assert raw.get("k", "fallback") == "fallback"
    assert raw.set("k", b"v") is False
    assert raw.get_many(["k"]) == {}
