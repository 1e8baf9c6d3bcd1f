"""Queue rebuilds under faults: a broker that dies and comes back, a worker killed mid-build,
a key rebuilt meanwhile, a builder that fails, a closure that cannot leave the process.

Web requests run as separate processes (``tests.queues.web``), as a web
server's would; workers are real Celery and RQ processes.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from typing import Any

import pytest
from redis import Redis

from mcache import NO_VALUE, Cache, Entry
from mcache.refreshers import RQRefresher
from tests.queues.conftest import ROOT, celery_worker, queue_env, rq_worker
from tests.servers import redis_process

MODULE = "tests.queues.builders"


def stale(cache: Cache, *numbers: int) -> None:
    for number in numbers:
        key = cache.key(f"{MODULE}.report", (number,), {})
        entry = Entry("old", cache.clock.time_ms() - 1000, 10, {})
        cache.store.set(key, cache.codec.dumps(entry.to_wire(), key), 600)


def read(env: dict[str, str], *numbers: int, how: str = "read") -> dict[str, Any]:
    """Read keys in a web process of its own (``how="refresh"``: rebuild them now); return
    its values and pid (it must exit 0)."""
    argv = [sys.executable, "-m", "tests.queues.web", json.dumps(env), json.dumps(numbers), how]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def fresh(cache: Cache, number: int, seconds: float = 30) -> Any:
    """Wait until key ``number`` holds a fresh report; return it (None if it never did)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = cache.get((f"{MODULE}.report", (number,), {}), None)
        if isinstance(value, str):
            return value
        time.sleep(0.05)
    return None


def lock_key(cache: Cache, number: int) -> str:
    return cache.parts.derived_key("l", cache.key(f"{MODULE}.report", (number,), {}))


def builder_pid(report: str) -> int:
    return int(report.rsplit(" ", 1)[1])


def test_a_broker_that_dies_costs_no_error_and_is_used_again(redis_url: str, workers) -> None:
    broker = redis_process().start()
    try:
        env = queue_env(
            MCACHE_QUEUE_URL=redis_url,
            MCACHE_CELERY_BROKER=f"redis://{broker.address}/0",
            MCACHE_QUEUE_REFRESHER="celery",
            MCACHE_QUEUE_NAME="mcache-faults",
        )
        workers.append(celery_worker(env, "mcache-faults").start())
        cache = Cache(redis_url, namespace=env["MCACHE_QUEUE_NAMESPACE"])
        stale(cache, 0, 1, 2, 3)
        first = read(env, 0)
        assert first["values"] == ["old"]
        assert builder_pid(fresh(cache, 0)) != first["pid"], "queued: a worker built it"
        broker.kill()
        during = read(env, 1, 2)  # publishing fails: the web process rebuilds them itself
        assert during["values"] == ["old", "old"], "stale served, no error"
        for number in (1, 2):
            assert builder_pid(fresh(cache, number)) == during["pid"], "the thread-pool fallback"
            assert cache.store.get(lock_key(cache, number)) is NO_VALUE, "its lock was freed"
        broker.start()
        after = read(env, 3)
        assert after["values"] == ["old"]
        assert builder_pid(fresh(cache, 3, seconds=60)) != after["pid"], "the queue again"
    finally:
        broker.kill()


def test_a_worker_killed_mid_build_frees_its_lock_and_the_key_is_rebuilt_once(
    redis_url: str, rq_env, workers
) -> None:
    env, queue_redis = rq_env, rq_env["QUEUE_REDIS"]
    slow = rq_worker({**env, "MCACHE_QUEUE_BUILD_SECONDS": "30"}, queue_redis, "mcache").start()
    workers.append(slow)
    cache = Cache(redis_url, namespace=env["MCACHE_QUEUE_NAMESPACE"])
    stale(cache, 0)
    assert read(env, 0)["values"] == ["old"]
    assert slow.wait_until(lambda: cache.store.get("attempts:0") == b"1"), "the build began"
    time.sleep(2.5)  # past the lock's timeout (2 s): only the worker's renewal holds it now
    assert cache.store.get(lock_key(cache, 0)) is not NO_VALUE, "the worker renews the lock"
    slow.kill()
    killed = time.monotonic()
    while cache.store.get(lock_key(cache, 0)) is not NO_VALUE and time.monotonic() < killed + 10:
        time.sleep(0.05)
    assert time.monotonic() - killed < 2 + 0.5, "the dead worker's lock outlived lock_timeout"
    workers.append(rq_worker(env, queue_redis, "mcache").start())
    assert read(env, 0)["values"] == ["old"]
    assert fresh(cache, 0) is not None
    assert cache.store.get("builds:0") == b"1", "one rebuild, after the killed one"


@pytest.fixture
def rq_env(redis_url: str) -> dict[str, str]:
    queue_redis = redis_url.rsplit("/", 1)[0] + "/2"
    return queue_env(
        MCACHE_QUEUE_URL=redis_url,
        MCACHE_QUEUE_REFRESHER="rq",
        MCACHE_QUEUE_NAME=f"{queue_redis}?queue=mcache",
        QUEUE_REDIS=queue_redis,
    )


def queued(env: dict[str, str]) -> int:
    """Return how many jobs wait on the tests' RQ queue (its API, not its log)."""
    from rq import Queue

    return Queue("mcache", connection=Redis.from_url(env["QUEUE_REDIS"])).count


