"""``aget_or_build`` under real concurrency: the async driver held to what the sync one does.

The read path is written once (:mod:`mcache.engine.build`); these tests run the
sync suite's checks through the async driver on the stores that have an async
twin: memory, memcached and Redis (one server, Sentinel, Cluster). Stampedes
are processes (threads, each with its own event loop, for the in-process
memory store) running asyncio tasks together; builds are counted in the
store, so a build anywhere is seen.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any

import pytest

from mcache import NO_VALUE, Cache
from mcache.testing.store_contract import run_together
from tests.core import workers
from tests.core.test_async_stores import forbid_thread_hops
from tests.core.test_get_or_build import (
    BUILD,
    PROCESSES,
    STALE_BUILD,
    builds,
    put_stale,
    run_stampede,
)
from tests.core.test_get_or_build import THREADS as TASKS


@pytest.fixture(
    params=["memory", "memcached", "memcached_text", "redis", "sentinel", "cluster", "postgres"]
)
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def cache(url: str) -> Cache:
    """The cache the stampede's store is checked through (for memory, the one it runs on)."""
    return Cache(url, namespace="ast")


def run_astampede(
    cache: Cache, url: str, key: str, options: dict[str, Any], build: float = BUILD
) -> list[Any]:
    """8 processes (threads, for memory) × 8 asyncio tasks call aget_or_build(key) at once.

    Each process makes its own cache from ``url``; the in-process memory store
    is only shared through ``cache`` itself, so its threads run on that.
    """
    if not url.startswith("memory:"):
        return run_stampede(url, key, options, asynchronous=True, namespace="ast", build=build)
    ready: queue.Queue[int] = queue.Queue()
    results: queue.Queue[list[tuple[Any, float]]] = queue.Queue()
    go = threading.Event()
    runners = [
        threading.Thread(
            target=workers.astampede_on,
            args=(cache, key, TASKS, build, options, ready, go, results),
        )
        for _ in range(PROCESSES)
    ]
    outcomes = run_together(runners, ready, go, results)
    assert len(outcomes) == PROCESSES * TASKS
    return outcomes


# -- stampedes ---------------------------------------------------------------------------------


def test_async_cold_stampede_builds_once(url: str, cache: Cache) -> None:
    outcomes = run_astampede(cache, url, "hot", {"ttl": 60})
    values = {value for value, _ in outcomes}
    assert builds(cache) == 1
    assert len(values) == 1 and next(iter(values)).startswith("built by pid")
    assert max(seconds for _, seconds in outcomes) < 5 * BUILD, "the waiters saw the entry soon"


def test_async_stale_stampede_sync_builds_once(url: str, cache: Cache) -> None:
    put_stale(cache, "hot", "old")
    outcomes = run_astampede(cache, url, "hot", {"ttl": 60}, build=STALE_BUILD)
    values = [value for value, _ in outcomes]
    assert builds(cache) == 1
    assert values.count("old") == len(values) - 1, "everyone but the rebuilder got stale"
    assert cache.get_or_build("hot", lambda: "unused").startswith("built by pid")


def test_async_stale_stampede_background_serves_everyone_stale(url: str, cache: Cache) -> None:
    put_stale(cache, "hot", "old")
    options = {"ttl": 60, "refresh": "background", "linger": STALE_BUILD + 1}
    outcomes = run_astampede(cache, url, "hot", options, build=STALE_BUILD)
    assert {value for value, _ in outcomes} == {"old"}, "the lock winner too returned at once"
    assert max(seconds for _, seconds in outcomes) < STALE_BUILD, "nobody waited for the rebuild"
    assert builds(cache) == 1
    assert cache.get_or_build("hot", lambda: "unused").startswith("built by pid")


# -- locks -------------------------------------------------------------------------------------


