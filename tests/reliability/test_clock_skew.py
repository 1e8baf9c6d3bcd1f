"""Two hosts whose clocks are 2 s apart share tags: no invalidation is ever undone.

Each bump moves a tag to ``max(now, old + 1)`` ms, so a host running late
still moves it forward; an entry records the versions it read before building,
so an entry built before a bump, by either host, is never fresh after it.
"""

from __future__ import annotations

import random

import pytest

from mcache import Cache, FakeClock

BASE = 2_000_000_000.0


@pytest.mark.parametrize("server", ["memcached", "redis"])
def test_bumps_from_skewed_clocks_never_revalidate_an_entry(server: str, request) -> None:
    url = request.getfixturevalue(f"{server}_url")
    clocks = [FakeClock(BASE + 2.0), FakeClock(BASE - 2.0)]  # ±2 s around the true time
    hosts = [Cache(url, namespace="skew", clock=clock, jitter=0) for clock in clocks]
    rng = random.Random(3)
    seen: list[int] = []
    generation = 0  # bumped every invalidation: what a fresh build returns
    for _step in range(200):
        for clock in clocks:
            clock.advance(rng.choice([0.0, 0.001, 0.5]))
        host = rng.choice(hosts)
        if rng.random() < 0.3:
            generation += 1
            seen.append(host.invalidate("posts")["posts"])
        else:
            got = host.get_or_build("page", lambda g=generation: g, ttl=3600, tags=["posts"])
            assert got == generation, "an entry built before the last bump was served as fresh"
    assert seen == sorted(seen) and len(set(seen)) == len(seen), "versions strictly increase"
