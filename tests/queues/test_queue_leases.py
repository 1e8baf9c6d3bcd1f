"""Queue rebuilds of pages built and invalidated as a site does it, on both memcached protocols.

The other queue tests store stale entries by hand; here the entries are built
by ``get_or_build`` (on memcached's meta protocol: written under the server's
lease) and made stale by ``invalidate("pages")`` (a tag the server cannot
see: the reader marks the entry stale and bids for it). Web processes and
workers are real processes; the broker is a redis-server of the test's own.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from mcache import Cache
from tests.queues import web
from tests.queues.conftest import celery_worker, queue_env, rq_worker
from tests.queues.test_queue_faults import read

MODULE = "tests.queues.builders"
KEYS, PROCESSES, THREADS = 20, 4, 8


@pytest.fixture(params=["meta", "text"])
def store_url(request: pytest.FixtureRequest, memcached_url: str) -> str:
    """The session's memcached on the default protocol (meta, detected) or the text one."""
    return memcached_url if request.param == "meta" else f"{memcached_url}?protocol=text"


@pytest.fixture(params=["celery", "rq"])
def site(request: pytest.FixtureRequest, store_url: str, redis_url: str, workers) -> dict[str, Any]:
    """The environment of a site whose pages rebuild on ``request.param``'s workers."""
    broker = redis_url.rsplit("/", 1)[0] + "/3"
    if request.param == "celery":
        env = queue_env(
            MCACHE_QUEUE_URL=store_url,
            MCACHE_CELERY_BROKER=broker,
            MCACHE_QUEUE_REFRESHER="celery",
            MCACHE_QUEUE_NAME="mcache-pages",
            MCACHE_QUEUE_FUNCTION="page",
        )
        workers.append(celery_worker(env, "mcache-pages").start())
    else:
        env = queue_env(
            MCACHE_QUEUE_URL=store_url,
            MCACHE_QUEUE_REFRESHER="rq",
            MCACHE_QUEUE_NAME=f"{broker}?queue=mcache-pages",
            MCACHE_QUEUE_FUNCTION="page",
        )
        workers.append(rq_worker(env, broker, "mcache-pages").start())
    cache = Cache(store_url, namespace=env["MCACHE_QUEUE_NAMESPACE"])
    return {"env": env, "cache": cache}


def builds(cache: Cache, kind: str = "page-builds") -> dict[int, int]:
    found = cache.store.get_many([f"{kind}:{n}" for n in range(KEYS)])
    return {n: int(found.get(f"{kind}:{n}", b"0")) for n in range(KEYS)}


def pages(cache: Cache) -> dict[int, Any]:
    return {n: cache.get((f"{MODULE}.page", (n,), {}), None) for n in range(KEYS)}


