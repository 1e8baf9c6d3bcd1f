"""Composition rules 1 and 2: what a build reads, at any depth, invalidates what it builds.

A page holding a fragment is stale when the fragment is (rule 1), and a build
never stores stale data as fresh (rule 2), on every store: the memcached pool
(where each tag has a copy per server), Redis and the in-process store.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable

import pytest

from mcache import NO_VALUE, Cache, Entry, Lock
from mcache.engine.writing import BUSY_SECONDS
from mcache.stores import MemoryStore
from tests.core import workers


@pytest.fixture(
    params=["memory", "memcached_cluster", "memcached_cluster_text", "redis", "sentinel", "cluster"]
)
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


class Site:
    """Three levels, each with a tag of its own: page > sidebar > categories."""

    def __init__(self, cache: Cache, refresh: str = "sync") -> None:
        self.cache = cache
        self.refresh = refresh
        self.data = {"categories": "c1", "sidebar": "s1", "page": "p1"}
        self.builds: list[str] = []

    def categories(self) -> str:
        return self.cache.get_or_build(
            "categories", lambda: self._built("categories"), ttl=60, tags=["categories"]
        )

    def sidebar(self) -> str:
        return self.cache.get_or_build(
            "sidebar",
            lambda: self._built("sidebar") + "(" + self.categories() + ")",
            ttl=60,
            tags=["sidebar"],
            refresh=self.refresh,
        )

    def page(self) -> str:
        return self.cache.get_or_build(
            "page",
            lambda: self._built("page") + "[" + self.sidebar() + "]",
            ttl=60,
            refresh=self.refresh,
        )

    def _built(self, name: str) -> str:
        self.builds.append(name)
        return self.data[name]


def test_a_bump_of_the_innermost_tag_reaches_the_outermost_entry(url: str) -> None:
    site = Site(Cache(url, namespace="dep"))
    assert site.page() == "p1[s1(c1)]"
    assert site.page() == "p1[s1(c1)]" and site.builds == ["page", "sidebar", "categories"]
    site.data["categories"] = "c2"
    site.cache.invalidate("categories")  # a tag only the innermost fragment declares
    assert site.page() == "p1[s1(c2)]", "the page was rebuilt with the new fragment inside"
    assert site.builds[3:] == ["page", "sidebar", "categories"]
    assert site.page() == "p1[s1(c2)]" and len(site.builds) == 6, "then it is a hit again"


def test_a_bump_of_the_middle_tag_rebuilds_page_and_sidebar_only(url: str) -> None:
    site = Site(Cache(url, namespace="dep"))
    site.page()
    site.data.update(sidebar="s2", categories="c2")  # categories changed without a bump
    site.cache.invalidate("sidebar")
    assert site.page() == "p1[s2(c1)]", "the fresh categories entry is reused, not rebuilt"
    assert site.builds[3:] == ["page", "sidebar"]


def test_the_entry_records_the_tags_of_what_it_read() -> None:
    cache = Cache("memory://", namespace="dep")
    site = Site(cache)
    site.page()
    stored = cache.codec.loads(cache.store.get(cache.key("page")), cache.key("page"))
    assert set(Entry.from_wire(stored).tags) == {"categories", "sidebar"}  # type: ignore[union-attr]


def test_plain_gets_and_cached_functions_inside_a_build_propagate(url: str) -> None:
    cache = Cache(url, namespace="dep")
    data = {"price": 10}

    @cache.cached(ttl=60, tags=lambda sku: [f"product:{sku}"])
    def price(sku: str) -> int:
        return data["price"]

    cache.get_or_build("banner", lambda: "sale!", ttl=60, tags=["banner"])
    rendered = []

    def page() -> str:
        rendered.append(1)
        return f"{cache.get('banner')} {price('a1')}"

    assert cache.get_or_build("page", page, ttl=60) == "sale! 10"
    data["price"] = 12
    cache.invalidate("product:a1")
    assert cache.get_or_build("page", page, ttl=60) == "sale! 12"
    cache.invalidate("banner")  # the banner was only read with a plain get
    cache.get_or_build("page", page, ttl=60)
    assert len(rendered) == 3


def test_async_builds_propagate_across_awaits_and_tasks(url: str) -> None:
    cache = Cache(url, namespace="dep")
    data = {"a": "a1", "b": "b1"}

    async def part(name: str) -> str:
        async def build() -> str:
            await asyncio.sleep(0.01)
            return data[name]

        return await cache.aget_or_build(name, build, ttl=60, tags=[f"part:{name}"])

    async def page() -> str:
        async def build() -> str:
            a, b = await asyncio.gather(part("a"), part("b"))  # each in a task of its own
            return f"{a}+{b}"

        return await cache.aget_or_build("apage", build, ttl=60)

    assert asyncio.run(page()) == "a1+b1"
    data["b"] = "b2"
    cache.invalidate("part:b")
    assert asyncio.run(page()) == "a1+b2"
    assert asyncio.run(page()) == "a1+b2"


def test_a_background_page_rebuild_rebuilds_its_stale_fragment_in_place(url: str) -> None:
    cache = Cache(url, namespace="dep")
    site = Site(cache, refresh="background")
    site.page()
    site.data["categories"] = "c2"
    cache.invalidate("categories")
    assert site.page() == "p1[s1(c1)]", "the stale page is served at once"
    assert cache.refresher.wait_idle(10)  # type: ignore[attr-defined]
    # One refresher job rebuilt the page; sidebar and categories were rebuilt inside
    # it, in its thread, though they ask for background refreshes themselves.
    assert site.builds[3:] == ["page", "sidebar", "categories"]
    assert site.page() == "p1[s1(c2)]"
    assert len(site.builds) == 6


def test_a_nested_entry_only_had_stale_leaves_the_outer_entry_stored_stale(url: str) -> None:
    cache = Cache(url, namespace="dep")
    site = Site(cache)
    site.page()
    site.data.update(categories="c2", page="p2")
    cache.invalidate("categories")
    # Another process is rebuilding the categories right now: it holds their lock.
    give_back = workers.hold_build_lock(cache, "categories", 30)
    assert site.page() == "p2[s1(c1)]", "built with the stale categories"
    assert site.builds[3:] == ["page", "sidebar"]
    stored = cache.codec.loads(cache.store.get(cache.key("page")), cache.key("page"))
    assert not Entry.from_wire(stored).is_fresh(cache.clock.time_ms()), "stored already stale"  # type: ignore[union-attr]
    assert give_back()
    time.sleep(BUSY_SECONDS)  # this process trusts a lock it found held for that long
    assert site.page() == "p2[s1(c2)]", "so the next request rebuilt it"
    assert site.page() == "p2[s1(c2)]" and len(site.builds) == 8


def test_an_early_refresh_lost_to_another_process_is_no_staleness() -> None:
    cache = Cache("memory://", namespace="dep")
    cache.get_or_build("inner", lambda: "i1", ttl=60, tags=["t"])
    lock = Lock(cache.shared, cache.parts.derived_key("l", cache.key("inner")), 30)
    assert lock.try_acquire()

    def outer() -> str:
        # early_refresh with a huge beta picks the fresh entry; the lock is taken.
        inner = cache.get_or_build("inner", lambda: "i2", ttl=60, early_refresh=1e12)
        return f"o({inner})"

    key = cache.key("inner")
    entry = Entry("i1", cache.clock.time_ms() + 60_000, 50, {})  # fresh, built in 50 ms
    cache.store.set(key, cache.codec.dumps(entry.to_wire(), key))
    assert cache.get_or_build("outer", outer, ttl=60) == "o(i1)"
    stored = cache.codec.loads(cache.store.get(cache.key("outer")), cache.key("outer"))
    assert Entry.from_wire(stored).is_fresh(cache.clock.time_ms())  # type: ignore[union-attr]


class CountingStore(MemoryStore):
    """A real in-process store that counts the requests a caller sends."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    def get(self, key: str) -> bytes | object:
        self.requests += 1
        return super().get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        self.requests += 1
        return super().get_many(keys)


