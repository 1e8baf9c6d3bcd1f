"""The last hour of a cache's counts, a sample a minute, on real servers (see
:mod:`mcache.observe.samples`): the first offer of a minute wins, the ring keeps an hour,
and the differences are what was counted."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from mcache import Cache
from mcache.observe.samples import (
    MINUTES,
    Sample,
    minute_counts,
    offer_sample_steps,
    read_samples,
)
from mcache.sansio.steps import perform, run_steps


def offer_sample(store: Any, key_of: Any, minute: int, totals: dict[str, int]) -> bool:
    """Offer a sample as a flush does, on this thread."""
    return run_steps(offer_sample_steps(store, key_of, minute, totals), perform)


@pytest.fixture(params=["memory", "memcached", "redis"])
def cache(request: pytest.FixtureRequest) -> Cache:
    if request.param == "memory":
        return Cache("memory://", namespace="samples", stats_interval=3600)
    url = request.getfixturevalue(f"{request.param}_url")
    return Cache(url, namespace="samples", stats_interval=3600)


def test_the_first_offer_of_a_minute_is_the_sample(cache: Cache) -> None:
    stats, now = cache.counts, int(time.time() // 60)
    taken = []

    def offer(hits: int) -> None:
        taken.append(offer_sample(stats.store, stats.key, now, {"hits": hits, "misses": 1}))

    offers = [threading.Thread(target=offer, args=(hits,)) for hits in range(8)]
    for thread in offers:
        thread.start()
    for thread in offers:
        thread.join()
    assert taken.count(True) == 1, "one offer of many concurrent ones is taken"
    [sample] = read_samples(stats.store, stats.key, now)
    assert sample.minute == now and set(sample.totals) == {"hits", "misses"}
    assert sample.totals["hits"] in range(8)


def test_a_flush_offers_the_totals_once_a_minute(cache: Cache) -> None:
    for _ in range(3):
        cache.get_or_build("page", lambda: "v")
    cache.counts.flush()
    cache.get_or_build("page", lambda: "v")
    cache.counts.flush()  # the same minute (or, at a minute's turn, the next one's sample)
    samples = read_samples(cache.counts.store, cache.counts.key, int(time.time() // 60))
    first = samples[0]
    assert (first.totals["hits"], first.totals["misses"]) == (2, 1), "the first flush's totals"


def test_the_ring_reads_only_the_last_hour_and_reuses_its_keys(cache: Cache) -> None:
    stats, now = cache.counts, 30_000_000
    offer_sample(stats.store, stats.key, now - MINUTES, {"hits": 1})  # the same key as ``now``
    assert read_samples(stats.store, stats.key, now - 1) == [Sample(now - MINUTES, {"hits": 1})]
    assert read_samples(stats.store, stats.key, now) == [], "an hour old: not in the last hour"
    stats.store.delete(stats.key(f"m{now % MINUTES}"))  # as its expiry would
    assert offer_sample(stats.store, stats.key, now, {"hits": 5})
    assert read_samples(stats.store, stats.key, now) == [Sample(now, {"hits": 5})]


def test_bytes_that_are_no_sample_are_left_out(cache: Cache) -> None:
    stats, now = cache.counts, 30_000_000
    stats.store.set(stats.key(f"m{now % MINUTES}"), b"\x80not json", 0)
    stats.store.set(stats.key(f"m{(now - 1) % MINUTES}"), b'["x", {}]', 0)
    offer_sample(stats.store, stats.key, now - 2, {"hits": 3})
    assert read_samples(stats.store, stats.key, now) == [Sample(now - 2, {"hits": 3})]


def test_minute_counts_are_the_differences_and_skip_a_restart() -> None:
    samples = [
        Sample(100, {"hits": 10, "misses": 5}),
        Sample(101, {"hits": 40, "misses": 15}),
        Sample(104, {"hits": 70, "misses": 18}),  # three minutes later: spread over them
        Sample(105, {"hits": 2, "misses": 1}),  # the server restarted empty
        Sample(106, {"hits": 12, "misses": 1}),
    ]
    minutes = minute_counts(samples)
    assert [(m.minute, m.counts["hits"], m.counts["misses"]) for m in minutes] == [
        (100, 30, 10),
        (101, 10, 1),
        (105, 10, 0),
    ]
    assert minutes[0].hit_ratio == pytest.approx(30 / 40)
    assert minutes[2].hit_ratio == 1.0
    assert minute_counts([Sample(1, {"hits": 0}), Sample(2, {"hits": 0})])[0].hit_ratio is None


def test_the_current_minute_so_far_comes_from_the_totals_now() -> None:
    samples = [Sample(100, {"hits": 10, "misses": 5}), Sample(101, {"hits": 40, "misses": 15})]
    minutes = minute_counts(samples, now={"hits": 43, "misses": 16})
    assert [(m.minute, m.counts["hits"], m.counts["misses"]) for m in minutes] == [
        (100, 30, 10),
        (101, 3, 1),
    ]
    assert minute_counts([Sample(7, {"hits": 1})], now={"hits": 5})[0].counts == {"hits": 4}
    assert minute_counts([], now={"hits": 5}) == []