def test_a_worker_skips_a_key_rebuilt_meanwhile(redis_url: str, rq_env, workers) -> None:
    cache = Cache(redis_url, namespace=rq_env["MCACHE_QUEUE_NAMESPACE"])
    stale(cache, 0)
    assert read(rq_env, 0)["values"] == ["old"]  # queued; no worker yet
    key = cache.key(f"{MODULE}.report", (0,), {})
    entry = Entry("rebuilt meanwhile", cache.clock.time_ms() + 60_000, 10, {})
    cache.store.set(key, cache.codec.dumps(entry.to_wire(), key), 600)
    worker = rq_worker(rq_env, rq_env["QUEUE_REDIS"], "mcache").start()
    workers.append(worker)
    done = worker.wait_until(
        lambda: queued(rq_env) == 0 and cache.store.get(lock_key(cache, 0)) is NO_VALUE
    )
    assert done, worker.text()[-2000:]
    assert cache.store.get("attempts:0") is NO_VALUE, "the control check skipped the build"
    assert cache.get((f"{MODULE}.report", (0,), {})) == "rebuilt meanwhile"
    assert cache.store.get(lock_key(cache, 0)) is NO_VALUE, "and freed the lock"


def test_a_failing_worker_build_keeps_the_stale_value_and_backs_off(
    redis_url: str, rq_env, workers
) -> None:
    failing = {**rq_env, "MCACHE_QUEUE_FAIL": "1"}
    worker = rq_worker(failing, rq_env["QUEUE_REDIS"], "mcache").start()
    workers.append(worker)
    cache = Cache(redis_url, namespace=rq_env["MCACHE_QUEUE_NAMESPACE"])
    stale(cache, 0)
    assert read(failing, 0)["values"] == ["old"]
    # mcache's own log line (not RQ's): the job ran, its build failed, the stale value stays
    failed = worker.wait_until(lambda: "failed, serving its stale value" in worker.text())
    assert failed, worker.text()[-2000:]
    assert read(failing, 0)["values"] == ["old"], "the stale value is still served"
    assert cache.store.get("attempts:0") == b"1", "no retry during the back-off"
    assert cache.store.get(lock_key(cache, 0)) is not NO_VALUE, "the lock is kept for it"
    assert cache.stats()["cache"]["build_errors"] >= 1, "the failure shows in the stats"
    time.sleep(4.5)  # the back-off: twice the lock's timeout
    read(failing, 0)
    worker.wait_until(lambda: cache.store.get("attempts:0") == b"2")
    assert cache.store.get("attempts:0") == b"2", "retried after the back-off"


def put_stale(cache: Cache, key: str) -> None:
    store_key = cache.key(key)
    entry = Entry("old", cache.clock.time_ms() - 1000, 10, {})
    cache.store.set(store_key, cache.codec.dumps(entry.to_wire(), store_key), 600)


def test_a_closure_is_rebuilt_here_and_said_once(redis_url: str, caplog) -> None:
    refresher = RQRefresher(queue=redis_url.rsplit("/", 1)[0] + "/2?queue=never")
    cache = Cache(redis_url, namespace="cl", refresh="background", refresher=refresher)
    put_stale(cache, "a")
    put_stale(cache, "b")
    built = []

    def rebuild() -> str:
        built.append(1)
        return "new"

    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert cache.get_or_build("a", rebuild) == "old"
        assert cache.get_or_build("b", rebuild) == "old"
        assert refresher.wait_idle(10)
    assert built == [1, 1], "both rebuilt in this process"
    said = [r.getMessage() for r in caplog.records if "rebuilt in this process" in r.getMessage()]
    assert len(said) == 1 and "rebuild" in said[0] and "functools.partial" in said[0], said
    assert Redis.from_url(redis_url.rsplit("/", 1)[0] + "/2").llen("rq:queue:never") == 0


@pytest.mark.parametrize("fallback", ["thread", "none"])
def test_a_queue_that_refuses_falls_back(redis_url: str, fallback: str) -> None:
    from tests.servers import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0?queue=mcache"
    refresher = RQRefresher(queue=dead, fallback=fallback)
    cache = Cache(
        redis_url, namespace="fb", refresh="background", refresher=refresher, name="fallback"
    )
    stale(cache, 0)
    key = (f"{MODULE}.report", (0,), {})
    value = cache.get_or_build(key, _module_level_report, ttl=60)
    assert value == "old", "stale served while the send fails"
    assert refresher.wait_idle(10)
    assert cache.store.get(cache.parts.derived_key("l", cache.key(*key))) is NO_VALUE, "lock freed"
    if fallback == "thread":
        assert cache.get(key) == "rebuilt here"
    else:
        assert cache.get(key) is NO_VALUE, "nobody rebuilt it: a later request will"


def _module_level_report() -> str:
    return "rebuilt here"


def test_cached_pages_stay_in_the_web_process_and_say_why(redis_url: str, caplog) -> None:
    from flask import Flask

    from flask_mcache import MCache

    queue = redis_url.rsplit("/", 1)[0] + "/2"
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL=redis_url,
        MCACHE_NAMESPACE="pages",
        MCACHE_REFRESH="background",
        MCACHE_REFRESHER="rq",
        MCACHE_REFRESH_QUEUE=f"{queue}?queue=pages",
    )
    mcache = MCache(app)
    renders = []

    @app.get("/")
    @mcache.cached_view(ttl=60, tags=["home"])
    def home() -> str:
        renders.append(1)
        return f"home {len(renders)}"

    client = app.test_client()
    assert client.get("/").text == "home 1"
    with app.app_context():
        mcache.invalidate("home")
    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert client.get("/").headers["X-Cache"] == "STALE"
        assert app.extensions["mcache"].refresher.wait_idle(10)
    assert client.get("/").text == "home 2", "re-rendered on the web process's threads"
    assert "cached pages re-render in the web process" in caplog.text
    assert Redis.from_url(queue).llen("rq:queue:pages") == 0, "nothing was queued"