def test_a_hit_on_a_composite_entry_is_one_request_once_its_tags_are_known() -> None:
    store = CountingStore()
    Site(Cache(store, namespace="dep")).page()
    fresh_process = Site(Cache(store, namespace="dep"))  # knows nothing of the page yet
    store.requests = 0
    assert fresh_process.page() == "p1[s1(c1)]"
    assert store.requests == 2, "the first read learns the page's other tags"
    store.requests = 0
    assert fresh_process.page() == "p1[s1(c1)]"
    assert store.requests == 1, "then the entry and all its tags come in one request"
    assert fresh_process.builds == []


def test_threads_following_a_leader_inherit_what_its_value_depends_on() -> None:
    cache = Cache("memory://", namespace="dep")
    go = threading.Barrier(4)
    release = threading.Event()

    def inner() -> str:
        release.wait(5)
        return "shared"

    def outer(n: int) -> str:
        def build() -> str:
            go.wait()
            return cache.get_or_build("inner", inner, ttl=60, tags=["inner"]) + str(n)

        return cache.get_or_build(("outer", n), build, ttl=60)

    threads = [threading.Thread(target=outer, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    threading.Timer(0.3, release.set).start()  # once every thread waits on the inner build
    for thread in threads:
        thread.join()
    assert cache.counts.local()["coalesced"] >= 1, "some threads followed the inner leader"
    cache.invalidate("inner")
    for n in range(4):
        assert cache.get(("outer", n)) is NO_VALUE, f"outer {n} recorded the inner tag"


def test_a_server_leaving_the_pool_does_not_hide_bumps_of_recorded_tags(memcached_nodes) -> None:
    """Pages recorded their fragments' tag copies on 4 servers; the pool shrinks to 3.

    A copy recorded on the server that left, or one no longer any server's copy,
    is moved by no bump any more: such pages must count as changed.
    """
    from tests.servers import memcached_process

    nodes = [memcached_process().start() for _ in range(4)]
    try:
        four = Cache("memcached://" + ",".join(n.address for n in nodes), namespace="topo")
        pages = [(f"page{i}", f"fragment{i}", f"tag{i}") for i in range(24)]
        for page, fragment, tag in pages:
            four.get_or_build(
                page, lambda f=fragment, t=tag: four.get_or_build(f, lambda: "old", tags=[t])
            )
        three = Cache("memcached://" + ",".join(n.address for n in nodes[:3]), namespace="topo")
        three.invalidate(*(tag for _, _, tag in pages))
        for page, _fragment, _tag in pages:
            assert three.get(page) is NO_VALUE, f"{page} was read as current after the bump"
            assert three.get_or_build(page, lambda: "new") == "new", f"{page} was not rebuilt"
    finally:
        for node in nodes:
            node.kill()