def test_an_async_waiter_takes_over_from_a_dead_lock_holder(url: str) -> None:
    cache = Cache(url, namespace="alk")
    workers.hold_build_lock(cache, "job", timeout=1)  # its holder died: nobody renews it

    async def rebuilt() -> str:
        return "rebuilt"

    started = time.monotonic()
    value = asyncio.run(cache.aget_or_build("job", rebuilt, wait=5, lock_timeout=2))
    waited = time.monotonic() - started
    assert value == "rebuilt"
    assert 0.5 < waited < 5.0, "it waited for the lock to expire, and no longer than its wait"
    assert not workers.build_lock_held(cache, "job"), "the new builder released its lock"
    assert cache.get_or_build("job", lambda: "again") == "rebuilt"


def test_an_async_build_error_serves_stale_and_frees_the_lock(url: str, caplog) -> None:
    cache = Cache(url, namespace="aer")
    put_stale(cache, "k", "stale value")

    async def failing() -> str:
        raise RuntimeError("database timeout")

    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert asyncio.run(cache.aget_or_build("k", failing)) == "stale value"
    assert "database timeout" in caplog.text
    assert not workers.build_lock_held(cache, "k")


def test_an_async_build_error_without_stale_raises_and_leaves_nothing(url: str) -> None:
    cache = Cache(url, namespace="aer")

    async def failing() -> str:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        asyncio.run(cache.aget_or_build("k", failing))
    assert not workers.build_lock_held(cache, "k")
    assert cache.store.get(cache.key("k")) is NO_VALUE, "no placeholder left behind"
    assert cache.get_or_build("k", lambda: "ok") == "ok"


# -- tags --------------------------------------------------------------------------------------


def test_a_tag_bumped_during_an_async_build_leaves_the_entry_stale(url: str) -> None:
    cache = Cache(url, namespace="atg")
    calls = []

    async def build() -> str:
        calls.append(1)
        if len(calls) == 1:
            await cache.ainvalidate("posts")  # an author publishes while the page is built
        return f"page v{len(calls)}"

    async def visits() -> list[str]:
        return [await cache.aget_or_build("home", build, tags=["posts"]) for _ in range(3)]

    assert asyncio.run(visits()) == ["page v1", "page v2", "page v2"]


def test_ainvalidate_reaches_only_tagged_entries_and_lost_tags_count_as_bumped(url: str) -> None:
    cache = Cache(url, namespace="atg", near_ttl=None)  # a tag lost behind its back: at once

    async def value(v: str) -> str:
        return v

    async def visits() -> list[Any]:
        seen = [
            await cache.aget_or_build("a", lambda: value("a1"), tags=["x"]),
            await cache.aget_or_build("b", lambda: value("b1"), tags=["y"]),
            await cache.ainvalidate("x"),
            await cache.aget_or_build("a", lambda: value("a2"), tags=["x"]),
            await cache.aget_or_build("b", lambda: value("b2"), tags=["y"]),
        ]
        cache.store.delete_many([key for _label, key in cache.tags.everywhere("y")])
        seen.append(await cache.aget_or_build("b", lambda: value("b3"), tags=["y"]))
        return seen

    a1, b1, versions, a2, b_after, b_lost = asyncio.run(visits())
    assert (a1, b1, a2, b_after, b_lost) == ("a1", "b1", "a2", "b1", "b3")
    assert set(versions) == {"x"} and versions["x"] > 0


# -- no thread hops ------------------------------------------------------------------------------


def test_an_async_miss_rebuild_and_invalidation_make_no_thread_hop(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Locks, leases, writes, releases and tag bumps are awaited on the loop, like reads."""
    cache = Cache(url, namespace="ahop")
    put_stale(cache, "stale", "old")
    hops = forbid_thread_hops(monkeypatch)

    async def value(v: str) -> str:
        return v

    async def visits() -> list[Any]:
        return [
            await cache.aget_or_build("page", lambda: value("built"), ttl=60, tags=["t"]),
            await cache.aget_or_build("stale", lambda: value("rebuilt"), ttl=60),
            await cache.ainvalidate("t"),
            await cache.aget_or_build("page", lambda: value("again"), ttl=60, tags=["t"]),
        ]

    built, rebuilt, versions, again = asyncio.run(visits())
    assert (built, rebuilt, again) == ("built", "rebuilt", "again")
    assert set(versions) == {"t"}
    assert hops == []
    assert cache.get_or_build("page", lambda: "unused", tags=["t"]) == "again", "it was stored"
