"""Defects found in review, each pinned by a test that failed before its fix."""

from __future__ import annotations

import random
import threading
import time

import pytest

from mcache import Cache, FakeClock
from mcache.stores import MemcachedStore, MemoryStore, TieredStore, from_url
from mcache.stores.memcached_wire import read_values, send_get


class Dribble:
    """A socket that hands out replies a few bytes at a time, at random boundaries."""

    def __init__(self, sock, rng: random.Random) -> None:
        self.sock, self.rng = sock, rng

    def recv(self, size: int) -> bytes:
        return self.sock.recv(min(size, self.rng.randint(1, 9)))

    def __getattr__(self, name: str):
        return getattr(self.sock, name)


def test_get_reply_parses_at_every_recv_boundary(memcached_url: str) -> None:
    store = from_url(memcached_url)
    values = {
        "a": b"first",
        "b": b"END\r\n",
        "c": b"",
        "d": b"VALUE d 0 3\r\nEND\r\nEND",
        "e": b"x" * 70_000 + b"\r\nEND\r\n",
    }
    store.set_many(values)
    client = store._owner("a").take()  # type: ignore[attr-defined]
    for seed in range(150):
        send_get(client, [*values, "missing"])
        real = client.sock
        client.sock = Dribble(real, random.Random(seed))
        try:
            assert read_values(client) == values, seed
        finally:
            client.sock = real
    send_get(client, ["a"])
    assert read_values(client) == {"a": b"first"}, "nothing was left unread on the socket"


def test_missing_key_during_a_stale_rebuild_never_returns_none() -> None:
    cache = Cache(MemoryStore(), namespace="r")
    clock_key = cache.key("k")
    cache.get_or_build("k", lambda: "v1", ttl=1)
    time.sleep(1.1)
    started = threading.Event()
    results: dict[str, object] = {}

    def slow() -> str:
        started.set()
        time.sleep(0.3)
        return "v2"

    rebuilder = threading.Thread(target=lambda: results.update(a=cache.get_or_build("k", slow)))
    rebuilder.start()
    started.wait()
    cache.store.delete(clock_key)  # the entry reaches its hard TTL mid-rebuild
    results["b"] = cache.get_or_build("k", lambda: "v3")
    rebuilder.join()
    assert results["a"] == "v2"
    assert results["b"] in {"v2", "v3"}


def test_timed_out_followers_do_not_each_build() -> None:
    cache = Cache(MemoryStore(), namespace="r")
    builds = []
    barrier = threading.Barrier(8)

    def slow() -> str:
        builds.append(1)
        time.sleep(0.6)
        return "v"

    def caller() -> None:
        barrier.wait()
        cache.get_or_build("k", slow, wait=0.2)

    threads = [threading.Thread(target=caller) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) <= 3


def test_refresher_that_raises_frees_the_lock_and_serves_stale() -> None:
    clock = FakeClock()

    def broken_queue(job) -> bool:
        raise ConnectionError("broker down")

    cache = Cache(
        MemoryStore(clock=clock),
        namespace="r",
        clock=clock,
        refresh="background",
        refresher=broken_queue,
    )
    cache.get_or_build("k", lambda: "old", ttl=10)
    clock.advance(11)
    assert cache.get_or_build("k", lambda: "new", ttl=10) == "old"
    assert cache.store.get(cache.derived_key("l", cache.key("k"))) is cache.store.get("absent")


def test_local_tag_copy_never_moves_backwards() -> None:
    cache = Cache(MemoryStore(), namespace="r", tag_cache_ttl=60)
    cache.tags._remember({"t": 5})
    cache.tags._remember({"t": 3})  # a read that began before the bump, finishing after it
    assert cache.tags.cached(["t"]) == {"t": 5}


def test_bump_replaces_foreign_bytes_under_a_tag_key() -> None:
    cache = Cache(MemoryStore(), namespace="r")
    cache.store.set(cache.tags.key("t"), b"not a number")
    version = cache.invalidate("t")["t"]
    assert version >= cache.clock.time_ms() - 1000
    assert cache.invalidate("t")["t"] > version


def test_tag_keys_fit_memcached_whatever_the_names() -> None:
    cache = Cache(MemoryStore(), namespace="n" * 100)
    key = cache.tags.key("t" * 150)
    assert len(key) <= 250
    assert cache.invalidate("t" * 150)


# -- clusters ----------------------------------------------------------------------------------


@pytest.fixture
def pair(memcached_nodes):
    from tests.servers import memcached_process

    nodes = [memcached_process().start() for _ in range(2)]
    yield nodes
    for node in nodes:
        node.kill()


def test_replicated_tag_bumps_reach_every_replica(pair) -> None:
    store = MemcachedStore([n.address for n in pair], replicas=2, dead_timeout=60, timeout=0.3)
    cache = Cache(store, namespace="rep")
    assert cache.get_or_build("page", lambda: "old page", tags=["posts"]) == "old page"
    cache.invalidate("posts")
    owner = store.ring.server_for(cache.tags.key("posts"))
    next(n for n in pair if n.port == owner.port).restart()  # comes back empty
    assert cache.get_or_build("page", lambda: "new page", tags=["posts"]) == "new page"


def test_near_caches_rebuild_once_per_invalidation(memcached_url: str) -> None:
    cold = from_url(memcached_url)
    processes = [
        Cache(TieredStore(MemoryStore(), cold, hot_ttl=60), namespace="nc") for _ in range(4)
    ]
    builds = []

    def build() -> str:
        builds.append(1)
        return f"v{len(builds)}"

    for cache in processes:
        cache.get_or_build("page", build, tags=["posts"])
    processes[0].invalidate("posts")
    for cache in processes:
        assert cache.get_or_build("page", build, tags=["posts"]) == "v2"
    assert len(builds) == 2
