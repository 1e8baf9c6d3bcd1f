"""get_or_build under real concurrency: processes and threads against real servers."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from mcache import NO_VALUE, Cache, Entry, FakeClock, Lock
from mcache.stores import MemoryStore
from mcache.testing.store_contract import run_together
from tests.core import workers

PROCESSES = 8
THREADS = 8
BUILD = 0.5
STALE_BUILD = 2.0
"""The build of the stale stampedes, whose callers must all read before it ends: long
enough that no caller's first read, delayed by a loaded machine, comes after it."""


@pytest.fixture(params=["memcached", "memcached_text", "redis", "sentinel", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def builds(cache: Cache) -> int:
    raw = cache.store.get(workers.BUILDS_KEY)
    return 0 if raw is NO_VALUE else int(raw)


def run_stampede(
    url: str,
    key: str,
    options: dict[str, Any],
    asynchronous: bool = False,
    namespace: str = "st",
    build: float = BUILD,
) -> list[tuple[Any, float]]:
    """8 processes × 8 threads call get_or_build(key) at once; return every (value, seconds).

    ``asynchronous``: 8 asyncio tasks in each process call aget_or_build.
    """
    context = multiprocessing.get_context("spawn")
    ready, go, results = context.Queue(), context.Event(), context.Queue()
    processes = [
        context.Process(
            target=workers.stampede,
            args=(url, namespace, key, THREADS, build, options, ready, go, results, asynchronous),
        )
        for _ in range(PROCESSES)
    ]
    outcomes = run_together(processes, ready, go, results)
    assert len(outcomes) == PROCESSES * THREADS
    return outcomes


def put_stale(cache: Cache, key: str, value: Any, tags: dict[str, int] | None = None) -> None:
    """Store an entry that went stale a second ago but is still kept."""
    store_key = cache.key(key)
    entry = Entry(value, cache.clock.time_ms() - 1000, 10, tags or {})
    cache.store.set(store_key, cache.codec.dumps(entry.to_wire(), store_key), 60)


def test_cold_stampede_builds_once(url: str) -> None:
    cache = Cache(url, namespace="st")
    outcomes = run_stampede(url, "hot", {"ttl": 60})
    values = {value for value, _ in outcomes}
    assert builds(cache) == 1
    assert len(values) == 1 and next(iter(values)).startswith("built by pid")
    assert cache.stats()["cache"]["builds"] == 1


def test_stale_stampede_sync_builds_once(url: str) -> None:
    cache = Cache(url, namespace="st")
    put_stale(cache, "hot", "old")
    outcomes = run_stampede(url, "hot", {"ttl": 60}, build=STALE_BUILD)
    values = [value for value, _ in outcomes]
    assert builds(cache) == 1
    assert values.count("old") == len(values) - 1, "everyone but the rebuilder got stale"
    assert cache.get_or_build("hot", lambda: "unused").startswith("built by pid")


def test_stale_stampede_background_serves_everyone_stale(url: str) -> None:
    cache = Cache(url, namespace="st")
    put_stale(cache, "hot", "old")
    options = {"ttl": 60, "refresh": "background", "linger": STALE_BUILD + 1}
    outcomes = run_stampede(url, "hot", options, build=STALE_BUILD)
    assert {value for value, _ in outcomes} == {"old"}, "the lock winner too returned at once"
    assert builds(cache) == 1
    assert cache.get_or_build("hot", lambda: "unused").startswith("built by pid")


def test_dead_lock_holder_is_replaced_after_lock_timeout(url: str) -> None:
    cache = Cache(url, namespace="st", trace_dir=None)
    context = multiprocessing.get_context("spawn")
    holder = context.Process(target=workers.hold_lock_forever, args=(url, "st", "job", 2))
    holder.start()
    workers.wait_for_lock(cache, "job")
    holder.kill()
    holder.join()
    started = time.monotonic()
    value = cache.get_or_build("job", lambda: "rebuilt", wait=5, lock_timeout=2)
    waited = time.monotonic() - started
    assert value == "rebuilt"
    assert waited < 5.0, "no caller waits longer than its wait"
    assert not workers.build_lock_held(cache, "job"), "the new builder released its lock"
    assert cache.get_or_build("job", lambda: "again") == "rebuilt"


def test_waiter_builds_anyway_when_wait_runs_out() -> None:
    cache = Cache(MemoryStore(), namespace="w")
    lock = Lock(cache.shared, cache.parts.derived_key("l", cache.key("k")), 60)
    assert lock.try_acquire()  # someone else is "building" and never finishes
    started = time.monotonic()
    assert cache.get_or_build("k", lambda: "mine", wait=0.3) == "mine"
    assert time.monotonic() - started < 2.0
    assert cache.counts.local()["wait_timeouts"] == 1
    assert lock.release() is True, "the waiter never touched the other owner's lock"


def test_threads_of_one_process_share_one_call() -> None:
    cache = Cache(MemoryStore(), namespace="c")
    calls = []
    barrier = threading.Barrier(16)
    results = []

    def build() -> str:
        calls.append(1)
        time.sleep(0.3)
        return "v"

    def caller() -> None:
        barrier.wait()
        results.append(cache.get_or_build("k", build))

    threads = [threading.Thread(target=caller) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1]
    assert results == ["v"] * 16
    assert cache.counts.local()["coalesced"] == 15


def test_followers_share_the_leaders_exception() -> None:
    cache = Cache(MemoryStore(), namespace="c")
    barrier = threading.Barrier(4)
    errors = []

    def build() -> str:
        time.sleep(0.2)
        raise RuntimeError("backend down")

    def caller() -> None:
        barrier.wait()
        try:
            cache.get_or_build("k", build)
        except RuntimeError as error:
            errors.append(error)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(errors) == 4
    assert cache.counts.local()["build_errors"] == 1


# -- tags -------------------------------------------------------------------------------------


def test_tag_bumped_during_build_leaves_entry_stale(url: str) -> None:
    cache = Cache(url, namespace="tg")
    calls = []

    def build() -> str:
        calls.append(1)
        if len(calls) == 1:
            cache.invalidate("posts")  # an author publishes while the page is being built
        return f"page v{len(calls)}"

    assert cache.get_or_build("home", build, tags=["posts"]) == "page v1"
    assert cache.get_or_build("home", build, tags=["posts"]) == "page v2"
    assert cache.get_or_build("home", build, tags=["posts"]) == "page v2"


def test_lost_tag_key_invalidates(url: str) -> None:
    # A key lost behind the cache's back: with a near cache, seen within near_ttl (or as
    # soon as Redis pushes it), which test_near_cache.py covers; here, at once.
    cache = Cache(url, namespace="tg", near_ttl=None)
    assert cache.get_or_build("home", lambda: "v1", tags=["posts", "blogs"]) == "v1"
    assert cache.get_or_build("home", lambda: "v2", tags=["posts", "blogs"]) == "v1"
    lost = [key for _label, key in cache.tags.everywhere("blogs")]  # one key, or a copy per node
    cache.store.delete_many(lost)  # evicted, or its server restarted
    assert cache.get_or_build("home", lambda: "v2", tags=["posts", "blogs"]) == "v2"


def test_invalidate_only_hits_tagged_entries(url: str) -> None:
    cache = Cache(url, namespace="tg")
    cache.get_or_build("a", lambda: "a1", tags=["x"])
    cache.get_or_build("b", lambda: "b1", tags=["y"])
    versions = cache.invalidate("x")
    assert set(versions) == {"x"}
    assert cache.get_or_build("a", lambda: "a2", tags=["x"]) == "a2"
    assert cache.get_or_build("b", lambda: "b2", tags=["y"]) == "b1"


def test_tag_versions_strictly_increase_even_with_a_late_clock(url: str) -> None:
    early, late = FakeClock(2_000_000_000.0), FakeClock(2_000_000_000.0 - 2.0)
    ahead, behind = Cache(url, namespace="sk", clock=early), Cache(url, namespace="sk", clock=late)
    ahead.get_or_build("page", lambda: "v1", tags=["t"])
    seen = [ahead.invalidate("t")["t"]]
    for _ in range(5):
        seen.append(behind.invalidate("t")["t"])
        seen.append(ahead.invalidate("t")["t"])
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert ahead.get_or_build("page", lambda: "v2", tags=["t"]) == "v2"


def test_local_tag_cache_skips_tag_reads_and_sees_own_bumps() -> None:
    store = MemoryStore()
    cache = Cache(store, namespace="lt", tag_cache_ttl=60)
    cache.get_or_build("a", lambda: 1, tags=["x"])
    misses_before = store.stats()["memory"]["cmd_get"]
    cache.get_or_build("a", lambda: 2, tags=["x"])
    assert store.stats()["memory"]["cmd_get"] - misses_before == 1, "only the entry was read"
    cache.invalidate("x")
    assert cache.get_or_build("a", lambda: 3, tags=["x"]) == 3


# -- failures ----------------------------------------------------------------------------------


def test_build_error_serves_stale_and_frees_the_lock(url: str, caplog) -> None:
    cache = Cache(url, namespace="er")
    put_stale(cache, "k", "stale value")

    def failing() -> str:
        raise RuntimeError("database timeout")

    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert cache.get_or_build("k", failing) == "stale value"
    assert "database timeout" in caplog.text
    assert not workers.build_lock_held(cache, "k")
    assert cache.get_or_build("k", lambda: "fixed") == "fixed"


def test_build_error_without_stale_raises_and_frees_the_lock(url: str) -> None:
    cache = Cache(url, namespace="er")
    with pytest.raises(ZeroDivisionError):
        cache.get_or_build("k", lambda: 1 / 0)
    assert not workers.build_lock_held(cache, "k")
    assert cache.get_or_build("k", lambda: "ok") == "ok"


def test_store_down_calls_the_backend(caplog) -> None:
    from tests.servers import free_port

    cache = Cache(f"memcached://127.0.0.1:{free_port()}?connect_timeout=0.2")
    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert cache.get_or_build("k", lambda: "from backend") == "from backend"
        assert cache.get_or_build("k", lambda: "again") == "again"
    assert "carrying on without the cache" in caplog.text


def test_value_too_large_is_returned_not_cached() -> None:
    cache = Cache(MemoryStore(max_value_size=10_000), namespace="big")
    big = os.urandom(50_000).hex()  # incompressible
    assert cache.get_or_build("k", lambda: big) == big
    assert cache.get_or_build("k", lambda: "small") == "small"


def test_foreign_bytes_are_rebuilt(url: str) -> None:
    cache = Cache(url, namespace="fb")
    cache.store.set(cache.key("k"), b"\x80\x04garbage from another client")
    assert cache.get_or_build("k", lambda: "rebuilt") == "rebuilt"
    assert cache.get_or_build("k", lambda: "again") == "rebuilt"


# -- locks ------------------------------------------------------------------------------------


def test_only_the_owner_releases_or_extends(url: str) -> None:
    cache = Cache(url, namespace="lk")
    mine, theirs = cache.lock("job", timeout=5), cache.lock("job", timeout=5)
    assert mine.try_acquire() is True
    assert theirs.try_acquire() is False
    assert theirs.release() is False
    assert theirs.extend(30) is False
    assert cache.store.get(mine.key) == mine.token
    assert mine.extend(30) is True
    assert mine.release() is True
    assert theirs.try_acquire() is True


def test_expired_lock_taken_over_cannot_be_released_by_the_old_owner() -> None:
    clock = FakeClock()
    cache = Cache(MemoryStore(clock=clock), namespace="lk", clock=clock)
    old, new = cache.lock("job", timeout=2), cache.lock("job", timeout=2)
    assert old.try_acquire()
    clock.advance(3)
    assert new.try_acquire()
    assert old.release() is False
    assert cache.store.get(new.key) == new.token


def test_lock_context_manager_and_timeout() -> None:
    from mcache.errors import LockTimeout

    cache = Cache(MemoryStore(), namespace="lk")
    outer = cache.lock("job", timeout=5, wait=0.1)
    with outer:
        inner = cache.lock("job", timeout=5, wait=0.1)
        with pytest.raises(LockTimeout):
            inner.__enter__()
        assert outer.held
    with cache.lock("job", timeout=5, wait=0.1) as lock:
        assert lock.held


# -- clock, refresh, trace, stats --------------------------------------------------------------


def test_soft_and_hard_ttl_with_an_injected_clock() -> None:
    clock = FakeClock()
    cache = Cache(MemoryStore(clock=clock), namespace="ck", clock=clock, jitter=0)
    assert cache.get_or_build("k", lambda: "v1", ttl=10, stale_ttl=20) == "v1"
    clock.advance(9)
    assert cache.get_or_build("k", lambda: "v2", ttl=10, stale_ttl=20) == "v1"
    clock.advance(2)  # stale, still stored: rebuilt by this (only) caller
    assert cache.get_or_build("k", lambda: "v2", ttl=10, stale_ttl=20) == "v2"
    clock.advance(31)  # gone from the store altogether
    assert cache.get_or_build("k", lambda: "v3", ttl=10, stale_ttl=20) == "v3"


def test_a_calls_ttl_carries_its_stale_ttl_unless_one_was_set() -> None:
    clock = FakeClock()
    cache = Cache(MemoryStore(clock=clock), namespace="st", clock=clock, jitter=0, default_ttl=300)
    cache.get_or_build("k", lambda: "v1", ttl=10)  # kept 10 s fresh + 10 s stale, not 300
    clock.advance(21)
    assert cache.get_or_build("k", lambda: "v2", refresh="background", ttl=10) == "v2"
    kept = Cache(MemoryStore(clock=clock), clock=clock, jitter=0, stale_ttl=300)
    kept.get_or_build("k", lambda: "v1", ttl=10)  # the cache's own stale_ttl still applies
    clock.advance(21)
    assert kept.get_or_build("k", lambda: "v2", refresh="background", ttl=10) == "v1"


def test_a_fraction_of_a_second_of_tag_cache_stays_a_fraction() -> None:
    store = MemoryStore()
    reader = Cache(store, namespace="tc", tag_cache_ttl=0.2, near_ttl=None)  # tag cache alone
    writer = Cache(store, namespace="tc")
    assert reader.get_or_build("page", lambda: "v1", tags=["posts"]) == "v1"
    writer.invalidate("posts")
    time.sleep(0.3)  # past 0.2 s, well short of a whole second
    assert reader.get_or_build("page", lambda: "v2", tags=["posts"]) == "v2"


def test_custom_refresher_receives_background_jobs() -> None:
    clock = FakeClock()
    jobs: list[Any] = []
    cache = Cache(
        MemoryStore(clock=clock),
        namespace="bg",
        clock=clock,
        refresh="background",
        refresher=lambda job: jobs.append(job) or True,
    )
    cache.get_or_build("k", lambda: "v1", ttl=10)
    clock.advance(11)
    assert cache.get_or_build("k", lambda: "v2", ttl=10) == "v1"
    assert cache.get_or_build("k", lambda: "v3", ttl=10) == "v1", "lock held until the job runs"
    assert len(jobs) == 1
    jobs[0]()
    assert cache.get_or_build("k", lambda: "v4", ttl=10) == "v2"


def test_early_refresh_rebuilds_before_expiry() -> None:
    clock = FakeClock()
    cache = Cache(MemoryStore(clock=clock), namespace="xf", clock=clock, jitter=0)

    def slow() -> str:
        time.sleep(0.02)  # a measurable build time feeds the XFetch gap
        return f"v{clock.time()}"

    first = cache.get_or_build("k", slow, ttl=60, early_refresh=1e6)
    clock.advance(1)
    second = cache.get_or_build("k", slow, ttl=60, early_refresh=1e6)
    assert second != first, "rebuilt early, while still fresh"
    assert cache.get_or_build("k", slow, ttl=60) == second, "without early refresh: a plain hit"


def test_trace_letters_for_a_cold_build_then_hits(tmp_path, url: str) -> None:
    cache = Cache(url, namespace="tr", trace_dir=str(tmp_path))
    for _ in range(4):
        cache.get_or_build("page", lambda: "v")
    assert cache.tracer.read(cache.key("page")) == "MLWUHHH"


def test_counters_of_two_processes_add_up(url: str) -> None:
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=workers.count_events, args=(url, "agg", hits, misses))
        for hits, misses in ((5, 2), (7, 3))
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    totals = Cache(url, namespace="agg").stats()["cache"]
    assert (totals["hits"], totals["misses"], totals["builds"]) == (12, 5, 5)
    assert totals["hit_ratio"] == pytest.approx(12 / 17)


def test_a_process_that_exits_before_the_interval_still_adds_its_counts(url: str) -> None:
    script = (
        "from mcache import Cache\n"
        f"cache = Cache({url!r}, namespace='exiting', stats_interval=3600)\n"
        "cache.get_or_build('page', lambda: 1)\n"
        "cache.get_or_build('page', lambda: 1)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    totals = Cache(url, namespace="exiting").stats()["cache"]
    assert (totals["hits"], totals["misses"], totals["builds"]) == (1, 1, 1)


@pytest.mark.skipif(
    (3, 12, 0) <= sys.version_info[:3] < (3, 12, 2),
    reason="Python 3.12.0 and 3.12.1 start no thread at exit: the flush runs inline,"
    " bounded by the store's timeouts (5 s here) rather than about a second",
)
def test_exit_waits_about_a_second_for_a_hung_server() -> None:
    import socket

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"memcached://127.0.0.1:{silent.getsockname()[1]}?timeout=5&connect_timeout=5"
        script = (
            "from mcache import Cache\n"
            f"cache = Cache({url!r}, namespace='hung', stats_interval=3600)\n"
            "cache.counts.add('hits')\n"
        )
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert took < 4.0, f"exit took {took:.1f} s with a 5 s store timeout"


def test_a_forked_child_does_not_flush_its_parents_counts_again(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="forked", stats_interval=3600)
    cache.get_or_build("page", lambda: 1)  # one miss, pending in this process
    cache.get_or_build("page", lambda: 1)  # and one hit
    child = os.fork()
    if child == 0:  # the child exits as a worker does: sys.exit runs atexit
        os._exit(_exit_child())
    os.waitpid(child, 0)
    cache.counts.flush()
    totals = Cache(memcached_url, namespace="forked").stats()["cache"]
    assert (totals["misses"], totals["hits"]) == (1, 1)


def test_hits_on_many_threads_are_all_counted_while_flushes_run(url: str) -> None:
    """Hits are counted with no lock (see CacheStats.hit); flushes and reads of the pending
    counts, on other threads meanwhile, lose none and count none twice."""
    cache = Cache(url, namespace="threaded-hits", stats_interval=0.005)
    cache.get_or_build("page", lambda: 1)
    barrier = threading.Barrier(8)

    def reader() -> None:
        barrier.wait()
        for turn in range(1500):
            cache.get_or_build("page", lambda: 1)
            if turn % 100 == 0:
                cache.counts.local()

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.stats()["cache"]["hits"] == 8 * 1500


def _exit_child() -> int:
    import atexit

    atexit._run_exitfuncs()  # what sys.exit would run, without pytest's own teardown
    return 0


# -- decorator and asyncio -----------------------------------------------------------------------


def test_cached_decorator_binds_arguments() -> None:
    cache = Cache(MemoryStore(), namespace="dec")
    calls = []

    @cache.cached(ttl=60, tags=lambda blog_id, page=1: [f"blog:{blog_id}"])
    def post_list(blog_id: int, page: int = 1) -> str:
        calls.append((blog_id, page))
        return f"blog {blog_id} page {page}"

    assert post_list(1) == post_list(blog_id=1) == post_list(1, 1) == "blog 1 page 1"
    assert post_list("1") == "blog 1 page 1" and len(calls) == 2, "1 and '1' are different keys"
    cache.invalidate("blog:1")
    post_list(1)
    assert len(calls) == 3
    assert post_list.invalidate(1) is True
    post_list(1)
    assert len(calls) == 4
    assert post_list.uncached(2) == "blog 2 page 1"


def test_aget_or_build_single_flight() -> None:
    import asyncio

    cache = Cache(MemoryStore(), namespace="aio")
    calls = []

    async def build() -> str:
        calls.append(1)
        await asyncio.sleep(0.2)
        return "async value"

    async def main() -> list[str]:
        return await asyncio.gather(*(cache.aget_or_build("k", build) for _ in range(10)))

    assert asyncio.run(main()) == ["async value"] * 10
    assert calls == [1]


def test_bad_options_fail_at_start() -> None:
    from mcache.errors import ConfigError

    for options, says in [
        ({"refresh": "later"}, "refresh must be"),
        ({"jitter": 1.5}, "jitter"),
        ({"wait": -1}, "wait"),
        ({"lock_timeout": 0}, "lock_timeout"),
        ({"early_refresh": -1}, "early_refresh"),
        ({"stale_ttl": -5}, "stale_ttl"),
    ]:
        with pytest.raises(ConfigError, match=says):
            Cache("memory://", **options)


def test_nested_cached_coroutines_do_not_starve_the_thread_pool() -> None:
    import asyncio

    cache = Cache(MemoryStore(), namespace="nest")
    builds = []

    @cache.cached(ttl=60)
    async def inner(n: int) -> int:
        builds.append(n)
        await asyncio.sleep(0.05)
        return n * 2

    @cache.cached(ttl=60)
    async def outer(n: int) -> int:
        return await inner(n % 5) + 1  # a cached coroutine awaiting another

    async def main() -> list[int]:
        return await asyncio.wait_for(asyncio.gather(*(outer(n) for n in range(60))), 20)

    results = asyncio.run(main())
    assert results == [(n % 5) * 2 + 1 for n in range(60)]
    assert sorted(builds) == [0, 1, 2, 3, 4], "one inner build per argument"


def test_async_stale_background_and_errors() -> None:
    import asyncio

    clock = FakeClock()
    cache = Cache(MemoryStore(clock=clock), namespace="abg", clock=clock, refresh="background")

    async def value(v: str) -> str:
        return v

    async def failing() -> str:
        raise LookupError("backend down")

    async def main() -> None:
        assert await cache.aget_or_build("k", lambda: value("v1"), ttl=10) == "v1"
        clock.advance(11)
        assert await cache.aget_or_build("k", lambda: value("v2"), ttl=10) == "v1"
        for _ in range(100):  # the refresher thread runs the coroutine on this loop
            await asyncio.sleep(0.01)
            if await cache.aget_or_build("k", lambda: value("v3"), ttl=10) == "v2":
                break
        assert await cache.aget_or_build("k", lambda: value("v3"), ttl=10) == "v2"
        with pytest.raises(LookupError):
            await cache.aget_or_build("other", failing)

    asyncio.run(main())


# -- plain reads and writes meet get_or_build ----------------------------------------------------


def test_plain_get_sees_a_built_entry_while_it_is_current(url: str) -> None:
    clock = FakeClock()
    cache = Cache(url, namespace="pg", clock=clock)
    cache.get_or_build("page", lambda: "v1", ttl=10, stale_ttl=60, tags=["posts"])
    cache.set("plain", [1, 2])
    assert cache.get("page") == "v1"
    assert cache.get_many(["page", "plain", "absent"]) == {"page": "v1", "plain": [1, 2]}
    cache.invalidate("posts")
    assert cache.get("page", "gone") == "gone", "a bumped tag makes it a miss"
    cache.get_or_build("page", lambda: "v2", ttl=10, stale_ttl=60, tags=["posts"])
    clock.advance(11)
    assert cache.get("page", "gone") == "gone", "stale is a miss for a plain get"
    assert cache.get_or_build("page", lambda: "v3", ttl=10, tags=["posts"]) == "v3"


def test_a_plain_set_value_is_what_get_or_build_returns(url: str) -> None:
    cache = Cache(url, namespace="ps")
    cache.set("k", {"set": True}, ttl=60)
    assert cache.get_or_build("k", lambda: "built") == {"set": True}
    cache.set("tagged", "set")
    assert cache.get_or_build("tagged", lambda: "built", tags=["t"]) == "built", (
        "a plain value records no tag versions, so a tagged read rebuilds it"
    )


# -- Uncacheable: a builder's value for its caller alone ------------------------------------------


def test_uncacheable_value_is_returned_and_not_stored(url: str) -> None:
    from mcache.errors import Uncacheable

    cache = Cache(url, namespace="un")

    def private() -> str:
        raise Uncacheable("for this caller only")

    assert cache.get_or_build("k", private) == "for this caller only"
    assert cache.store.get(cache.key("k")) is NO_VALUE
    assert cache.get_or_build("k", lambda: "public") == "public"
    cache.counts.flush()
    assert cache.counts.totals()["uncached"] == 1


def test_waiting_threads_build_their_own_when_the_leaders_value_is_uncacheable() -> None:
    from mcache.errors import Uncacheable

    cache = Cache(MemoryStore(), namespace="un")
    started, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def leader_build() -> str:
        started.set()
        release.wait(5)
        raise Uncacheable("leader's private page")

    def leader() -> None:
        results["leader"] = cache.get_or_build("page", leader_build)

    def follower(name: str) -> None:
        results[name] = cache.get_or_build("page", lambda: f"{name}'s own page")

    first = threading.Thread(target=leader)
    first.start()
    started.wait(5)
    others = [threading.Thread(target=follower, args=(f"f{i}",)) for i in range(3)]
    for thread in others:
        thread.start()
    time.sleep(0.1)  # the followers are waiting on the leader's flight
    release.set()
    for thread in [first, *others]:
        thread.join(5)
    assert results["leader"] == "leader's private page"
    for i in range(3):
        assert results[f"f{i}"] != "leader's private page", "never another caller's value"


def test_async_uncacheable(url: str) -> None:
    import asyncio

    from mcache.errors import Uncacheable

    cache = Cache(url, namespace="un")

    async def private() -> str:
        raise Uncacheable("mine")

    assert asyncio.run(cache.aget_or_build("k", private)) == "mine"
    assert cache.store.get(cache.key("k")) is NO_VALUE


@pytest.mark.parametrize("near", [False, True], ids=["store", "near"])
def test_a_peek_with_the_tags_reads_as_a_hit_does_and_builds_nothing(url: str, near: bool) -> None:
    """``peek(key, tags=…)``: the entry and its tags' versions in one read (or from the near
    tier); stale, invalidated or missing is the default, and nothing is built or claimed."""
    cache = Cache(url, namespace="pk", near_ttl=30 if near else None)
    assert cache.peek("page", "none", tags=["posts"]) == "none"
    cache.get_or_build("page", lambda: "v1", ttl=60, tags=["posts", "authors"])
    assert cache.peek("page", "none", tags=["posts", "authors"]) == "v1"
    cache.invalidate("authors")
    assert cache.peek("page", "none", tags=["posts", "authors"]) == "none"
    assert not workers.build_lock_held(cache, "page"), "a peek claims no rebuild"
