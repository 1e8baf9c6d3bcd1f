"""Statistics flushes are steps the caller's driver runs, after the call (see
:mod:`mcache.observe.stats`): an async caller's flush awaits the store's async twin, and
no flush is a blocking call of the sync store on the event loop, once every ``interval``
(up to its connect timeout with the server down)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcache import Cache

WRITES = ("incr_many", "incr", "add", "set", "get_many")
"""What a flush sends (the counters, their creation, the flush's time, the minute's sample)."""


def calls_on_the_loop(cache: Cache) -> list[str]:
    """Record each call of the sync store made while an event loop runs on this thread."""
    on_loop: list[str] = []
    store = cache.store
    for name in WRITES:
        original = getattr(store, name)

        def watched(*args: Any, _original: Any = original, _name: str = name) -> Any:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                on_loop.append(_name)
            return _original(*args)

        setattr(store, name, watched)
    return on_loop


@pytest.mark.parametrize("server", ["memcached_url", "redis_url"])
def test_an_async_callers_flush_awaits_the_store_and_never_blocks_its_loop(
    request: pytest.FixtureRequest, server: str
) -> None:
    cache = Cache(request.getfixturevalue(server), namespace="aflush", stats_interval=0.01)
    cache.clear()
    on_loop = calls_on_the_loop(cache)

    async def build() -> str:
        return "the page"

    async def readers() -> None:
        for number in range(30):
            await cache.aget_or_build(("page", number % 3), build, ttl=60)
            await asyncio.sleep(0.005)
        twin = cache.store.asynchronous()
        if twin is not None:
            await twin.close()

    asyncio.run(readers())
    assert on_loop == [], f"the sync store was called on the loop: {on_loop}"
    flushed = cache.stats(flush=False)["cache"]
    assert flushed["flushed_at"] is not None, "the async callers' flushes reached the store"
    assert flushed["builds"] == 3 and flushed["hits"] >= 20


def test_a_sync_callers_flush_runs_after_its_call() -> None:
    """On the caller's thread, once the interval is up: the call's own counts go with it
    (however many flushes a slow machine made before)."""
    cache = Cache("memory://", namespace="sflush", stats_interval=0.01)
    for _ in range(3):
        cache.get_or_build("k", lambda: "v", ttl=60)
    asyncio.run(asyncio.sleep(0.02))
    cache.get_or_build("k", lambda: "v", ttl=60)
    flushed = cache.stats(flush=False)["cache"]
    assert (flushed["builds"], flushed["hits"]) == (1, 3)
