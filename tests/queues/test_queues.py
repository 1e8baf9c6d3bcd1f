"""Rebuilds on Celery, RQ and Django Tasks: real brokers, real worker and web processes.

4 web processes × 8 threads read 20 stale keys at once. Every read must get
the stale value at once (none waits for a build); each key must then be
rebuilt exactly once, and by a worker process, never by a web process.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcache import Cache, Codec, Entry
from mcache.model.signing import derived_key
from tests.queues import django_settings, web
from tests.queues.conftest import ROOT, celery_worker, queue_env, rq_worker, tasks_worker

KEYS, PROCESSES, THREADS = 20, 4, 8


def report_key(cache: Cache, module: str, number: int) -> str:
    """The store key ``@cache.cached`` gives ``module.report(number)``."""
    return cache.key(f"{module}.report", (number,), {})


def store_report(cache: Cache, module: str, number: int, value: str, fresh: bool) -> None:
    """Store a report under ``module.report(number)``'s key, fresh for a minute or expired."""
    key = report_key(cache, module, number)
    until = cache.clock.time_ms() + (60_000 if fresh else -1000)
    cache.store.set(key, cache.codec.dumps(Entry(value, until, 10, {}).to_wire(), key), 600)


def make_stale(url: str, env: dict[str, str], module: str, codec: Codec | None = None) -> Cache:
    """Store an expired ``"old"`` report under every key; return a cache to inspect them
    (with the site's ``codec``: a Django site signs with a key derived from SECRET_KEY)."""
    cache = Cache(url, namespace=env["MCACHE_QUEUE_NAMESPACE"], codec=codec)
    for number in range(KEYS):
        store_report(cache, module, number, "old", fresh=False)
    return cache


def hammer(env: dict[str, str]) -> tuple[list[web.Read], set[int]]:
    """One burst of the web processes: every (key, value, seconds) they read, and their pids."""
    with web.WebProcesses(env, PROCESSES, THREADS, KEYS) as site:
        return site.burst()


def rebuilt(cache: Cache, module: str, seconds: float = 60) -> dict[int, Any]:
    """Wait until every key holds a fresh report; return them by key."""
    deadline = time.monotonic() + seconds
    found: dict[int, Any] = {}
    while time.monotonic() < deadline:
        found = {n: cache.get((f"{module}.report", (n,), {}), None) for n in range(KEYS)}
        if all(isinstance(value, str) and value != "old" for value in found.values()):
            break
        time.sleep(0.05)
    return found


def check_one_build_each_in_a_worker(cache: Cache, module: str, web_pids: set[int]) -> None:
    reports = rebuilt(cache, module)
    assert all(isinstance(v, str) for v in reports.values()), f"not all rebuilt: {reports}"
    builders = {int(value.rsplit(" ", 1)[1]) for value in reports.values()}
    assert not builders & web_pids, "a web process built a report"
    for number in range(KEYS):
        assert reports[number].startswith(f"report {number} by ")
        assert cache.store.get(f"builds:{number}") == b"1", f"key {number} built more than once"


def scenario(
    url: str, env: dict[str, str], module: str = "tests.queues.builders", codec: Codec | None = None
) -> None:
    cache = make_stale(url, env, module, codec)
    values, web_pids = hammer(env)
    assert len(values) == PROCESSES * THREADS * KEYS
    assert {value for _, value, _ in values} == {"old"}, "every caller got the stale value at once"
    check_one_build_each_in_a_worker(cache, module, web_pids)


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_celery_workers_rebuild_each_stale_key_once(
    broker: str, redis_url: str, memcached_url: str, request: pytest.FixtureRequest, workers
) -> None:
    if broker == "redis":
        store, broker_url = redis_url, redis_url.rsplit("/", 1)[0] + "/1"
    else:
        store, broker_url = memcached_url, request.getfixturevalue("rabbitmq")
    queue = "mcache-tests"
    env = queue_env(
        MCACHE_QUEUE_URL=store,
        MCACHE_CELERY_BROKER=broker_url,
        MCACHE_QUEUE_REFRESHER="celery",
        MCACHE_QUEUE_NAME=queue,
    )
    purge = "import tests.queues.celery_app as c; c.app.control.purge()"
    subprocess.run([sys.executable, "-c", purge], cwd=ROOT, env=env, check=True, timeout=60)
    workers.append(celery_worker(env, queue).start())
    scenario(store, env)


def test_rq_workers_rebuild_each_stale_key_once(redis_url: str, workers) -> None:
    broker = redis_url.rsplit("/", 1)[0] + "/2"
    env = queue_env(
        MCACHE_QUEUE_URL=redis_url,
        MCACHE_QUEUE_REFRESHER="rq",
        MCACHE_QUEUE_NAME=f"{broker}?queue=mcache",
    )
    workers.append(rq_worker(env, broker, "mcache").start())
    scenario(redis_url, env)


def test_django_tasks_workers_rebuild_each_stale_key_once(
    memcached_url: str, tmp_path: Path, workers
) -> None:
    env = queue_env(
        DJANGO_SETTINGS_MODULE="tests.queues.django_settings",
        MCACHE_TASKS_DB=str(tmp_path / "tasks.sqlite3"),
        MCACHE_QUEUE_URL=memcached_url,
        MCACHE_QUEUE_REFRESHER="tasks",
        MCACHE_QUEUE_NAME="mcache",
    )
    migrate = [sys.executable, "-m", "django", "migrate", "-v0"]
    subprocess.run(migrate, cwd=ROOT, env=env, check=True, timeout=120)
    workers.append(tasks_worker(env).start())
    django_codec = Codec(signing_key=derived_key(django_settings.SECRET_KEY))
    scenario(memcached_url, env, "tests.queues.django_builders", django_codec)
