"""Composition rule 4 and stale readers who wait: locks live as long as builds; stale_wait.

A build longer than ``lock_timeout`` keeps its lock (the process renews it),
so it runs once across processes; a holder killed with SIGKILL stops renewing,
and its lock frees within ``lock_timeout``. Real processes, real servers.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
import time
from typing import Any

import pytest

from mcache import NO_VALUE, Cache, FakeClock
from mcache.engine.renewal import _LOG as renewal_log
from mcache.engine.renewal import renewer
from mcache.stores import MemoryStore
from tests.core import workers
from tests.core.test_get_or_build import builds, put_stale

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture(params=["memcached", "memcached_text", "redis", "sentinel", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def start_build(url: str, key: str, seconds: float, options: dict[str, Any]) -> tuple[Any, Any]:
    """Start one get_or_build in another process; return (process, queue of its value)."""
    done = SPAWN.Queue()
    process = SPAWN.Process(
        target=workers.build_once, args=(url, "rn", key, seconds, options, done)
    )
    process.start()
    return process, done


@pytest.mark.parametrize("start", ["missing", "stale"])
def test_a_build_longer_than_its_lock_timeout_runs_once(url: str, start: str) -> None:
    cache = Cache(url, namespace="rn")
    if start == "stale":
        put_stale(cache, "report", "old")
    # Timeouts of 2 s, renewed every 0.67 s: a renewal may come up to 1.3 s late (a loaded
    # machine) before memcached's whole-second clock lets the lock expire.
    process, done = start_build(url, "report", 4.0, {"lock_timeout": 2, "ttl": 60})
    workers.wait_for_lock(cache, "report")
    began = time.monotonic()
    values = []
    second = workers.counting_builder(cache, 0, "the second caller")
    for at in (2.5, 3.3):  # past the lock's timeout (and memcached's slack): only renewal
        time.sleep(max(0.0, began + at - time.monotonic()))
        values.append(cache.get_or_build("report", second, lock_timeout=2, wait=3))
    first = done.get(timeout=30)
    process.join(10)
    assert first.startswith("built by pid")
    if start == "stale":
        assert values == ["old", "old"], "both asked while the first build held its lock"
    else:
        assert values == [first, first], "both waited for the first build's value"
    assert builds(cache) == 1, "the second caller never built"


def test_a_killed_holder_frees_its_renewed_lock_within_lock_timeout(url: str) -> None:
    cache = Cache(url, namespace="rn")
    holder = SPAWN.Process(target=workers.hold_lock_forever, args=(url, "rn", "job", 1))
    holder.start()
    workers.wait_for_lock(cache, "job")
    time.sleep(2.5)
    assert workers.build_lock_held(cache, "job"), "alive, the holder keeps its lock"
    holder.kill()
    holder.join()
    killed = time.monotonic()
    build = workers.counting_builder(cache, 0, "the rebuilder")
    assert cache.get_or_build("job", build, wait=5, lock_timeout=1) == "built by the rebuilder"
    freed_after = time.monotonic() - killed
    slack = cache.store.traits.expiry_slack
    assert freed_after < 1 + slack + 0.5, f"the dead holder's lock lasted {freed_after:.2f} s"
    assert builds(cache) == 1


def test_a_lock_held_in_a_with_block_is_renewed_until_the_block_ends(url: str) -> None:
    cache = Cache(url, namespace="rn")
    # A 2 s timeout, renewed every 0.67 s: a renewal may come up to 1.3 s late (a loaded
    # machine) before memcached's whole-second clock lets it expire; held well past
    # 2 s plus that second of slack, the lock is still there only if it was renewed.
    with cache.lock("nightly", timeout=2) as lock:
        time.sleep(3.5)
        assert cache.store.get(lock.key) == lock.token
        assert cache.lock("nightly", timeout=2).try_acquire() is False
    assert cache.store.get(lock.key) is NO_VALUE
    assert not renewer.holds(lock)


def test_renewal_stops_and_says_so_when_the_lock_was_taken_over(caplog) -> None:
    clock = FakeClock()
    cache = Cache(MemoryStore(clock=clock), namespace="rn", clock=clock)
    mine = cache.lock("job", timeout=1)
    renewal_log.reset()  # another test's lost lock, within the interval, would silence it
    with caplog.at_level(logging.WARNING, logger="mcache"), mine:
        clock.advance(5)  # the process stalled: its lock expired in the store
        theirs = cache.lock("job", timeout=1)
        assert theirs.try_acquire()
        deadline = time.monotonic() + 3
        while renewer.holds(mine) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not renewer.holds(mine)
        assert cache.store.get(theirs.key) == theirs.token, "the renewal never touched theirs"
    assert "was lost under its holder" in caplog.text
    assert cache.store.get(theirs.key) == theirs.token, "nor did the release"


# -- stale_wait ------------------------------------------------------------------------------


def test_stale_wait_gives_the_value_another_process_is_rebuilding(url: str) -> None:
    cache = Cache(url, namespace="rn")
    put_stale(cache, "page", "old")
    process, done = start_build(url, "page", 0.5, {"ttl": 60})
    workers.wait_for_lock(cache, "page")
    impatient = cache.get_or_build("page", lambda: "mine", stale_wait=0.05)
    patient = cache.get_or_build("page", lambda: "mine", stale_wait=5)
    rebuilt = done.get(timeout=30)
    process.join(10)
    assert impatient == "old"
    assert patient == rebuilt and rebuilt.startswith("built by pid")
    assert builds(cache) == 1


def test_stale_wait_threads_wait_for_the_rebuild_of_their_process() -> None:
    cache = Cache("memory://", namespace="rn", stale_wait=2)
    put_stale(cache, "page", "old")
    started = threading.Event()
    results: list[str] = []

    def rebuild() -> str:
        started.set()
        time.sleep(0.3)
        return "new"

    leader = threading.Thread(target=lambda: results.append(cache.get_or_build("page", rebuild)))
    leader.start()
    assert started.wait(5)
    assert cache.get_or_build("page", lambda: "never") == "new"
    leader.join()
    assert results == ["new"]
    assert cache.counts.local()["builds"] == 1


@pytest.mark.parametrize("stale_wait", [0, 5])
def test_a_background_refresh_winner_waits_for_its_own_rebuild(stale_wait: float) -> None:
    cache = Cache("memory://", namespace="rn", refresh="background", stale_wait=stale_wait)
    put_stale(cache, "page", "old")

    def rebuild() -> str:
        time.sleep(0.2)
        return "new"

    expected = "new" if stale_wait else "old"
    assert cache.get_or_build("page", rebuild) == expected
    assert cache.refresher.wait_idle(5)  # type: ignore[attr-defined]
    assert cache.get_or_build("page", lambda: "never") == "new"


def test_stale_wait_in_aget_or_build() -> None:
    cache = Cache("memory://", namespace="rn", refresh="background")
    put_stale(cache, "page", "old")

    async def rebuild() -> str:
        await asyncio.sleep(0.2)
        return "new"

    assert asyncio.run(cache.aget_or_build("page", rebuild, stale_wait=5)) == "new"
