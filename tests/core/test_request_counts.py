"""What invalidation and the build lock cost in requests, counted on a real memcached.

``invalidate`` moves a tag's version and never looks for the entries that carry it, so
it sends as many requests for 10,000 tagged entries as for 10 (counted by a proxy in
front of the server). A build takes one lock for its key, whatever else happens: each
of many callers on distinct keys takes one, and many callers on one key take one between
them (counted by the server itself, ``watch mutations``: every ``add`` it ran, and
whether it stored). On the meta protocol the server's lease, won in the read, is the
lock: no lock key is ever added.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcache import Cache
from tests.core.test_meta_leases import round_trips
from tests.memcached_proxy import MemcachedProxy, upstream_of
from tests.memcached_watch import Mutation, MutationWatch

PROTOCOLS = ["meta", "text"]


@pytest.fixture
def counting(memcached_url: str) -> Iterator[MemcachedProxy]:
    with MemcachedProxy(upstream_of(memcached_url)) as proxy:
        yield proxy


@pytest.fixture
def watch(memcached_url: str) -> Iterator[MutationWatch]:
    watcher = MutationWatch(memcached_url.removeprefix("memcached://"))
    yield watcher
    watcher.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_invalidate_sends_as_few_requests_for_10000_tagged_entries_as_for_10(
    memcached_url: str, counting: MemcachedProxy, protocol: str
) -> None:
    direct = Cache(f"{memcached_url}?protocol={protocol}", namespace="inv")
    for tag, count in (("few", 10), ("many", 10_000)):
        for i in range(count):
            direct.get_or_build(f"{tag}:{i}", lambda i=i: i, ttl=600, tags=[tag])
    proxied = Cache(f"memcached://{counting.address}?protocol={protocol}", namespace="inv")
    proxied.invalidate("warm-up")  # the protocol's probe, the connection
    time.sleep(0.05)  # counted before the first round trip is
    few = round_trips(counting, lambda: proxied.invalidate("few"))
    many = round_trips(counting, lambda: proxied.invalidate("many"))
    assert few == many <= 2, (few, many)
    rebuilt = [
        direct.get_or_build(f"many:{i}", lambda: "rebuilt", ttl=600, tags=["many"])
        for i in (0, 4_999, 9_999)
    ]
    assert rebuilt == ["rebuilt"] * 3, "every entry of the tag is stale after the bump"


def lock_adds(mutations: list[Mutation], cache: Cache, name: str) -> list[Mutation]:
    """Return the ``add`` commands the server ran on the lock key of ``name``."""
    lock_key = cache.parts.derived_key("l", cache.key(name))
    return [m for m in mutations if m.key == lock_key and m.command == "add"]


def entry_writes(mutations: list[Mutation], cache: Cache, name: str) -> list[Mutation]:
    """Return the stored writes of ``name``'s entry (not the placeholder a build adds)."""
    return [m for m in mutations if m.key == cache.key(name) and m.stored and m.command != "add"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_callers_on_distinct_keys_each_take_one_lock(
    memcached_url: str, watch: MutationWatch, protocol: str
) -> None:
    cache = Cache(
        f"{memcached_url}?protocol={protocol}", namespace=f"keys-{protocol}", stats_interval=3600
    )
    names = [f"page:{n}" for n in range(8)]
    start = threading.Barrier(len(names))

    def call(name: str) -> str:
        start.wait()
        return cache.get_or_build(name, lambda: name.upper(), ttl=60)

    with ThreadPoolExecutor(len(names)) as pool:
        assert list(pool.map(call, names)) == [name.upper() for name in names]
    mutations = watch.mutations()
    for name in names:
        adds = lock_adds(mutations, cache, name)
        if protocol == "text":
            assert [add.stored for add in adds] == [True], (name, adds)
        else:
            assert adds == [], "the lease won in the read is the lock"
        assert len(entry_writes(mutations, cache, name)) == 1, name
    placeholders = {cache.key(name) for name in names}  # a text-protocol build's lease
    other_adds = [m for m in mutations if m.command == "add" and m.key not in placeholders]
    assert len(other_adds) == (len(names) if protocol == "text" else 0), other_adds


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_many_callers_on_one_key_take_one_lock_between_them(
    memcached_url: str, watch: MutationWatch, protocol: str
) -> None:
    """Four caches (as four processes would: each its own in-process flights) of eight
    callers each, on one key whose build lasts 0.3 s."""
    url = f"{memcached_url}?protocol={protocol}"
    caches = [Cache(url, namespace=f"one-{protocol}") for _ in range(4)]
    builds: Counter[int] = Counter()
    start = threading.Barrier(32)

    def call(number: int) -> str:
        cache = caches[number % 4]

        def build() -> str:
            builds[number % 4] += 1
            time.sleep(0.3)
            return "page"

        start.wait()
        return cache.get_or_build("hot", build, ttl=60, wait=5)

    with ThreadPoolExecutor(32) as pool:
        assert set(pool.map(call, range(32))) == {"page"}
    assert sum(builds.values()) == 1, builds
    mutations = watch.mutations()
    cache = caches[0]
    (written,) = entry_writes(mutations, cache, "hot")
    adds = lock_adds(mutations, cache, "hot")
    if protocol == "text":
        won = [add for add in adds if add.stored and add.order < written.order]
        assert len(won) == 1, adds
        assert len(adds) >= 4, "each cache asked once at least: one won, the others waited"
    else:
        assert adds == [], "the lease won in the read is the lock"
