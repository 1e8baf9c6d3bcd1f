"""Fresh times spread (``jitter``): entries built together do not all expire together.

Measured the way a reader meets it: 2,000 entries built at one instant, then the
share still fresh (``get`` answers it) at each tenth of the spread. Uniform over
the documented range, within 5 points at each step (about 4.5 standard errors).
"""

from __future__ import annotations

import pytest

from mcache import Cache, FakeClock
from mcache.errors import ConfigError
from mcache.stores import MemoryStore

ENTRIES = 2000
TTL = 100


def fresh_share_over_time(jitter: object, times: list[float]) -> list[float]:
    clock = FakeClock(1_800_000_000.0)
    cache = Cache(MemoryStore(clock=clock), namespace="j", clock=clock, jitter=jitter)
    for index in range(ENTRIES):
        cache.get_or_build(("entry", index), lambda: "v", ttl=TTL)
    shares, elapsed = [], 0.0
    for at in times:
        clock.advance(at - elapsed)
        elapsed = at
        fresh = sum(cache.get(("entry", i), None) is not None for i in range(ENTRIES))
        shares.append(fresh / ENTRIES)
    return shares


@pytest.mark.parametrize(
    ("jitter", "earliest", "latest"),
    [
        (0.1, 90, 100),  # the default: shortened by up to 10%, never past the ttl
        (0.3, 70, 100),
        ((0.2, 0.2), 80, 120),  # ±20%, as the 2R2L article advises
        ((0.0, 0.1), 100, 110),
    ],
)
def test_fresh_times_spread_uniformly_over_the_documented_range(
    jitter: object, earliest: float, latest: float
) -> None:
    width = latest - earliest
    times = [earliest - 0.01] + [earliest + width * k / 10 for k in range(1, 10)] + [latest]
    shares = fresh_share_over_time(jitter, times)
    assert shares[0] == 1.0, "none expires before the range"
    assert shares[-1] == 0.0, "none is fresh past it"
    for k, share in enumerate(shares[1:-1], 1):
        assert abs(share - (1 - k / 10)) <= 0.05, (k, shares)


def test_no_jitter_expires_every_entry_at_its_ttl() -> None:
    assert fresh_share_over_time(0, [TTL - 0.01, TTL]) == [1.0, 0.0]


@pytest.mark.parametrize("jitter", [1.0, -0.1, (0.2,), (0.2, 1.5), ("0.2", 0.2), True])
def test_a_jitter_that_is_not_a_spread_fails_naming_both_forms(jitter: object) -> None:
    with pytest.raises(ConfigError, match=r"jitter must be a fraction in \[0, 1\).*\(0\.2, 0\.2\)"):
        Cache("memory://", jitter=jitter)
