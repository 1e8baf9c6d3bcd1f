"""Counters on real servers: no lost increments, one seed, rotating slots, period swaps."""

from __future__ import annotations

import multiprocessing

import pytest

from mcache import Cache, FakeClock
from mcache.counters import counter_key
from mcache.stores import MemoryStore
from tests.core import workers


@pytest.fixture(params=["memcached", "memcached_text", "redis", "sentinel", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def run_processes(target, args_per_process: list[tuple]) -> None:
    context = multiprocessing.get_context("spawn")
    go = context.Event()
    processes = [context.Process(target=target, args=(*args, go)) for args in args_per_process]
    for process in processes:
        process.start()
    go.set()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0


def test_eight_processes_lose_no_increment(url: str) -> None:
    run_processes(workers.count_up, [(url, "cnt", "hits", 1000)] * 8)
    assert Cache(url, namespace="cnt").counter("hits").value() == 8000


def test_first_views_seed_once(url: str) -> None:
    run_processes(workers.first_views, [(url, "views", 10)] * 5)
    cache = Cache(url, namespace="views")
    assert cache.view_counter("post").value(7) == 41 + 50
    assert cache.counter("initial calls").value() >= 1


def test_counter_basics_and_key_prefix() -> None:
    cache = Cache(MemoryStore(), namespace="site")
    hits = cache.counter("hits")
    assert (hits.incr(), hits.incr(4), hits.decr(2), hits.value()) == (1, 5, 3, 3)
    hits.reset()
    assert hits.value() == 0
    assert hits.key.startswith("site:c:")
    assert cache.online_counter("online").slot_key(0).startswith("site:o:")


def test_counters_fail_open(caplog) -> None:
    from tests.servers import free_port

    cache = Cache(f"memcached://127.0.0.1:{free_port()}?connect_timeout=0.2")
    assert cache.counter("hits").incr() == 0
    assert cache.view_counter("post", initial=lambda pk: 5).value(1) == 0
    assert cache.online_counter("online").count() == 0
    assert "carrying on without the cache" in caplog.text


def test_view_counts_flush_deltas_once(url: str) -> None:
    cache = Cache(url, namespace="vf")
    database = {1: 100, 2: 7, 3: 0}
    views = cache.view_counter("post", initial=database.__getitem__)
    for ident, times in ((1, 3), (2, 1)):
        for _ in range(times):
            views.incr(ident)
    assert views.values([1, 2, 3]) == {1: 103, 2: 8, 3: 0}
    assert views.pending() == {1: 3, 2: 1}

    def write_back(ident: int, delta: int) -> None:
        database[ident] += delta

    other_process = cache.view_counter("post", initial=database.__getitem__)
    assert other_process.flush(write_back) == 2, "any process can flush what others counted"
    assert database == {1: 103, 2: 8, 3: 0}
    assert views.flush(write_back) == 0 and views.pending() == {}
    views.incr(1)
    assert views.pending() == {1: 1}


def test_failed_write_back_keeps_its_delta() -> None:
    cache = Cache(MemoryStore(), namespace="vf")
    views = cache.view_counter("post", initial=lambda ident: 0)
    views.incr(1)
    views.incr(2)

    def flaky(ident: int, delta: int) -> None:
        if ident == 2:
            raise OSError("database away")

    assert views.flush(flaky) == 1
    assert views.pending() == {2: 1}


def test_online_counter_window_and_slots() -> None:
    clock = FakeClock(1_800_000_000.0)
    cache = Cache(MemoryStore(clock=clock), namespace="on", clock=clock)
    online = cache.online_counter("site", window=60, slots=6)
    for visitor in range(25):
        assert online.hit(f"visitor {visitor}") is True
    assert online.hit("visitor 0") is False, "a repeat visit inside the window"
    assert online.count() == 0, "the current slot is still filling"
    clock.advance(10)
    assert online.count() == 25
    assert online.hit("visitor 0") is False
    clock.advance(55)  # the markers' window has passed; the first slot is about to turn over
    assert online.hit("visitor 0") is True
    clock.advance(10)
    assert online.count() == 1, "visitors older than the window dropped out"
    clock.advance(120)
    first_slot = 1_800_000_000 // 10
    slot_keys = [online.slot_key(first_slot + n) for n in range(30)]
    markers = [counter_key(cache, "om", "site", f"visitor {v}") for v in range(25)]
    assert cache.store.get_many(slot_keys + markers) == {}, "slot keys and markers expired"


@pytest.mark.parametrize("server", ["redis", "sentinel", "cluster"])
def test_online_counter_hyperloglog_on_redis(server: str, request: pytest.FixtureRequest) -> None:
    clock = FakeClock(1_800_000_000.0)
    cache = Cache(request.getfixturevalue(f"{server}_url"), namespace="hll", clock=clock)
    online = cache.online_counter("site", window=60, slots=6)
    assert online.hll
    for visitor in range(1000):
        online.hit(visitor)
        online.hit(visitor)
    clock.advance(10)
    assert online.count() == pytest.approx(1000, rel=0.03)
    markers = cache.online_counter("site-exact", window=60, slots=6, unique="markers")
    assert not markers.hll


def test_visitor_counter_keeps_counts_across_the_swap() -> None:
    clock = FakeClock(1_800_000_000.0)  # a multiple of 3600: a period starts here
    cache = Cache(MemoryStore(clock=clock), namespace="vc", clock=clock)
    visits = cache.visitor_counter("home", period=3600)
    clock.advance(3000)
    for _ in range(40):
        visits.hit()
    assert visits.value() == 40
    clock.advance(599)  # the last whole second of the period
    assert visits.value() == 40
    clock.advance(1)  # the swap
    assert visits.value() == 0
    assert visits.previous() == 40, "the shadow outlives the boundary"
    clock.advance(3599)
    assert visits.previous() == 40, "…for the whole next period"
    clock.advance(1)
    assert visits.previous() == 0
