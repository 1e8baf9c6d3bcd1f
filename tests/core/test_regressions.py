"""Defects found in review, each pinned by a test that failed before its fix."""

from __future__ import annotations

import random
import threading
import time

import pytest

from mcache import Cache, FakeClock
from mcache.stores import MemcachedStore, MemoryStore, TieredStore, from_url
from mcache.stores.memcached.wire import read_values, send_get


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
    assert cache.store.get(cache.parts.derived_key("l", cache.key("k"))) is cache.store.get(
        "absent"
    )


def test_local_tag_copy_never_moves_backwards() -> None:
    cache = Cache(MemoryStore(), namespace="r", tag_cache_ttl=60)
    cache.tags._remember({"t": 5})
    cache.tags._remember({"t": 3})  # a read that began before the bump, finishing after it
    assert cache.tags.cached(cache.tags.near(["t"], "page")) == {"t": 5}


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


# -- second review: asyncio, counters, memoize ---------------------------------------------------


def test_cancelled_async_leader_does_not_cancel_its_followers() -> None:
    import asyncio

    cache = Cache(MemoryStore(), namespace="ac")
    started = asyncio.Event

    async def main() -> list[object]:
        gate = started()

        async def slow() -> str:
            gate.set()
            await asyncio.sleep(0.3)
            return "built"

        leader = asyncio.create_task(cache.aget_or_build("k", slow))
        await gate.wait()
        followers = [asyncio.create_task(cache.aget_or_build("k", slow)) for _ in range(3)]
        await asyncio.sleep(0.05)
        leader.cancel()
        return await asyncio.gather(*followers, return_exceptions=True)

    assert asyncio.run(main()) == ["built"] * 3


def test_a_builder_timeout_error_is_shared_not_rebuilt() -> None:
    import asyncio

    cache = Cache(MemoryStore(), namespace="at")
    builds = []

    async def failing() -> str:
        builds.append(1)
        await asyncio.sleep(0.1)
        raise TimeoutError("backend timed out")

    async def main() -> list[object]:
        calls = [cache.aget_or_build("k", failing) for _ in range(5)]
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, TimeoutError) for o in outcomes)
    assert builds == [1]


def test_racing_flushes_write_each_view_once() -> None:
    store = MemoryStore()
    database = {1: 100}
    lock = threading.Lock()
    one, two = (Cache(store, namespace="vf").view_counter("post", database.get) for _ in range(2))
    for _ in range(6):
        one.incr(1)
    one.push()
    two.incr(1)  # the same object, recorded again by another process
    two.push()

    def write_back(ident: int, delta: int) -> None:
        time.sleep(0.05)
        with lock:
            database[ident] += delta

    flushers = [threading.Thread(target=c.flush, args=(write_back,)) for c in (one, two)]
    for flusher in flushers:
        flusher.start()
    for flusher in flushers:
        flusher.join()
    assert database == {1: 107}


def test_lost_baseline_is_reread_from_the_database() -> None:
    cache = Cache(MemoryStore(), namespace="vb")
    database = {1: 100}
    views = cache.view_counter("post", database.get)
    for _ in range(5):
        views.incr(1)
    cache.store.delete(views._baseline_key(1))  # evicted
    assert views.flush(lambda ident, delta: database.update({ident: database[ident] + delta})) == 1
    assert database == {1: 105}


def test_view_counter_idents_round_trip_and_bad_ones_fail_before_counting() -> None:
    cache = Cache(MemoryStore(), namespace="vi")
    views = cache.view_counter("post")
    for ident in (7, -3, "a\rb", "ünï code", "12"):
        views.incr(ident)
    assert set(views.pending()) == {7, -3, "a\rb", "ünï code", "12"}
    with pytest.raises(TypeError):
        views.incr(1.5)
    assert views.values([7])[7] == 1


def test_hyperloglog_counts_anonymous_and_named_visits(redis_url: str) -> None:
    clock = FakeClock(1_800_000_000.0)
    online = Cache(redis_url, namespace="hx", clock=clock).online_counter("site", 60, 6)
    assert online.hll
    online.hit()
    online.hit("alice")
    online.hit()
    online.hit("alice")
    clock.advance(12)  # a 12 s slot later (60 s over five complete slots)
    assert online.count() == 3


def test_a_steady_visitor_is_always_counted() -> None:
    clock = FakeClock(1_800_000_000.0)
    cache = Cache(MemoryStore(clock=clock), namespace="sv", clock=clock)
    online = cache.online_counter("site", window=60, slots=6)
    counts = []
    for _ in range(200):
        online.hit("regular")
        clock.advance(1)
        counts.append(online.count())
    assert min(counts[15:]) == 1 and max(counts) == 1


def test_cached_coroutine_function_looks_async_and_methods_keep_uncached() -> None:
    import asyncio

    cache = Cache(MemoryStore(), namespace="mm")

    @cache.cached(ttl=10)
    async def fetch(n: int) -> int:
        return n

    class Repo:
        def __cache_key__(self) -> str:
            return "repo"

        @cache.cached(ttl=10)
        def size(self, n: int) -> int:
            return n * 2

    assert asyncio.iscoroutinefunction(fetch)
    assert Repo().size(2) == 4
    assert Repo().size.uncached(3) == 6


def test_tag_lost_in_the_millisecond_it_was_created_still_invalidates() -> None:
    clock = FakeClock()  # time stands still: everything happens in one millisecond
    cache = Cache(MemoryStore(clock=clock), namespace="ms", clock=clock)
    assert cache.get_or_build("page", lambda: "v1", tags=["posts"]) == "v1"
    cache.store.delete(cache.tags.key("posts"))
    assert cache.get_or_build("page", lambda: "v2", tags=["posts"]) == "v2"


def test_waiting_for_an_idle_refresher_still_accepts_work() -> None:
    from mcache.refreshers import ThreadPoolRefresher

    refresher = ThreadPoolRefresher(max_workers=1, max_queue=1)
    release = threading.Event()
    done: list[str] = []
    assert refresher(lambda: (release.wait(5), done.append("first")))
    assert refresher.wait_idle(0.05) is False, "a job is running"
    assert refresher(lambda: done.append("second")), "accepted while someone waits for idle"
    release.set()
    assert refresher.wait_idle(5) is True
    assert done == ["first", "second"]
    refresher.shutdown()
