"""A cache's random draws come from its own source (``cache.parts.random``): seeded, a run
replays (the jitter of its entries, the tokens of its locks); unseeded, no two caches and
no two forked workers share a sequence, and seeding ``random`` fixes nothing."""

from __future__ import annotations

import json
import os
import random

from mcache import Cache, FakeClock
from mcache.randomness import RandomSource
from mcache.stores import MemoryStore

ENTRIES = 50


def expiry_times(draws: RandomSource) -> list[float]:
    """When each of ``ENTRIES`` entries built at one instant stops being fresh (to 0.1 s),
    on a cache drawing from ``draws`` with a ±20% jitter."""
    clock = FakeClock(1_800_000_000.0)
    cache = Cache(MemoryStore(clock=clock), namespace="r", clock=clock, jitter=(0.2, 0.2))
    cache.parts.random = draws
    for index in range(ENTRIES):
        cache.get_or_build(("entry", index), lambda: "v", ttl=100)
    expired: dict[int, float] = {}
    for tenth in range(790, 1210):
        clock.set(1_800_000_000.0 + tenth / 10)
        for index in range(ENTRIES):
            if index not in expired and cache.get(("entry", index), None) is None:
                expired[index] = tenth / 10
    return [expired[index] for index in range(ENTRIES)]


def test_a_seeded_cache_spreads_its_entries_the_same_way_every_run() -> None:
    first = expiry_times(RandomSource(seed=65))
    assert len(set(first)) > ENTRIES // 2, "spread, not all at once"
    assert expiry_times(RandomSource(seed=65)) == first
    assert expiry_times(RandomSource(seed=66)) != first


def test_an_unseeded_cache_is_not_fixed_by_seeding_random() -> None:
    random.seed(65)
    first = expiry_times(RandomSource())
    random.seed(65)
    assert expiry_times(RandomSource()) != first


def test_lock_tokens_come_from_the_caches_source() -> None:
    def tokens(draws: RandomSource) -> list[bytes]:
        cache = Cache("memory://", namespace="t")
        cache.parts.random = draws
        return [cache.lock(f"job-{n}").token for n in range(3)]

    seeded = tokens(RandomSource(seed=7))
    assert seeded == tokens(RandomSource(seed=7)) and len(set(seeded)) == 3
    assert all(len(token) == 32 for token in seeded), "16 bytes, as hex"
    assert tokens(RandomSource()) != tokens(RandomSource()), "unseeded: never shared"


def test_a_forked_worker_draws_a_sequence_of_its_own_unless_seeded() -> None:
    """A pre-forking server's workers must not jitter in step (the herd jitter breaks)."""
    unseeded, seeded = RandomSource(), RandomSource(seed=3)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's draws are checked by the parent
        os.write(write, json.dumps([unseeded.random(), seeded.random()]).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        child_unseeded, child_seeded = json.load(pipe)
    assert child_unseeded != unseeded.random(), "reseeded in the child"
    assert child_seeded == seeded.random(), "a seeded source replays in the child too"
