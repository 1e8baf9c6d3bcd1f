"""A stale key's rebuild handed to a task queue, on a real memcached: what the simulation
found (docs/explanation/simulation.md, "What it found").

- A broker delivers a job at least once: two workers given the same job built it twice,
  both extending the token it was handed (text protocol), or the lease's cas (meta).
- A hand-off whose lock extension the store failed took the lock back and renewed it,
  while the refresher, told None, took it that another rebuilds: nobody did.
- On the meta protocol a worker's rebuild that stored nothing gave the stale entry the
  life its hand-off had held it for, not its own.
"""

from __future__ import annotations

import functools
import threading
import time

import pytest

from mcache import NO_VALUE, Cache
from mcache.engine.rebuild import run
from mcache.errors import StoreUnavailable, Uncacheable
from mcache.stores.memcached.store import MemcachedStore

CACHES: dict[str, Cache] = {}
BUILDS: list[str] = []


def find(name: str) -> Cache:
    """What a job's locator names: the cache a test made."""
    return CACHES[name]


def slow_report(number: int) -> str:
    BUILDS.append(f"report {number}")
    time.sleep(0.5)  # both copies of a job under way at once
    return f"report {number}, rebuilt"


def uncacheable_report(number: int) -> str:
    raise Uncacheable(f"report {number}", "not to be stored")


class Queue:
    """What a task queue would carry: each job's payload (mcache.refreshers.Refresher)."""

    def __init__(self, hold: float = 30) -> None:
        self.hold = hold
        self.jobs: list[str | None] = []

    def __call__(self, job) -> bool:  # type: ignore[no-untyped-def]
        self.jobs.append(job.hand_off(self.hold))
        return True


def queued_cache(
    url: str,
    name: str,
    queue: Queue,
    store: MemcachedStore | None = None,
    lock_timeout: int = 5,
) -> Cache:
    cache = Cache(
        store or url,
        namespace=name,
        refresh="background",
        refresher=queue,
        lock_timeout=lock_timeout,
    )
    cache.locator = f"{__name__}:find:{name}"
    CACHES[name] = cache
    return cache


def stale(cache: Cache, build: object, stale_ttl: int = 30) -> None:
    """Store report 1 (ttl 1 s), wait for it to go stale, and read it: the read hands the
    rebuild to the queue."""
    assert cache.get_or_build("r1", lambda: "report 1", ttl=1, stale_ttl=stale_ttl) == "report 1"
    time.sleep(2.1)  # memcached's whole seconds
    cache.get_or_build("r1", build, ttl=1, stale_ttl=stale_ttl)


@pytest.mark.parametrize("protocol", ["text", "meta"])
def test_a_job_delivered_twice_is_built_once(memcached_url: str, protocol: str) -> None:
    queue = Queue()
    cache = queued_cache(f"{memcached_url}?protocol={protocol}", f"twice-{protocol}", queue)
    BUILDS.clear()
    stale(cache, functools.partial(slow_report, 1))
    (payload,) = queue.jobs
    assert payload is not None, "the rebuild was not handed off"

    done: list[str] = []
    workers = [threading.Thread(target=lambda: done.append(run(payload))) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert sorted(done) == ["built", "taken"], "both copies of the job took the lock"
    assert BUILDS == ["report 1"]


def slower_report(number: int) -> str:
    BUILDS.append(f"report {number}")
    time.sleep(3.0)  # several lock lives: the second copy comes in the middle of it
    return f"report {number}, rebuilt"


def test_a_copy_of_a_job_delivered_after_a_lock_life_is_not_built_again(
    memcached_url: str,
) -> None:
    """memcached's meta protocol: the first copy of a job claims its lease with a key of
    its own, which lived a lock's life; a copy delivered later claimed the lease again
    while the first still built it, and both built (the simulation's seed: 150). The
    claim now lives as long as the lease."""
    queue = Queue()
    url = f"{memcached_url}?protocol=meta"
    cache = queued_cache(url, "late-copy", queue, lock_timeout=1)
    BUILDS.clear()
    stale(cache, functools.partial(slower_report, 1))
    (payload,) = queue.jobs
    assert payload is not None, "the rebuild was not handed off"
    first: list[str] = []
    worker = threading.Thread(target=lambda: first.append(run(payload)))
    worker.start()
    time.sleep(2.0)  # past the claim's first life (one second, whole seconds)
    late = run(payload)
    worker.join(10)
    assert (first, late) == (["built"], "taken"), "the late copy took the lease too"
    assert BUILDS == ["report 1"]


class FailingLockReads(MemcachedStore):
    """memcached whose next read of a lock key fails, as a dropped request would."""

    failing = False

    def gets(self, key: str) -> tuple[bytes | object, int | None]:  # type: ignore[override]
        if self.failing and key.startswith("l:"):
            self.failing = False
            raise StoreUnavailable("memcached: the request was lost")
        return super().gets(key)


def test_a_hand_off_the_store_failed_lets_the_lock_go(memcached_url: str) -> None:
    store = FailingLockReads([memcached_url.removeprefix("memcached://")], protocol="text")
    queue = Queue()
    cache = queued_cache("", "failed-hand-off", queue, store)
    assert cache.get_or_build("r1", lambda: "report 1", ttl=1, stale_ttl=30) == "report 1"
    time.sleep(2.1)
    store.failing = True
    rebuilt = functools.partial(slow_report, 1)
    assert cache.get_or_build("r1", rebuilt, ttl=1, stale_ttl=30) == "report 1"
    assert queue.jobs == [None], "the hand-off did not fail"
    lock_key = cache.parts.derived_key("l", cache._store_key("r1"))
    assert store.get(lock_key) is NO_VALUE, "the lock was kept, and nobody rebuilds"

    cache.get_or_build("r1", rebuilt, ttl=1, stale_ttl=30)
    assert len(queue.jobs) == 2 and queue.jobs[1] is not None, "the next reader hands it off"


def test_a_workers_rebuild_that_stores_nothing_leaves_the_entry_its_own_life(
    memcached_url: str,
) -> None:
    queue = Queue(hold=30)
    cache = queued_cache(memcached_url, "uncacheable-job", queue)
    stale(cache, functools.partial(uncacheable_report, 1), stale_ttl=4)
    (payload,) = queue.jobs
    assert payload is not None
    assert run(payload) == "uncacheable"
    time.sleep(3.5)  # past the entry's own ttl + stale_ttl (1 + 4 s, and the seconds it had)
    assert cache.store.get(cache._store_key("r1")) is NO_VALUE, (
        "the stale entry lived on for the hand-off's hold"
    )
