"""Addressable builders, rebuild jobs as data, and forced refreshes (``cache.refresh``)."""

from __future__ import annotations

import functools
import json
import threading

import pytest

from mcache import NO_VALUE, Cache, Entry, Lock
from mcache.engine.rebuild import run
from mcache.errors import ConfigError
from mcache.model.jobs import Job, address_of, resolve
from mcache.refreshers import ThreadPoolRefresher, refresher_named
from mcache.refreshers.queued import QueueRefresher
from tests.clocks import StandingClock

cache = Cache("memory://", namespace="refresh-tests", name="refresh-tests")
builds: list[str] = []


@cache.cached(ttl=60)
def price(sku: str, currency: str = "EUR") -> str:
    builds.append(sku)
    return f"{sku}: {len(builds)} {currency}"


def plain(n: int) -> int:
    return n * 2


def test_what_a_worker_can_import_is_addressable() -> None:
    assert address_of(plain) == (f"{__name__}:plain", (), {})
    assert address_of(functools.partial(plain, 3)) == (f"{__name__}:plain", (3,), {})
    assert address_of(functools.partial(price.uncached, "a1")) == (f"{__name__}:price", ("a1",), {})
    assert resolve(f"{__name__}:price") is price
    local = lambda: 1  # noqa: E731
    assert address_of(local) is None

    def closure() -> int:
        return 1

    assert address_of(closure) is None
    assert address_of(cache.get) is None, "a bound method: its instance cannot be imported"


def test_a_job_goes_through_json_and_is_run_by_a_worker_of_the_same_cache() -> None:
    builds.clear()
    key = cache.key(*price.key("a1"))
    entry = Entry("old", cache.clock.time_ms() - 1000, 10, {})
    cache.store.set(key, cache.codec.dumps(entry.to_wire(), key), 600)
    lock = Lock(cache.shared, cache.parts.derived_key("l", key), 5)
    assert lock.try_acquire()
    arguments = Job.encode_arguments(cache.codec.dumps([["a1"], {"currency": "EUR"}], key))
    options = {name: getattr(cache.defaults, name) for name in cache.defaults.__dataclass_fields__}
    job = Job(cache.locator, f"{__name__}:price", arguments, key, [], options, lock.key,  # type: ignore[arg-type]
              lock.token.decode(), entry.fresh_until_ms)  # fmt: skip
    payload = job.to_json()
    assert json.loads(payload)["builder"] == f"{__name__}:price"
    assert run(payload) == "built"
    assert builds == ["a1"]
    assert price("a1") == "a1: 1 EUR", "the worker's entry is what readers get"
    assert cache.store.get(lock.key) is NO_VALUE, "the worker released the enqueuer's lock"
    assert run(payload) == "fresh", "a job for a key rebuilt since is skipped"
    with pytest.raises(ValueError, match="version"):
        Job.from_json(json.dumps({"v": 99}))


def test_refresh_rebuilds_a_fresh_entry_once_out_of_turn() -> None:
    builds.clear()
    assert price("b2") == "b2: 1 EUR"
    assert price("b2") == "b2: 1 EUR", "fresh: a hit"
    assert price.refresh("b2") == "b2: 2 EUR"
    assert cache.refresh(price, "b2") == "b2: 3 EUR"
    assert price("b2") == "b2: 3 EUR"
    assert builds == ["b2", "b2", "b2"]


def test_refresh_of_a_key_and_its_builder() -> None:
    local = Cache("memory://", namespace="rk")
    assert local.get_or_build("k", lambda: 1, tags=["t"]) == 1
    assert local.refresh("k", lambda: 2, tags=["t"]) == 2
    assert local.get_or_build("k", lambda: 3, tags=["t"]) == 2
    with pytest.raises(TypeError, match="builder"):
        local.refresh("k")
    with pytest.raises(TypeError, match="colour"):
        local.refresh("k", lambda: 4, colour="red")


def test_refresh_waits_for_a_rebuild_under_way_then_builds_its_own() -> None:
    local = Cache("memory://", namespace="rw", wait=0.5)
    local.get_or_build("k", lambda: "v1")
    other = Lock(local.shared, local.parts.derived_key("l", local.key("k")), 30)
    assert other.try_acquire()
    threading.Timer(0.2, other.release).start()
    assert local.refresh("k", lambda: "v2") == "v2"
    assert local.get("k") == "v2"


