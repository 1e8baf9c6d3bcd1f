"""The awaitable plain operations (``aget``, ``aset``, …): the sync ones' steps, awaited.

On a store with an async twin (memory, Redis) none of them hands work to a
thread; each answers what its sync twin answers; a store that is down makes
them fail open, as the sync ones do.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcache import Cache
from tests.core.test_async_stores import forbid_thread_hops
from tests.servers import free_port


@pytest.fixture(params=["memory", "redis"])
def cache(request: pytest.FixtureRequest) -> Cache:
    if request.param == "memory":
        return Cache("memory://", namespace="async-plain")
    cache = Cache(request.getfixturevalue("redis_url"), namespace="async-plain")
    cache.clear()
    return cache


def run(cache: Cache, work: Any) -> Any:
    """Run ``work()`` on a new loop, closing the twin's client for that loop afterwards."""

    async def main() -> Any:
        try:
            return await work()
        finally:
            twin = cache.store.asynchronous()
            if twin is not None:
                await twin.close()

    return asyncio.run(main())


def test_every_plain_operation_answers_as_its_sync_twin_without_a_thread(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops = forbid_thread_hops(monkeypatch)

    async def work() -> list[Any]:
        return [
            await cache.aset("a", {"x": 1}, 60),
            await cache.aget("a"),
            await cache.aget("missing", "default"),
            await cache.aadd("a", "other", 60),
            await cache.aadd("b", 2, 60),
            await cache.aget_many(["a", "b", "missing"]),
            await cache.aset_many({"c": 3, ("t", 1): "tuple"}, 60),
            await cache.aget(("t", 1)),
            await cache.aincr("b", 5),
            await cache.aincr("b", -3),
            await cache.aincr("missing", 1),
            await cache.atouch("c", 120),
            await cache.atouch("missing", 120),
            await cache.adelete("c"),
            await cache.adelete("c"),
            await cache.adelete_many(["a", "b"]),
            await cache.aget_many(["a", "b"]),
        ]

    assert run(cache, work) == [
        True, {"x": 1}, "default", False, True, {"a": {"x": 1}, "b": 2}, [], "tuple",
        7, 4, None, True, False, True, False, None, {},
    ]  # fmt: skip
    assert hops == []


def test_an_awaited_get_checks_tags_and_misses_after_an_invalidation(
    cache: Cache, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.get_or_build("tagged", lambda: "built", ttl=60, tags=["articles"])
    hops = forbid_thread_hops(monkeypatch)

    async def work() -> tuple[Any, Any]:
        before = await cache.aget("tagged")
        cache.invalidate("articles")
        return before, await cache.aget("tagged", "gone")

    assert run(cache, work) == ("built", "gone")
    assert hops == []


def test_aclear_flushes_and_aadd_replaces_a_stale_entry(cache: Cache) -> None:
    cache.get_or_build("stale", lambda: "old", ttl=60, tags=["t"])
    cache.invalidate("t")

    async def work() -> tuple[Any, Any, Any]:
        replaced = await cache.aadd("stale", "new", 60)
        value = await cache.aget("stale")
        await cache.aclear()
        return replaced, value, await cache.aget("stale", "flushed")

    assert run(cache, work) == (True, "new", "flushed")


def test_awaited_operations_fail_open_when_the_store_is_down() -> None:
    cache = Cache(f"redis://127.0.0.1:{free_port()}/0", namespace="down")

    async def work() -> list[Any]:
        return [
            await cache.aget("k", "default"),
            await cache.aset("k", 1, 60),
            await cache.aadd("k", 1, 60),
            await cache.aincr("k"),
            await cache.adelete("k"),
            await cache.aget_many(["k"]),
            await cache.aset_many({"k": 1}, 60),
        ]

    assert run(cache, work) == ["default", False, False, None, False, {}, ["k"]]
    assert cache.counts.local()["store_errors"] >= 7
