"""Counts shown blurred (``noise=``): within the fraction asked, fresh at every read, never
below 1 for a count above 0, exact by default; on a real memcached."""

from __future__ import annotations

import random
import statistics

import pytest

from mcache import Cache, FakeClock
from mcache.features.visitors import blurred
from mcache.randomness import RandomSource, system_random

READS = 200


@pytest.fixture
def counted(memcached_url: str) -> tuple[Cache, FakeClock]:
    """A cache on memcached whose online counter ``site`` holds 1,000 complete visits."""
    clock = FakeClock(1_800_000_000.0)  # a multiple of 60: a slot starts here
    cache = Cache(memcached_url, namespace="noise", clock=clock)
    online = cache.online_counter("site", window=300, slots=6)
    for _ in range(1000):
        online.hit()
    clock.advance(60)  # the slot is complete: counted
    return cache, clock


def test_an_online_count_is_blurred_within_its_noise_at_every_read(
    counted: tuple[Cache, FakeClock],
) -> None:
    cache, _ = counted
    blurred_counter = cache.online_counter("site", window=300, slots=6, noise=0.05)
    shown = [blurred_counter.count() for _ in range(READS)]
    assert all(950 <= count <= 1050 for count in shown), (min(shown), max(shown))
    assert len(set(shown)) > 20, "a fresh draw at every read"
    assert abs(statistics.mean(shown) - 1000) < 15, "centred on the count"
    assert cache.online_counter("site", window=300, slots=6).count() == 1000, "exact: the default"


def test_visits_per_period_are_blurred_too(memcached_url: str) -> None:
    clock = FakeClock(1_800_000_000.0)  # a multiple of 3600: a period starts here
    cache = Cache(memcached_url, namespace="noise-visits", clock=clock)
    visits = cache.visitor_counter("home", period=3600, noise=0.1)
    returned = [visits.hit() for _ in range(400)]
    assert all(count >= 1 for count in returned) and returned[-1] in range(360, 441)
    shown = {visits.value() for _ in range(READS)}
    assert shown <= set(range(360, 441)) and len(shown) > 10
    clock.advance(3600)
    assert {visits.previous() for _ in range(READS)} <= set(range(360, 441))
    exact = cache.visitor_counter("home", period=3600)
    assert (exact.value(), exact.previous()) == (0, 400)


def test_a_small_count_moves_and_a_positive_one_never_shows_none() -> None:
    assert {blurred(3, 0.05, system_random) for _ in range(READS)} == {2, 3, 4}, "±1 at the least"
    assert {blurred(1, 0.5, system_random) for _ in range(READS)} == {1, 2}, (
        "never 0 for a visitor online"
    )
    assert {blurred(0, 0.5, system_random) for _ in range(READS)} == {0}
    assert {blurred(7, 0.0, system_random) for _ in range(READS)} == {7}


def test_the_noise_is_drawn_from_the_systems_source_not_the_seeded_one() -> None:
    """Seeding ``random`` (as a test or another library may) does not fix the draws; an
    unseeded cache's source is the system's. Only a source seeded on purpose replays them."""
    draws = RandomSource()
    random.seed(64)
    first = [blurred(10_000, 0.05, draws) for _ in range(20)]
    random.seed(64)
    assert [blurred(10_000, 0.05, draws) for _ in range(20)] != first
    replayed = [[blurred(10_000, 0.05, RandomSource(64)) for _ in range(20)] for _ in range(2)]
    assert replayed[0] == replayed[1]


@pytest.mark.parametrize("noise", [-0.01, 1, 1.5, "5%", True, None])
def test_a_noise_that_is_no_fraction_is_refused_naming_it(noise: object) -> None:
    cache = Cache("memory://")
    with pytest.raises(ValueError, match=r"noise must be a fraction from 0 .* e\.g\. 0\.05"):
        cache.online_counter("site", noise=noise)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="noise must be a fraction"):
        cache.visitor_counter("home", noise=noise)  # type: ignore[arg-type]
