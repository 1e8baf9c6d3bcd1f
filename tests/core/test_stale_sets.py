"""Composition rule 3: a build begun before a delete, a bump or a newer write stores nothing fresh.

The race: a build reads the database; a writer updates the row and deletes the
cache key; the build writes what it read. Every test holds a real build open
(a thread blocked inside the builder) while a writer acts, on every store:
memory, a memcached pool, a replicated memcached pool, Redis and tiered.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest

from mcache import NO_VALUE, Cache, Entry
from mcache.engine import write_lease
from mcache.engine.build import STALE_SERVED
from mcache.sansio.steps import perform, run_steps

STORES = ["memory", "memcached", "memcached_text", "memcached_replicas", "redis", "tiered"]


def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "memcached_replicas":
        return request.getfixturevalue("memcached_cluster_url") + "?replicas=2"
    if request.param == "tiered":
        cold = request.getfixturevalue("memcached_cluster_url")
        return "tiered://?" + urlencode({"hot": "memory://", "cold": cold})
    if request.param == "memcached":
        return request.getfixturevalue("memcached_cluster_url")
    if request.param == "memcached_text":
        return request.getfixturevalue("memcached_cluster_text_url")
    return request.getfixturevalue("redis_url")


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest) -> str:
    return store_url(request)


@pytest.fixture(params=[s for s in STORES if s != "memory"])
def shared_url(request: pytest.FixtureRequest) -> str:
    """A store other processes see (tiered: through its cold tier)."""
    return store_url(request)


class HeldBuild:
    """A ``get_or_build`` running in a thread, paused inside its builder until released."""

    def __init__(self, cache: Cache, key: Any, database: dict[str, int], **options: Any) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.result: list[Any] = []

        def build() -> int:
            value = database["row"]  # the read happens first, as a query would
            self.started.set()
            assert self.release.wait(10)
            return value

        def run() -> None:
            self.result.append(cache.get_or_build(key, build, **options))

        self.thread = threading.Thread(target=run)

    def __enter__(self) -> HeldBuild:
        self.thread.start()
        assert self.started.wait(10), "the build never started"
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(10)


def put_stale(cache: Cache, key: str, value: Any) -> None:
    store_key = cache.key(key)
    entry = Entry(value, cache.clock.time_ms() - 1000, 10, {})
    cache.store.set(store_key, cache.codec.dumps(entry.to_wire(), store_key), 60)


WRITERS: dict[str, Callable[[Cache, str], object]] = {
    "delete": lambda cache, key: cache.delete(key),
    "delete_many": lambda cache, key: cache.delete_many([key]),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("start", ["missing", "stale"])
def test_a_delete_during_the_build_wins(url: str, writer: str, start: str) -> None:
    cache = Cache(url, namespace="ss")
    database = {"row": 1}
    if start == "stale":
        put_stale(cache, "k", 0)
    with HeldBuild(cache, "k", database, ttl=60) as build:
        database["row"] = 2  # the writer commits its update, then clears the cache
        WRITERS[writer](cache, "k")
    assert build.result == [1], "the builder's caller still gets what it built"
    assert cache.get("k") is NO_VALUE, "the build left nothing behind"
    assert cache.get_or_build("k", lambda: database["row"], ttl=60) == 2
    assert cache.get_or_build("k", lambda: -1, ttl=60) == 2


def test_a_newer_set_during_the_build_is_kept(url: str) -> None:
    cache = Cache(url, namespace="ss")
    database = {"row": 1}
    with HeldBuild(cache, "k", database, ttl=60) as build:
        database["row"] = 2
        cache.set("k", 2)  # the writer puts the new value in itself
    assert build.result == [1]
    assert cache.get("k") == 2
    assert cache.get_or_build("k", lambda: -1, ttl=60) == 2


def test_an_invalidation_during_the_build_leaves_the_entry_stale(url: str) -> None:
    cache = Cache(url, namespace="ss")
    database = {"row": 1}
    with HeldBuild(cache, "k", database, ttl=60, tags=["rows"]) as build:
        database["row"] = 2
        cache.invalidate("rows")
    assert build.result == [1]
    stored = cache.store.get(cache.key("k"))
    entry = Entry.from_wire(cache.codec.loads(stored, cache.key("k")))
    assert entry is not None and entry.value == 1, "stored (a stale value may be served)"
    current = cache.tags.of_labels(list(entry.tags))  # on a pool, the copy next to the entry
    assert all(v < current[label] for label, v in entry.tags.items()), "but stale"
    assert cache.get("k") is NO_VALUE, "so no reader takes it as fresh"
    assert cache.get_or_build("k", lambda: database["row"], ttl=60, tags=["rows"]) == 2


def test_forgetting_a_memoized_call_during_its_build(url: str) -> None:
    cache = Cache(url, namespace="ss")
    database = {"row": 1}
    started, release = threading.Event(), threading.Event()

    @cache.cached(ttl=60)
    def row(pk: int) -> int:
        value = database["row"]
        started.set()
        assert release.wait(10)
        return value

    thread = threading.Thread(target=row, args=(7,))
    thread.start()
    assert started.wait(10)
    database["row"] = 2
    assert row.invalidate(7) is True, "the build's placeholder was there to forget"
    release.set()
    thread.join(10)
    assert row(7) == 2


def test_a_build_in_another_process_cannot_undo_a_delete(shared_url: str) -> None:
    """The writer and the builder need not share a process: only the store decides."""
    import multiprocessing

    from tests.core import workers

    url = shared_url
    cache = Cache(url, namespace="ss")
    context = multiprocessing.get_context("spawn")
    started, release, done = context.Event(), context.Event(), context.Queue()
    builder = context.Process(
        target=workers.held_build, args=(url, "ss", "k", 1, started, release, done)
    )
    builder.start()
    assert started.wait(30)
    cache.delete("k")
    release.set()
    assert done.get(timeout=30) == 1
    builder.join(10)
    assert cache.get("k") is NO_VALUE
    assert cache.get_or_build("k", lambda: 2, ttl=60) == 2


def test_a_lock_waiter_never_takes_a_build_begun_before_an_invalidation(
    shared_url: str,
) -> None:
    """Guarantee 1 for the callers that wait on another process's lock: process A builds
    a cold key from the row at v0; the row becomes v1 and its tag is invalidated; then B
    asks, finds A's lock and waits. A's entry, written after the bump, is already stale:
    B must not be handed it as fresh, though it began after ``invalidate()`` returned."""
    import multiprocessing

    from tests.core import workers

    url = shared_url
    cache = Cache(url, namespace="lw")
    context = multiprocessing.get_context("spawn")
    started, release, done = context.Event(), context.Event(), context.Queue()
    builder = context.Process(
        target=workers.held_build,
        args=(url, "lw", "k", "v0", started, release, done, ("row",)),
    )
    builder.start()
    try:
        assert started.wait(30), "A's build never started"
        cache.invalidate("row")  # the row is v1 from here on
        threading.Timer(0.5, release.set).start()  # A ends while B waits on its lock
        STALE_SERVED.set(False)
        got = cache.get_or_build("k", lambda: "v1", ttl=60, tags=["row"], wait=10)
        # B builds v1 once A's lock is free; had it read A's entry in the instant between
        # A's write and its unlock, v0 would reach it as what it is: stale, never fresh.
        assert got == "v1" or (got == "v0" and STALE_SERVED.get()), got
        assert done.get(timeout=30) == "v0", "A's own caller still gets what it built"
        assert cache.get_or_build("k", lambda: "v2", ttl=60, tags=["row"]) in {"v1", "v2"}
    finally:
        release.set()
        builder.join(10)


@pytest.fixture(params=["memcached_text", "memcached_replicas", "redis", "tiered"])
def add_lock_url(request: pytest.FixtureRequest) -> str:
    """A shared store whose build lock is an ``add`` (not memcached's meta lease)."""
    return store_url(request)


def test_a_lock_waiter_finding_a_stale_entry_while_the_lock_is_held_serves_it_stale(
    add_lock_url: str,
) -> None:
    """Nothing at first, then an entry stale on arrival (its tag moved on) while another
    holds the lock, as after a Redis failover whose holder could not free its lock: the
    waiter serves it stale once the lock has been held a quarter second since (it may be
    a holder freeing its lock), neither as fresh nor after waiting out ``wait``."""
    from mcache import Lock

    cache = Cache(add_lock_url, namespace="lw2")
    store_key = cache.key("k")
    held = Lock(cache.shared, cache.parts.derived_key("l", store_key), 10)
    assert held.try_acquire()
    stale = Entry("old", cache.clock.time_ms() + 60_000, 10, {"row": 1})  # row's tag is newer
    data = cache.codec.dumps(stale.to_wire(), store_key)
    threading.Timer(0.3, lambda: cache.store.set(store_key, data, 60)).start()
    STALE_SERVED.set(False)
    started = time.monotonic()
    got = cache.get_or_build("k", lambda: "built", ttl=60, tags=["row"], wait=5)
    took = time.monotonic() - started
    assert (got, STALE_SERVED.get()) == ("old", True)
    assert took < 2.0, f"waited {took:.1f} s: a stale entry is served, not waited past"
    held.release()


def test_placeholders_are_misses_for_every_plain_call() -> None:
    cache = Cache("memory://", namespace="ss")
    database = {"row": 1}
    with HeldBuild(cache, "k", database, ttl=60):
        assert cache.get("k") is NO_VALUE
        assert cache.get_many(["k"]) == {}
        assert cache.touch("k", 10) is False
        assert cache.add("k", "mine") is True, "add sees no value there"
    assert cache.get("k") == "mine", "and its value survives the build"


def test_a_failed_build_takes_its_placeholder_away() -> None:
    cache = Cache("memory://", namespace="ss")

    def fail() -> int:
        raise RuntimeError("backend down")

    with pytest.raises(RuntimeError):
        cache.get_or_build("k", fail, ttl=60)
    assert cache.store.get(cache.key("k")) is NO_VALUE


def test_a_rebuild_too_large_to_store_leaves_no_stale_entry(url: str) -> None:
    """As memcached on a failed update: the outdated value is gone, not served on and on."""
    cache = Cache(url, namespace="ss")
    put_stale(cache, "k", "small and old")
    huge = os.urandom(cache.store.max_value_size + 1)  # incompressible
    assert cache.get_or_build("k", lambda: huge, ttl=60) == huge
    assert cache.store.get(cache.key("k")) is NO_VALUE
    assert cache.get_or_build("k", lambda: "small and new", ttl=60) == "small and new"


def test_a_placeholder_is_counted_to_live_as_short_as_its_store_may_keep_it(
    memcached_text_url: str,
) -> None:
    """memcached counts whole seconds: a placeholder set for 2 s may be gone after 1, so the
    lease must be kept alive by then (counted as 2 s, a renewal could come too late)."""
    cache = Cache(memcached_text_url, namespace="pl")
    key = cache.key("short")
    started = cache.parts.clock.monotonic()
    lease = run_steps(
        write_lease.take_steps(
            cache.store, cache.codec, key, 2, True, lambda _: 0.0, cache.parts.random, started
        ),
        perform,
    )
    assert lease is not None and lease.placed
    assert lease.expires - started <= 1.0 + 0.5, "counted as living its whole nominal TTL"


def test_a_keep_alive_never_takes_the_token_of_what_replaced_its_key(url: str) -> None:
    """Found by the simulation: a build's keep-alive rewrote its placeholder with ``cas``,
    and before it read the new token back a writer deleted the key and another build
    added its own placeholder. The keep-alive took that one's token, and the first
    build's write, of a row read before the delete, then won over it, fresh."""
    cache = Cache(url, namespace="keep")
    key = cache.key("k")
    now = cache.parts.clock.monotonic
    lease = run_steps(
        write_lease.take_steps(
            cache.store, cache.codec, key, 2, True, lambda _: 0.0, cache.parts.random, now()
        ),
        perform,
    )
    assert lease is not None and lease.placed

    def delete_and_replace_after_the_rewrite(operation: Any) -> Any:
        result = perform(operation)
        if getattr(operation, "method", None) == "cas":  # the rewrite, before its read-back
            cache.store.delete(key)
            assert cache.get_or_build("k", lambda: "the writer's", ttl=60) == "the writer's"
        return result

    assert not run_steps(
        write_lease.keep_steps(cache.store, key, lease, 4, now()),
        delete_and_replace_after_the_rewrite,
    ), "the keep-alive did not see that its key was replaced"
    stale = cache.codec.dumps(Entry("read before the delete", 0, {}).to_wire(), key)
    assert not run_steps(write_lease.write_steps(cache.store, key, stale, lease, 60), perform)
    assert cache.get("k") == "the writer's"
