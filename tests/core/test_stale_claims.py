"""Claiming a stale entry's rebuild in its read (Redis): one round trip, one rebuild.

The portable path reads the entry, finds it stale, then sends an ``add`` for
its lock: two round trips for the first reader of a stale key in each process.
A store that ``ClaimsStale`` does both in one (a Lua script); these tests hold
it to the same outcome with real processes and threads on a real Redis.
"""

from __future__ import annotations

import multiprocessing
import time

import pytest

from mcache import NO_VALUE, Cache, Entry
from mcache.contract.store import ClaimsStale, StaleClaim
from mcache.stores import RedisStore
from tests.core import workers

KEYS = 10
PROCESSES = 2
THREADS = 8


def claim(lock: str = "lock", window_ms: int = 5000) -> StaleClaim:
    return StaleClaim(lock, b"token-1", 2000, window_ms)


def test_an_entry_in_its_stale_window_is_claimed_once(redis_url: str) -> None:
    store = RedisStore(redis_url)
    store.set("entry", b"stale", 3)  # 3 s left of its stale time (5 s): stale by time
    store.set("tag", b"7", 0)
    first, second = claim(), StaleClaim("lock", b"token-2", 2000, 5000)
    assert store.get_many_claiming(["entry", "tag"], first) == {"entry": b"stale", "tag": b"7"}
    assert first.outcome is True
    assert store.get("lock") == b"token-1", "the lock holds the claimant's token"
    assert 0 < store._redis.pttl("lock") <= 2000
    assert store.get_many_claiming(["entry"], second) == {"entry": b"stale"}
    assert second.outcome is False, "the second reader learns the lock is held"
    assert store.get("lock") == b"token-1"


@pytest.mark.parametrize(
    "ttl", [0, 30], ids=["kept for ever", "more than its stale time left: fresh"]
)
def test_an_entry_outside_its_stale_window_is_not_claimed(redis_url: str, ttl: int) -> None:
    store = RedisStore(redis_url)
    store.set("entry", b"value", ttl)
    bid = claim()
    assert store.get_many_claiming(["entry", "missing"], bid) == {"entry": b"value"}
    assert bid.outcome is None
    assert store.get("lock") is NO_VALUE


def test_a_missing_entry_is_not_claimed(redis_url: str) -> None:
    store = RedisStore(redis_url)
    bid = claim()
    assert store.get_many_claiming(["entry"], bid) == {}
    assert bid.outcome is None and store.get("lock") is NO_VALUE


def test_stores_that_cannot_write_where_they_read_do_not_claim(
    redis_url: str, sentinel_url: str, cluster_url: str
) -> None:
    assert isinstance(RedisStore(redis_url), ClaimsStale)
    assert RedisStore(redis_url).claims_in_read
    replicas = Cache(f"{sentinel_url}?replica_reads=true").store
    assert not replicas.claims_in_read, "a replica cannot take the lock"
    assert Cache(sentinel_url).store.claims_in_read
    cluster = Cache(cluster_url)
    assert not cluster.store.claims_in_read, "an entry and its lock share no slot"
    assert not cluster.builder.writer.bidding.claims


def test_stale_by_time_stampede_claims_in_the_read(redis_url: str) -> None:
    """2 processes × 8 threads read 10 keys that went stale by time since they read them:
    everyone gets the stale value, each key is rebuilt once, and no reader sent an ``add``."""
    cache = Cache(redis_url, namespace="claims")
    build = workers.counting_builder(cache, 0, "the first build")
    context = multiprocessing.get_context("spawn")
    ready, written, go, results = context.Queue(), context.Event(), context.Event(), context.Queue()
    read, all_read = context.Queue(), context.Event()
    processes = [
        context.Process(
            target=workers.stale_by_time,
            args=(redis_url, "claims", KEYS, THREADS, ready, written, go, read, all_read, results),
        )
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=60)  # started: a slow start leaves no entry stale by its first read
    for number in range(KEYS):
        cache.get_or_build(("report", number), build, ttl=2, stale_ttl=60)
    written_at = time.monotonic()
    written.set()
    for _ in processes:
        ready.get(timeout=60)
    time.sleep(max(0.0, written_at + 2.2 - time.monotonic()))  # every entry is stale by time now
    go.set()
    for _ in processes:
        read.get(timeout=60)
    all_read.set()  # the rebuilds may end now: no reader is left to see their value
    outcomes = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    values = [value for found, _ in outcomes for value in found]
    assert len(values) == PROCESSES * THREADS * KEYS
    assert set(values) == {"built by the first build"}, "every reader got the stale value"
    assert [adds for _, adds in outcomes] == [0, 0], "the reads took the locks themselves"
    assert int(cache.store.get(workers.BUILDS_KEY)) == 2 * KEYS, "each key rebuilt once"
    for number in range(KEYS):
        key = cache.key(("report", number))
        assert cache.store.get(cache.parts.derived_key("l", key)) is NO_VALUE, "every lock freed"
        assert cache.get_or_build(("report", number), build).startswith("built by pid")


def test_a_claim_the_entry_did_not_need_is_released(redis_url: str) -> None:
    """The store judges by time left, the entry by its fresh time: if they disagree (a
    writer kept it for less than this reader's stale time), the reader frees the lock."""
    cache = Cache(redis_url, namespace="claims")
    cache.get_or_build("k", lambda: "first", ttl=1, stale_ttl=600)
    time.sleep(1.1)  # what this process saw is stale now: its next read claims
    key = cache.key("k")
    fresh = Entry("rebuilt elsewhere", cache.clock.time_ms() + 30_000, 10, {})
    cache.store.set(key, cache.codec.dumps(fresh.to_wire(), key), 35)  # fresh, 35 s left
    assert cache.get_or_build("k", lambda: "unused", ttl=1, stale_ttl=600) == "rebuilt elsewhere"
    assert cache.store.get(cache.parts.derived_key("l", key)) is NO_VALUE
