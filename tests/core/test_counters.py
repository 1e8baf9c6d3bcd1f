"""Counters on real servers: no lost increments, one seed, rotating slots, period swaps."""

from __future__ import annotations

import logging
import math
import multiprocessing
import time

import pytest

from mcache import NO_VALUE, Cache, FakeClock
from mcache.features.counters import counter_key
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
    # A view counter shows what the database holds, not 0, while the store is down.
    views = cache.view_counter("post", initial=lambda pk: 104)
    assert (
        views.value(1) == 104 and views.incr(1) == 104 and views.values([1, 2]) == {1: 104, 2: 104}
    )
    assert cache.online_counter("online").count() == 0
    assert "carrying on without the cache" in caplog.text


def test_a_counter_whose_key_keeps_vanishing_degrades_and_logs(
    memcached_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """incr finds no key, add finds one, five times over: a count of 0 (or the seed), logged."""
    from tests.memcached_proxy import MemcachedProxy

    host, port = memcached_url.removeprefix("memcached://").rsplit(":", 1)
    vanishing = {b"incr ": b"NOT_FOUND\r\n", b"add ": b"NOT_STORED\r\n"}
    proxy = MemcachedProxy((host, int(port)), answers=vanishing)
    try:
        cache = Cache(f"memcached://{proxy.address}?protocol=text", namespace="vanish")
        with caplog.at_level(logging.WARNING, logger="mcache"):
            assert cache.counter("hits").incr() == 0
            assert cache.view_counter("post", initial=lambda pk: 104).incr(1) == 104
        assert proxy.refused >= 2 * 5, "every try went to the server"
        assert "vanished between incr and add 5 times in a row" in caplog.text
    finally:
        proxy.close()


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
    clock = FakeClock(1_800_000_000.0)  # a multiple of 12: a slot starts here
    cache = Cache(MemoryStore(clock=clock), namespace="on", clock=clock)
    online = cache.online_counter("site", window=60, slots=6)  # five 12 s slots counted
    assert online.slot_len == 12
    for visitor in range(25):
        assert online.hit(f"visitor {visitor}") is True
    assert online.hit("visitor 0") is False, "a repeat visit inside the window"
    assert online.count() == 0, "the current slot is still filling"
    clock.advance(12)
    assert online.count() == 25
    assert online.hit("visitor 0") is False
    clock.advance(47)  # 59 s: the window that holds the first visit is still being counted
    assert online.hit("visitor 0") is False and online.count() == 25
    clock.advance(2)  # 61 s: five slots on, a second more for whole-second expiry
    assert online.hit("visitor 0") is True  # counted again, in slot 5 (filling)
    assert online.count() == 25, "slots 0-4: each visitor once, visitor 0 included"
    clock.advance(12)
    assert online.count() == 1, "visitors older than the window dropped out"
    clock.advance(120)
    first_slot = 1_800_000_000 // 12
    slot_keys = [online.slot_key(first_slot + n) for n in range(30)]
    markers = [counter_key(cache, "om", "site", f"visitor {v}") for v in range(25)]
    assert cache.store.get_many(slot_keys + markers) == {}, "slot keys and markers expired"


def test_online_counter_counts_the_filling_slot_when_asked() -> None:
    """``count(current=True)``: a visitor shows at once, and a steady one still counts once."""
    clock = FakeClock(1_800_000_000.0)  # a slot starts here
    cache = Cache(MemoryStore(clock=clock), namespace="on-now", clock=clock)
    online = cache.online_counter("site", window=60, slots=6)
    online.hit("the visitor looking")
    assert (online.count(), online.count(current=True)) == (0, 1), "online while looking"
    online.hit("another")
    assert online.count(current=True) == 2
    for second in range(1, 200):  # a steady visitor, once a second, and one who left
        clock.advance(1)
        online.hit("the visitor looking")
        # Never twice: the marker ends a second into the slot where the visitor is counted
        # again (memcached may expire a second early), and in that second they are not.
        steady = second % 60 != 0
        another = second < 60  # counted in their slot and the four after it
        assert online.count(current=True) == steady + another, second
    assert online.count() == 1


def test_online_counter_counts_the_whole_window_on_memcached(memcached_url: str) -> None:
    """Real time on memcached's whole-second expiry: 10 s, six 2 s slots (five counted).

    Anonymous hits at 4 a second make a full window count 40 (a window of 8.3 s
    would count 33); one visitor seen every quarter second counts exactly 1.
    """
    cache = Cache(memcached_url, namespace=f"online-{time.time_ns()}")
    hits = cache.online_counter("hits", window=10, slots=6)
    people = cache.online_counter("people", window=10, slots=6)
    start = math.ceil(time.time() / 2) * 2 + 0.05  # just after a slot boundary
    counts: list[tuple[int, int]] = []
    for tick in range(4 * 17):  # 17 s
        time.sleep(max(0.0, start + tick / 4 - time.time()))
        if tick % 8 == 1 and tick >= 4 * 12:  # from the sixth slot on, once a slot
            counts.append((hits.count(), people.count()))
        hits.hit()
        people.hit("the same visitor")
    assert len(counts) == 3
    for anonymous, visitors in counts:
        assert 38 <= anonymous <= 42, counts
        assert visitors == 1, counts


def test_visitor_counter_holds_its_counts_to_the_periods_last_second_on_memcached(
    memcached_url: str,
) -> None:
    """Real time on memcached: a 3 s period, read in its last tenth of a second and after."""
    cache = Cache(memcached_url, namespace=f"visits-{time.time_ns()}")
    visits = cache.visitor_counter("home", period=3)
    start = math.ceil(time.time() / 3) * 3  # a period starts here
    time.sleep(start + 0.05 - time.time())
    for _ in range(7):
        visits.hit()
    time.sleep(start + 2.92 - time.time())  # the period's last tenth of a second
    assert visits.value() == 7
    time.sleep(start + 3.05 - time.time())
    assert (visits.value(), visits.previous()) == (0, 7)
    visits.hit()
    time.sleep(start + 5.92 - time.time())  # the next period's last tenth of a second
    assert (visits.value(), visits.previous()) == (1, 7)
    time.sleep(start + 6.05 - time.time())
    assert (visits.value(), visits.previous()) == (0, 1)


@pytest.mark.parametrize("server", ["redis", "sentinel", "cluster"])
def test_online_counter_hyperloglog_on_redis(server: str, request: pytest.FixtureRequest) -> None:
    clock = FakeClock(1_800_000_000.0)
    cache = Cache(request.getfixturevalue(f"{server}_url"), namespace="hll", clock=clock)
    online = cache.online_counter("site", window=60, slots=6)
    assert online.hll
    for visitor in range(1000):
        online.hit(visitor)
        online.hit(visitor)
    clock.advance(12)
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
    assert visits.previous() == 40, "the period's key outlives the boundary"
    clock.advance(3599)
    assert visits.previous() == 40, "…for the whole next period"
    clock.advance(1)
    assert visits.previous() == 0
    clock.advance(2)
    assert cache.store.get(counter_key(cache, "v", "home", 500_000)) is NO_VALUE, "expired"
