"""``mcache.read_primary()``: what a rebuild set off by a recent bump tells database routers.

The database side (two real databases, one lagging) is tested with Django
(``tests/dj/test_fresh_reads.py``) and SQLAlchemy (``tests/fl/test_fresh_reads.py``);
here, when the core says "primary", on every path a build takes.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

import mcache
from mcache import Cache, FakeClock
from mcache.engine.fresh_reads import ChangeTimes
from mcache.errors import ConfigError


@pytest.fixture(params=["memory", "memcached", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")  # type: ignore[no-any-return]


def lagging_cache(url: str, clock: FakeClock, **options: object) -> Cache:
    return Cache(
        url, namespace=f"rp{id(clock)}", clock=clock, replication_lag=2, jitter=0, **options
    )  # type: ignore[arg-type]


def primary_seen(cache: Cache, key: str, tags: list[str]) -> bool | None:
    """Rebuild or read ``key``; return what ``read_primary()`` said in its build, if any."""
    seen: list[bool] = []
    cache.get_or_build(key, lambda: seen.append(mcache.read_primary()) or "v", tags=tags)
    return seen[0] if seen else None


def test_a_rebuild_says_primary_while_the_bump_behind_it_is_younger_than_the_lag(url: str) -> None:
    clock = FakeClock()
    cache = lagging_cache(url, clock)
    assert primary_seen(cache, "k", ["t"]) is True, "a tag first seen counts as changed now"
    clock.advance(3)
    cache.invalidate("t")
    clock.advance(1.5)
    assert primary_seen(cache, "k", ["t"]) is True
    clock.advance(3)
    cache.invalidate("t")
    clock.advance(2.5)
    assert primary_seen(cache, "k", ["t"]) is False, "the replica had the lag to catch up"
    assert not mcache.read_primary()


def test_only_while_the_lag_lasts_even_inside_a_long_build() -> None:
    clock = FakeClock()
    cache = lagging_cache("memory://", clock)
    answers = []

    def slow() -> str:
        answers.append(mcache.read_primary())
        clock.advance(2.5)
        answers.append(mcache.read_primary())
        return "v"

    cache.get_or_build("k", slow, tags=["t"])
    assert answers == [True, False]


def test_a_nested_entrys_tag_counts_for_the_page_that_recorded_it(url: str) -> None:
    clock = FakeClock()
    cache = lagging_cache(url, clock)
    seen: list[bool] = []

    def page() -> str:
        fragment = cache.get_or_build("fragment", lambda: "f", tags=["fragment"])
        seen.append(mcache.read_primary())
        return fragment

    cache.get_or_build("page", page)
    clock.advance(3)
    cache.invalidate("fragment")
    cache.get_or_build("page", page)
    clock.advance(3)
    cache.invalidate("unrelated")
    cache.delete("page")
    cache.get_or_build("page", page)
    assert seen == [False, True, False], "a page missing knows no tags; a stale one does"


def test_off_by_default_and_when_the_lag_is_zero() -> None:
    clock = FakeClock()
    assert primary_seen(Cache("memory://", clock=clock), "k", ["t"]) is False
    assert primary_seen(Cache("memory://", clock=clock, replication_lag=0), "k", ["t"]) is False
    with pytest.raises(ConfigError, match="replication_lag must be"):
        Cache("memory://", replication_lag=-1)


def test_the_answer_follows_background_rebuilds_and_async_builds() -> None:
    clock = FakeClock()
    cache = lagging_cache("memory://", clock, refresh="background", stale_ttl=60)
    seen: list[bool] = []
    done = threading.Event()

    def build() -> str:
        seen.append(mcache.read_primary())
        done.set()
        return "v"

    cache.get_or_build("k", build, tags=["t"], ttl=10)
    clock.advance(3)
    cache.invalidate("t")
    done.clear()
    assert cache.get_or_build("k", build, tags=["t"], ttl=10) == "v", "stale, served at once"
    assert done.wait(5)
    assert seen == [True, True], "the refresher's thread read the primary"

    async def abuild() -> str:
        seen.append(await asyncio.to_thread(mcache.read_primary))
        return "a"

    clock.advance(3)
    cache.invalidate("t")
    asyncio.run(cache.aget_or_build("a", abuild, tags=["t"]))
    assert seen[-1] is True


class Queue:
    """Keeps the jobs a queue would carry (see :class:`mcache.refreshers.Refresher`)."""

    def __init__(self) -> None:
        self.jobs: list[str] = []

    def __call__(self, job) -> bool:  # type: ignore[no-untyped-def]
        self.jobs.append(job.hand_off(30))
        return True


def rebuilt_price(sku: str) -> str:
    return f"{sku}: {mcache.read_primary()}"


def test_a_queued_rebuild_carries_the_version_to_its_worker() -> None:
    from mcache.engine.rebuild import run

    clock = FakeClock()
    queue = Queue()
    cache = lagging_cache("memory://", clock, refresh="background", stale_ttl=60)
    cache.refresher = queue
    cache.locator = "tests.core.test_fresh_reads:queued_cache:"
    _QUEUED.append(cache)
    price = cache.cached(ttl=10, tags=["prices"])(rebuilt_price)
    assert price("a1") == "a1: True"
    clock.advance(11)
    cache.invalidate("prices")
    assert price("a1") == "a1: True", "stale, while the job waits"
    (payload,) = queue.jobs
    assert json.loads(payload)["newest"] == cache.tags.read(["prices"], "x")["prices"]
    assert run(payload) == "built"
    assert price("a1") == "a1: True", "the worker read the primary"


_QUEUED: list[Cache] = []


def queued_cache(_: str) -> Cache:
    return _QUEUED[-1]


def test_change_times_know_this_process_bumps_at_once_and_cache_the_rest() -> None:
    clock = FakeClock()
    cache = Cache("memory://", clock=clock)
    changes = ChangeTimes(2000, clock)
    cache.invalidate("model:a")
    clock.advance(3)
    assert not changes.changed_within_lag(cache.tags, "model:a")
    cache.invalidate("model:a")
    assert changes.changed_within_lag(cache.tags, "model:a"), "its own bump, despite the local copy"
    other = Cache("memory://", namespace="other", clock=clock)
    assert not changes.changed_within_lag(other.tags, "model:a"), "another cache's bump"
    assert changes.changed_within_lag(None, "model:b"), "unknown: the primary"