def test_refreshers_by_name_and_their_mistakes() -> None:
    assert isinstance(refresher_named("thread"), ThreadPoolRefresher)
    with pytest.raises(ConfigError, match="'thread', 'celery', 'rq', 'tasks'"):
        Cache(refresher="cron")
    with pytest.raises(ConfigError, match="refresh_fallback must be 'thread' or 'none'"):
        Cache(refresher="rq", refresh_fallback="later")


def test_a_queue_refresher_without_its_package_names_what_to_install(tmp_path) -> None:
    """Run in a process where the package cannot be imported, as where it is not installed."""
    import subprocess
    import sys

    blocker = tmp_path / "rq.py"
    blocker.write_text("raise ImportError('No module named rq', name='rq')\n")
    code = "from mcache import Cache; Cache(refresher='rq')"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "ConfigError: refresher='rq' needs its package" in done.stderr
    assert 'pip install "rq"' in done.stderr


class RefusingQueue(QueueRefresher):
    """A queue whose broker is down: every send raises, and is counted."""

    def __init__(self, retry_after: float) -> None:
        self.standing = StandingClock()
        """The circuit's windows are counted on it: the test moves it, nobody sleeps."""
        super().__init__(
            retry_after=retry_after, max_retry_after=4 * retry_after, clock=self.standing
        )
        self.sends = 0

    def send(self, payload: str, context: object) -> None:
        self.sends += 1
        raise ConnectionError("broker down")


def stale_reports(cache: Cache, count: int) -> None:
    for number in range(count):
        key = cache.key("tests.core.test_refresh.report", (number,), {})
        entry = Entry("old", cache.clock.time_ms() - 1000, 10, {})
        cache.store.set(key, cache.codec.dumps(entry.to_wire(), key), 600)


def report(number: int) -> str:
    return f"report {number}"


class RefusedTogether(RefusingQueue):
    """Two sends under way when the broker went: both are refused, at the same moment."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(retry_after)
        self.together = threading.Barrier(2)

    def send(self, payload: str, context: object) -> None:
        self.together.wait(10)
        super().send(payload, context)


def test_sends_refused_together_open_the_circuit_once() -> None:
    """Sends that were under way when the broker went fail together: the window they open is
    ``retry_after``, not doubled by each (a busy site's outage would otherwise keep its
    rebuilds off the queue for a minute after the broker is back)."""
    queue = RefusedTogether(retry_after=0.5)
    cache = Cache("memory://", namespace="cb2", name="cb2", refresh="background", refresher=queue)
    cached = cache.cached(ttl=60)(report)
    stale_reports(cache, 2)
    assert [cached(n) for n in range(2)] == ["old"] * 2
    assert queue.wait_idle(10) and queue.sends == 2
    assert queue.broken()
    queue.standing.now += 0.6
    assert not queue.broken(), "one window of retry_after, as for a single refused send"
    stale_reports(cache, 1)
    queue.together = threading.Barrier(1)
    cached(0)  # the retry is refused too: now the window doubles
    assert queue.wait_idle(10) and queue.sends == 3
    queue.standing.now += 0.6
    assert queue.broken(), "a refused retry doubles the window"


def test_a_failed_send_sends_the_next_rebuilds_to_the_fallback_at_once() -> None:
    """After a refused send, rebuilds fall back without trying the broker until the window
    ends: each would otherwise spend the broker's seconds while its key's lock is held."""
    queue = RefusingQueue(retry_after=0.5)
    cache = Cache("memory://", namespace="cb", name="cb", refresh="background", refresher=queue)
    cached = cache.cached(ttl=60)(report)
    stale_reports(cache, 10)
    assert [cached(n) for n in range(10)] == ["old"] * 10
    assert queue.wait_idle(10)
    assert queue.sends == 1, "one refused send opened the circuit"
    assert [cache.get(("tests.core.test_refresh.report", (n,), {})) for n in range(10)] == [
        f"report {n}" for n in range(10)
    ], "every one rebuilt here, by the fallback"
    assert queue.broken()
    queue.standing.now += 0.6  # the window ends: the next rebuild tries the broker again
    stale_reports(cache, 1)
    cached(0)
    assert queue.wait_idle(10) and queue.sends == 2
