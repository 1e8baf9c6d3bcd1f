"""The composition rules under faults: cancellation, a store that stalls, long builds, near tiers.

Each test drives a real server into the situation (a Redis ``CLIENT PAUSE``,
a task cancelled twice, a build outliving its key's TTL) and checks that no
lock is left behind, no placeholder is stuck, and nothing stale is stored as
fresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from urllib.parse import urlencode

import pytest
import redis

from mcache import NO_VALUE, Cache, Entry
from tests.core import workers
from tests.core.test_get_or_build import put_stale


@pytest.fixture(params=["memcached", "memcached_text", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def test_an_async_build_cancelled_twice_frees_its_lock_and_placeholder(url: str) -> None:
    """anyio (Starlette, FastAPI) cancels again while the first cancellation unwinds."""
    cache = Cache(url, namespace="cx", lock_timeout=2, wait=1)

    async def slow() -> str:
        await asyncio.sleep(10)
        return "never"

    async def main() -> None:
        task = asyncio.create_task(cache.aget_or_build("k", slow, ttl=60))
        while not await asyncio.to_thread(workers.build_lock_held, cache, "k"):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the lease is taken, the build awaits
        task.cancel()
        await asyncio.sleep(0)  # into the cleanup
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())  # the shielded release is finished as the loop shuts down
    deadline = time.monotonic() + 2
    while workers.build_lock_held(cache, "k") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not workers.build_lock_held(cache, "k"), "the lock was left held"
    assert cache.store.get(cache.key("k")) is NO_VALUE, "the placeholder was left behind"
    started = time.monotonic()
    assert cache.get_or_build("k", lambda: "next") == "next"
    assert time.monotonic() - started < 0.5, "the next caller waited for a lock nobody held"


def test_a_fragment_read_failing_inside_a_build_leaves_the_page_stored_stale(
    redis_url: str, redis_node
) -> None:
    """The fragment's tags are unknown when its read failed: the page cannot be fresh."""
    cache = Cache(redis_url + "?socket_timeout=0.2", namespace="fl")
    pauser = redis.Redis(host="127.0.0.1", port=redis_node.port)
    data = {"price": 10}

    def price() -> str:
        return cache.get_or_build("price", lambda: f"price {data['price']}", tags=["product"])

    def page() -> str:
        pauser.execute_command("CLIENT", "PAUSE", 400, "ALL")  # the fragment's read times out
        fragment = price()
        time.sleep(0.5)  # the pause is over: the page's own write goes through
        return f"page with {fragment}"

    assert cache.get_or_build("page", page, ttl=60) == "page with price 10"
    stored = cache.store.get(cache.key("page"))
    assert stored is not NO_VALUE, "the page was stored"
    entry = Entry.from_wire(cache.codec.loads(stored, cache.key("page")))
    assert entry is not None and not entry.is_fresh(cache.clock.time_ms()), "but not as fresh"
    data["price"] = 12
    cache.invalidate("product")
    assert cache.get_or_build("page", lambda: f"page with {price()}", ttl=60) == (
        "page with price 12"
    )
    pauser.close()


@pytest.mark.parametrize("start", ["missing", "stale"])
def test_a_build_outliving_its_keys_ttl_still_stores(url: str, start: str) -> None:
    """ttl + stale_ttl is 2 s, the build takes 3 s: the lease is kept alive with the lock.

    A lock of 2 s (renewed every 0.67 s) rides out a renewer the machine holds up for a
    second; one of 1 s lapsed once under a loaded CI run, and then nothing may be stored."""
    cache = Cache(url, namespace="lt", lock_timeout=2)
    if start == "stale":
        put_stale(cache, "report", "old")  # its store TTL ends soon
        key = cache.key("report")
        entry = Entry("old", cache.clock.time_ms() - 100, 10, {})
        cache.store.set(key, cache.codec.dumps(entry.to_wire(), key), 2)
    builds = []

    def build() -> str:
        builds.append(1)
        time.sleep(3)
        return "report"

    assert cache.get_or_build("report", build, ttl=1, stale_ttl=1) == "report"
    assert cache.get("report") == "report", "stored, and fresh"
    assert cache.get_or_build("report", build, ttl=1, stale_ttl=1) == "report"
    assert builds == [1]


@pytest.mark.parametrize("reader", ["get", "get_or_build"])
def test_a_near_tier_does_not_keep_another_builds_placeholder(
    memcached_url: str, reader: str
) -> None:
    """Process B reads while A builds: once A has written, B must see it, not its mark.

    B's near tier copied A's placeholder when B read the key; kept for
    ``hot_ttl`` (5 s), it would make B miss for that long after A's write.
    """
    near = "tiered://?" + urlencode({"hot": "memory://", "cold": memcached_url})
    a, b = Cache(near, namespace="nt"), Cache(near, namespace="nt")
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(5)
        return "built by a"

    builder = threading.Thread(target=lambda: a.get_or_build("k", slow, ttl=60))
    builder.start()
    assert started.wait(5)
    if reader == "get":  # B's read through its near tier meets the mark
        assert b.get("k") is NO_VALUE
    else:
        assert b.reader.peek(b.key("k")) is None
    release.set()
    builder.join()
    assert b.get("k") == "built by a", "B's near tier still showed the placeholder"
    hits = b.counts.local()["hits"]
    assert b.get_or_build("k", lambda: "never", ttl=60) == "built by a"
    assert b.counts.local()["hits"] == hits + 1


def test_a_fragment_from_another_cache_passes_on_staleness_not_tags(url: str) -> None:
    """Tags live in one store and namespace: a page cannot check another cache's."""
    pages, fragments = Cache(url, namespace="pages"), Cache(url, namespace="fragments")
    fragments.get_or_build("menu", lambda: "menu 1", ttl=60, tags=["menu"])
    renders = []

    def page() -> str:
        renders.append(1)
        return "page with " + fragments.get_or_build("menu", lambda: "menu 2", tags=["menu"])

    assert pages.get_or_build("page", page, ttl=60) == "page with menu 1"
    assert pages.get_or_build("page", page, ttl=60) == "page with menu 1"
    assert renders == [1], "the page is a hit: it recorded no tag it could not check"
    fragments.invalidate("menu")
    workers.hold_build_lock(fragments, "menu", 30)  # another process rebuilds it: only stale
    assert pages.get_or_build("page2", page, ttl=60) == "page with menu 1"
    stored = pages.codec.loads(pages.store.get(pages.key("page2")), pages.key("page2"))
    assert not Entry.from_wire(stored).is_fresh(pages.clock.time_ms()), "staleness crosses"  # type: ignore[union-attr]
    assert workers.build_lock_held(fragments, "menu"), "nobody here took the other's lock"
