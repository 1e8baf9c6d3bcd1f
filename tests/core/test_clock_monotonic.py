"""Waits and build times run on the cache's clock (``Clock.monotonic``), not on the
``time`` module: a clock that runs fast ends a lock wait after its own seconds, and a
build's duration is what that clock says. A clock without ``monotonic`` is refused where
the cache is made."""

from __future__ import annotations

import time

import pytest

from mcache import Cache
from mcache.errors import ConfigError
from tests.clocks import StandingClock


class RacingClock:
    """Wall time as it is; each ``monotonic()`` reading a whole second after the last."""

    def __init__(self) -> None:
        self.readings = 0

    def time(self) -> float:
        return time.time()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        self.readings += 1
        return float(self.readings)


def test_a_lock_wait_ends_after_the_clocks_seconds(memcached_url: str) -> None:
    clock = RacingClock()
    cache = Cache(memcached_url, namespace="mono", clock=clock)
    holder = Cache(memcached_url, namespace="mono")
    with holder.lock("job", timeout=30):
        started = time.monotonic()
        assert not cache.lock("job", wait=5).acquire()
        assert time.monotonic() - started < 1, "5 of the clock's seconds, not 5 real ones"
    assert 2 <= clock.readings <= 7, "the wait read its deadline on the cache's clock"


def test_a_waiter_on_another_build_gives_up_on_the_clocks_time(memcached_text_url: str) -> None:
    clock = RacingClock()
    cache = Cache(memcached_text_url, namespace="mono-build", clock=clock)
    other = Cache(memcached_text_url, namespace="mono-build")
    lock = other.parts.new_lock(other.parts.derived_key("l", cache.key("page")), 30)
    assert lock.try_acquire(), "another process's build holds the key's lock"
    try:
        started = time.monotonic()
        assert cache.get_or_build("page", lambda: "built", ttl=60, wait=30) == "built"
        assert time.monotonic() - started < 5, "30 of the clock's seconds, not 30 real ones"
    finally:
        lock.release()


def test_a_builds_duration_is_measured_on_the_caches_clock() -> None:
    clock = StandingClock()
    cache = Cache("memory://", namespace="mono-ms", clock=clock)

    def build() -> str:
        clock.now += 1.5  # the build takes one and a half of the clock's seconds
        return "v"

    cache.get_or_build("slow", build, ttl=60)
    entry = cache.builder.reader.peek(cache.key("slow"))
    assert entry is not None and entry.build_ms == 1500, "the clock's seconds, not real ones"


class WallClockOnly:
    def time(self) -> float:
        return time.time()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000


def test_a_clock_without_monotonic_is_refused_naming_what_it_lacks() -> None:
    with pytest.raises(ConfigError, match=r"clock must have .* lacks monotonic\(\)"):
        Cache("memory://", clock=WallClockOnly())  # type: ignore[arg-type]