def settled(cache: Cache, expected: int, seconds: float = 30) -> dict[int, int]:
    """Wait until every key was built ``expected`` times and is fresh; then a moment more."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        counted = builds(cache)
        if min(counted.values()) >= expected and all(pages(cache).values()):
            break
        time.sleep(0.05)
    time.sleep(1.0)  # a second build would have begun by now
    return builds(cache)


def test_invalidated_pages_are_rebuilt_once_each_by_a_worker(site: dict[str, Any]) -> None:
    env, cache = site["env"], site["cache"]
    warm = read(env, *range(KEYS))  # built in that process: misses are built by their reader
    assert builds(cache) == dict.fromkeys(range(KEYS), 1)
    cache.invalidate("pages")
    with web.WebProcesses(env, PROCESSES, THREADS, KEYS) as processes:
        values, web_pids = processes.burst()
    assert len(values) == PROCESSES * THREADS * KEYS
    stale = {value for _, value, _ in values}
    assert all(value.startswith("page ") for value in stale), "the stale page, at once"
    assert settled(cache, 2) == dict.fromkeys(range(KEYS), 2), "one rebuild per key"
    built_by = {int(value.rsplit(" ", 1)[1]) for value in pages(cache).values()}
    assert not built_by & (web_pids | {warm["pid"]}), "a web process rebuilt a page"
    again = read(env, *range(KEYS))  # a fresh web process: every page is a hit
    assert len(set(again["values"])) == KEYS
    assert settled(cache, 2, seconds=2) == dict.fromkeys(range(KEYS), 2), "nothing rebuilt again"


def test_a_forced_refresh_builds_each_page_once(site: dict[str, Any]) -> None:
    env, cache = site["env"], site["cache"]
    read(env, *range(KEYS))
    refreshed = read(env, 3, 4, how="refresh")  # Cache.refresh(page, 3), page.refresh(4)
    assert [v.rsplit(" ", 1)[1] for v in refreshed["values"]] == [str(refreshed["pid"])] * 2
    expected = {n: 2 if n in (3, 4) else 1 for n in range(KEYS)}
    assert settled(cache, 1, seconds=5) == expected, "each forced once, nothing else rebuilt"
    with web.WebProcesses(env, 2, THREADS, KEYS) as processes:
        values, _ = processes.burst()
    assert {v for _, v, _ in values if v.startswith(("page 3 ", "page 4 "))} == set(
        refreshed["values"]
    ), "every reader gets the refreshed pages"
    assert settled(cache, 1, seconds=2) == expected, "and nothing is rebuilt after"


def test_a_worker_skips_a_page_rebuilt_meanwhile(site: dict[str, Any], workers) -> None:
    """The control check, on a server lease a queued job carries."""
    env, cache = site["env"], site["cache"]
    read(env, 0)
    for worker in workers:
        worker.pause(True)  # the job waits in the queue
    cache.invalidate("pages")
    handed = read(env, 0)
    assert handed["values"][0].startswith("page 0 "), "the stale page"
    assert cache.delete((f"{MODULE}.page", (0,), {}))
    rebuilt = read(env, 0)  # a miss: built by this reader, as any miss is
    assert rebuilt["values"][0] == f"page 0 by {rebuilt['pid']}"
    for worker in workers:
        worker.pause(False)
    time.sleep(3)  # the worker takes the job up now
    assert builds(cache)[0] == 2, "the worker saw the page rebuilt meanwhile and built nothing"
    assert cache.get((f"{MODULE}.page", (0,), {})) == rebuilt["values"][0]


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_a_page_whose_worker_was_killed_is_rebuilt_once_by_a_worker(
    protocol: str, memcached_url: str, redis_url: str, workers
) -> None:
    store = memcached_url if protocol == "meta" else f"{memcached_url}?protocol=text"
    broker = redis_url.rsplit("/", 1)[0] + "/3"
    env = queue_env(
        MCACHE_QUEUE_URL=store,
        MCACHE_QUEUE_REFRESHER="rq",
        MCACHE_QUEUE_NAME=f"{broker}?queue=mcache-pages",
        MCACHE_QUEUE_FUNCTION="page",
    )
    cache = Cache(store, namespace=env["MCACHE_QUEUE_NAMESPACE"])
    read(env, 0)
    slow = rq_worker({**env, "MCACHE_QUEUE_BUILD_SECONDS": "30"}, broker, "mcache-pages").start()
    workers.append(slow)
    cache.invalidate("pages")
    assert read(env, 0)["values"][0].startswith("page 0 "), "the stale page, handed to the queue"
    assert slow.wait_until(lambda: builds(cache, "page-attempts")[0] == 2), "the build began"
    slow.kill()
    killed = time.monotonic()
    workers.append(rq_worker(env, broker, "mcache-pages").start())
    readers: list[int] = []
    while builds(cache)[0] < 2 and time.monotonic() < killed + 20:
        found = read(env, 0)  # a visitor now and then: stale until a worker has rebuilt it
        readers.append(found["pid"])
        assert found["values"][0].startswith("page 0 ")
        time.sleep(0.5)
    took = time.monotonic() - killed
    assert builds(cache)[0] == 2, "rebuilt once after the killed build"
    value = settled_page(cache, 0)
    assert int(value.rsplit(" ", 1)[1]) not in readers, "by a worker, not a web process"
    assert took < 2 + 8, f"within lock_timeout (2 s) and a few seconds: {took:.1f} s"
    assert builds(cache, "page-attempts")[0] == 3, "one attempt after the killed one"


def settled_page(cache: Cache, number: int, seconds: float = 10) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = cache.get((f"{MODULE}.page", (number,), {}), None)
        if value is not None:
            return value  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"page {number} never fresh")


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_after_a_broker_outage_every_invalidated_page_is_rebuilt_by_a_worker_again(
    protocol: str, memcached_url: str, workers
) -> None:
    from tests.servers import redis_process

    store = memcached_url if protocol == "meta" else f"{memcached_url}?protocol=text"
    broker = redis_process().start()
    try:
        env = queue_env(
            MCACHE_QUEUE_URL=store,
            MCACHE_CELERY_BROKER=f"redis://{broker.address}/0",
            MCACHE_QUEUE_REFRESHER="celery",
            MCACHE_QUEUE_NAME="mcache-outage",
            MCACHE_QUEUE_FUNCTION="page",
        )
        cache = Cache(store, namespace=env["MCACHE_QUEUE_NAMESPACE"])
        read(env, *range(KEYS))
        broker.kill()
        cache.invalidate("pages")
        with web.WebProcesses(env, 2, THREADS, KEYS) as processes:
            values, _ = processes.burst()  # sends fail: the web processes rebuild them
        assert all(value.startswith("page ") for _, value, _ in values), "no error, stale pages"
        assert settled(cache, 2) == dict.fromkeys(range(KEYS), 2)
        broker.start()
        workers.append(celery_worker(env, "mcache-outage").start())
        for round_number in range(3, 5):
            cache.invalidate("pages")
            started = time.monotonic()
            with web.WebProcesses(env, 2, THREADS, KEYS) as processes:
                _, web_pids = processes.burst()
            counted = settled(cache, round_number, seconds=16)
            assert counted == dict.fromkeys(range(KEYS), round_number), (
                f"round {round_number}: {time.monotonic() - started:.1f} s, {counted}"
            )
            built_by = {int(v.rsplit(" ", 1)[1]) for v in pages(cache).values()}
            assert not built_by & web_pids, "rebuilt by a worker"
    finally:
        broker.kill()
