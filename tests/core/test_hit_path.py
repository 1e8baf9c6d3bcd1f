"""The lean hit path: what a hit skips (options rebuilt, the read path's steps) and what it
still does (check the options, count, trace, tell observers, respect ``may_store``).

The near hits here are on a real memcached: the facade answers them before any steps are
made, and each test checks that the answer is the one the full read path would give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcache import Cache, Codec
from mcache.errors import ConfigError
from mcache.observe.events import Observer, Origin
from mcache.sansio.call_record import CallRecord
from tests.memcached_reads import record_reads


def counting(builds: list[int]) -> Callable[[], dict[str, int]]:
    def build() -> dict[str, int]:
        builds.append(1)
        return {"n": len(builds)}

    return build


def near_cache(url: str) -> Cache:
    return Cache(
        url, namespace="lean", near_ttl=60, stats_interval=3600, codec=Codec(signing_key=b"k" * 32)
    )


def test_a_calls_options_are_checked_once_for_each_set_given() -> None:
    cache = Cache("memory://", namespace="opts")
    assert cache.call_options() is cache.defaults
    first = cache.call_options(ttl=60, wait=1)
    assert cache.call_options(ttl=60, wait=1) is first  # looked up, not built again
    assert (first.ttl, first.wait) == (60, 1.0)
    assert cache.call_options(ttl=61, wait=1).ttl == 61


@pytest.mark.parametrize(
    ("good", "bad", "says"),
    [
        ({"ttl": 1}, {"ttl": True}, "ttl"),
        ({"wait": 1}, {"wait": True}, "wait"),
        ({"lock_timeout": 1}, {"lock_timeout": True}, "lock_timeout"),
        ({"stale_wait": 0}, {"stale_wait": False}, "stale_wait"),
    ],
)
def test_a_bool_is_refused_where_the_number_it_equals_was_accepted(
    good: dict[str, Any], bad: dict[str, Any], says: str
) -> None:
    """``True == 1`` as a dict key: the memo must not let ``ttl=True`` pass as ``ttl=1``."""
    cache = Cache("memory://", namespace="bools")
    assert cache.get_or_build("k", lambda: "v", **good) == "v"
    with pytest.raises(ConfigError, match=says):
        cache.get_or_build("k", lambda: "v", **bad)
    with pytest.raises(ConfigError, match=says):
        cache.call_options(**bad)


def test_an_unhashable_option_gets_the_options_own_error() -> None:
    cache = Cache("memory://", namespace="unhashable")
    with pytest.raises(ConfigError, match="ttl must be a number of seconds"):
        cache.get_or_build("k", lambda: "v", ttl=[60])  # type: ignore[arg-type]


def test_early_refresh_true_and_one_are_the_same_beta() -> None:
    cache = Cache("memory://", namespace="beta")
    assert cache.call_options(early_refresh=True).early_refresh == 1.0
    assert cache.call_options(early_refresh=1).early_refresh == 1.0
    assert cache.call_options(early_refresh=False).early_refresh == 0.0


def test_a_near_hit_still_checks_the_calls_options(memcached_url: str) -> None:
    cache = near_cache(memcached_url)
    builds: list[int] = []
    for _ in range(3):
        assert cache.get_or_build("page", counting(builds), tags=["t"], ttl=60) == {"n": 1}
    with pytest.raises(ConfigError, match="refresh"):
        cache.get_or_build("page", counting(builds), tags=["t"], refresh="later")
    assert builds == [1]


def test_near_hits_are_counted_and_hand_out_copies(memcached_url: str) -> None:
    cache = near_cache(memcached_url)
    builds: list[int] = []
    read = lambda: cache.get_or_build("page", counting(builds), tags=("a", "b"))  # noqa: E731
    read()
    read()  # a hit from the store: kept near
    before = cache.stats()["cache"]["hits"]
    first, second = read(), read()
    assert cache.stats()["cache"]["hits"] == before + 2
    assert first == second == {"n": 1} and first is not second
    first["n"] = 99
    assert read() == {"n": 1}  # a caller that changes what it got changes nobody else's
    assert builds == [1]


def test_a_near_hit_is_told_to_observers(memcached_url: str) -> None:
    class Watching(Observer):
        def __init__(self) -> None:
            self.calls: list[tuple[str, list[str]]] = []
            self.counts: list[str] = []

        def counted(self, origin: Origin, event: str, key: str | None, count: int) -> None:
            self.counts.append(event)

        def called(self, origin: Origin, call: CallRecord) -> None:
            self.calls.append((call.operation, list(call.events)))

    cache = near_cache(memcached_url)
    builds: list[int] = []
    cache.get_or_build("page", counting(builds), tags=["t"])
    cache.get_or_build("page", counting(builds), tags=["t"])  # kept near
    watching = Watching()
    cache.observe(watching)
    assert cache.get_or_build("page", counting(builds), tags=["t"]) == {"n": 1}
    assert watching.calls == [("get_or_build", ["hits"])]
    assert watching.counts == ["hits"]


def test_uncommitted_data_is_built_for_its_caller_even_over_a_near_copy(
    memcached_url: str,
) -> None:
    cache = near_cache(memcached_url)
    builds: list[int] = []
    cache.get_or_build("page", counting(builds), tags=["t"])
    cache.get_or_build("page", counting(builds), tags=["t"])  # kept near
    cache.may_store = lambda: False  # as Django's is inside a transaction with writes
    assert cache.get_or_build("page", counting(builds), tags=["t"]) == {"n": 2}
    cache.may_store = lambda: True
    assert cache.get_or_build("page", counting(builds), tags=["t"]) == {"n": 1}
    assert builds == [1, 1]


def test_a_read_inside_uncommitted_data_still_answers_from_the_near_copy(
    memcached_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``peek(key, tags=)`` builds nothing, so uncommitted data has nothing to keep from
    it: it answers from the near copy as it would outside a transaction."""
    cache = near_cache(memcached_url)
    builds: list[int] = []
    cache.get_or_build("page", counting(builds), tags=["t"])
    cache.get_or_build("page", counting(builds), tags=["t"])  # kept near
    reads = record_reads(monkeypatch)
    cache.may_store = lambda: False
    assert cache.peek("page", tags=["t"]) == {"n": 1}
    assert reads == [], "the read went to memcached though the near copy was a hit"


def test_an_async_near_hit_awaits_nothing(memcached_url: str) -> None:
    import asyncio

    cache = near_cache(memcached_url)
    builds: list[int] = []

    async def build() -> dict[str, int]:
        return counting(builds)()

    async def main() -> Any:
        await cache.aget_or_build("page", build, tags=["t"])
        await cache.aget_or_build("page", build, tags=["t"])  # kept near
        read = cache.aget_or_build("page", build, tags=["t"])
        try:
            read.send(None)  # a coroutine that finishes without suspending
        except StopIteration as done:
            return done.value
        raise AssertionError("the near hit suspended: it awaited something")

    assert asyncio.run(main()) == {"n": 1}
    assert builds == [1]
