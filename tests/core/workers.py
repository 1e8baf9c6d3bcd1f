"""Code that runs in spawned processes during the concurrency tests.

Each process builds its own ``Cache`` from a store URL (nothing is shared but the
server), then its threads call ``get_or_build`` together when told to go.
Builds are counted in the store itself with ``incr``, so a build in any process
is seen.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from mcache import NO_VALUE, Cache, Lock
from mcache.stores.memcached.store import meta

BUILDS_KEY = "test:builds"


def counting_builder(cache: Cache, seconds: float, label: str) -> Any:
    """Return a builder that sleeps ``seconds``, counts itself in the store, and says who built."""

    def build() -> str:
        time.sleep(seconds)
        if cache.store.incr(BUILDS_KEY, 1) is None:
            cache.store.add(BUILDS_KEY, b"0", 0)
            cache.store.incr(BUILDS_KEY, 1)
        return f"built by {label}"

    return build


def run_together(target: Any, threads: int, ready: Any) -> None:
    """Run ``target`` on ``threads`` threads, say this process is ready, wait for them all."""
    running = [threading.Thread(target=target) for _ in range(threads)]
    for thread in running:
        thread.start()
    ready.put(os.getpid())
    for thread in running:
        thread.join()


def stampede(
    url: str,
    namespace: str,
    key: str,
    threads: int,
    build_seconds: float,
    options: dict[str, Any],
    ready: Any,
    go: Any,
    results: Any,
    asynchronous: bool = False,
) -> None:
    """Run ``threads`` concurrent get_or_build calls here; report each (value, seconds).

    ``asynchronous``: ``threads`` asyncio tasks on one loop call aget_or_build.
    """
    cache = Cache(url, namespace=namespace)
    if asynchronous:
        astampede_on(cache, key, threads, build_seconds, options, ready, go, results)
        return
    options = dict(options)
    linger = options.pop("linger", 0)
    build = counting_builder(cache, build_seconds, f"pid {os.getpid()}")
    outcomes: list[tuple[Any, float]] = []
    guard = threading.Lock()

    def call() -> None:
        go.wait()
        started = time.monotonic()
        value = cache.get_or_build(key, build, **options)
        with guard:
            outcomes.append((value, time.monotonic() - started))

    run_together(call, threads, ready)
    time.sleep(linger)  # let a background refresh finish before the process ends
    cache.counts.flush()
    results.put(outcomes)


def astampede_on(
    cache: Cache,
    key: str,
    tasks: int,
    build_seconds: float,
    options: dict[str, Any],
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    """:func:`stampede` through the async driver: ``tasks`` asyncio tasks on one loop."""
    options = dict(options)
    linger = options.pop("linger", 0)
    count = counting_builder(cache, 0, f"pid {os.getpid()}")

    async def build() -> str:
        await asyncio.sleep(build_seconds)
        return count()  # type: ignore[no-any-return]

    async def call() -> tuple[Any, float]:
        started = time.monotonic()
        value = await cache.aget_or_build(key, build, **options)
        return value, time.monotonic() - started

    async def together() -> list[tuple[Any, float]]:
        outcomes = await asyncio.gather(*(call() for _ in range(tasks)))
        await asyncio.sleep(linger)  # let a background refresh finish before the loop ends
        return list(outcomes)

    ready.put(os.getpid())
    go.wait()
    outcomes = asyncio.run(together())
    time.sleep(linger)
    cache.counts.flush()
    results.put(outcomes)


def server_leases(cache: Cache) -> bool:
    """Whether ``cache``'s builds take the server's lease (memcached's meta protocol)
    rather than a lock key of their own."""
    speaks_meta = getattr(cache.store, "speaks_meta", None)  # waits for a probe under way
    return speaks_meta is not None and cache.store.replicas == 1 and speaks_meta()  # type: ignore[attr-defined]


def _ask_owner(cache: Cache, store_key: str, request: bytes) -> meta.MetaReply:
    """Send one meta request to the server owning ``store_key``; return its reply."""
    server = cache.store.ring.server_for(store_key)  # type: ignore[attr-defined]
    with socket.create_connection((server.host, server.port), timeout=2) as sock:
        sock.sendall(request)
        reply, _ = meta.read_reply(sock)
    return reply


def build_lock_held(cache: Cache, key: str) -> bool:
    """Whether someone holds the right to build ``key``: its lock key, or the server's
    lease on it (memcached answers ``Z`` to anyone else who asks).

    Asking memcached about a stale item wins it (``W``) when nobody holds it: the
    win is handed straight back (``md … I``), as a build that stored nothing does.
    """
    if cache.store.get(cache.parts.derived_key("l", cache.key(key))) is not NO_VALUE:
        return True  # (on a meta pool too: a call made while it asked its servers)
    if not server_leases(cache):
        return False
    store_key = cache.key(key)
    reply = _ask_owner(cache, store_key, meta.get(store_key))
    if reply.won and reply.cas is not None:
        _ask_owner(cache, store_key, meta.delete(store_key, stale=True, cas=reply.cas))
    return reply.other_won


def hold_build_lock(cache: Cache, key: str, timeout: int) -> Callable[[], bool]:
    """Take the right to build ``key`` as another process would: its lock key, or the
    server's lease (a miss's placeholder, a stale entry's win). Return what gives it
    back, as that process would after building nothing."""
    store_key = cache.key(key)
    if not server_leases(cache):
        lock = Lock(cache.shared, cache.parts.derived_key("l", store_key), timeout)
        assert lock.try_acquire()
        return lock.release
    ttl = timeout + cache.store.traits.expiry_slack  # as a lock's would be
    reply = _ask_owner(cache, store_key, meta.get(store_key, lease_ttl=ttl))
    if not reply.won and reply.cas is not None:  # an entry: mark it stale, then win it
        _ask_owner(cache, store_key, meta.delete(store_key, stale=True, cas=reply.cas))
        reply = _ask_owner(cache, store_key, meta.get(store_key, lease_ttl=ttl))
    assert reply.won and reply.cas is not None, f"could not take the lease of {key!r}: {reply}"
    request = meta.delete(store_key, stale=not reply.won_placeholder, cas=reply.cas)
    return lambda: _ask_owner(cache, store_key, request).code == b"HD"


def wait_for_lock(cache: Cache, key: str, timeout: float = 30) -> None:
    """Wait until someone holds the right to build ``key`` (see :func:`build_lock_held`)."""
    deadline = time.monotonic() + timeout
    while not build_lock_held(cache, key):
        if time.monotonic() > deadline:
            raise AssertionError(f"nobody took the lock of {key!r} within {timeout} s")
        time.sleep(0.02)


def hold_lock_forever(
    url: str, namespace: str, key: str, lock_timeout: int, building: Any = None
) -> None:
    """Win the lock for ``key`` and build for a very long time (the test kills us);
    ``building`` (an Event) is set once the build runs, its lock held as a build's is."""

    def build() -> None:
        if building is not None:
            building.set()
        time.sleep(3600)

    cache = Cache(url, namespace=namespace)
    cache.get_or_build(key, build, lock_timeout=lock_timeout)


def count_events(url: str, namespace: str, hits: int, misses: int) -> None:
    """Produce ``misses`` builds and ``hits`` hits, then flush the counters."""
    cache = Cache(url, namespace=namespace, stats_interval=3600)
    for i in range(misses):
        cache.get_or_build(("miss", os.getpid(), i), lambda: 1)
    for _ in range(hits):
        cache.get_or_build(("miss", os.getpid(), 0), lambda: 1)
    cache.counts.flush()


def count_up(url: str, namespace: str, name: str, times: int, go: Any) -> None:
    """Increment counter ``name`` ``times`` times once told to go."""
    cache = Cache(url, namespace=namespace)
    counter = cache.counter(name)
    go.wait()
    for _ in range(times):
        counter.incr()


def first_views(url: str, namespace: str, threads: int, go: Any) -> None:
    """Count one view of post 7 per thread, all at once; initial() is counted in the store."""
    cache = Cache(url, namespace=namespace)

    def initial(ident: object) -> int:
        cache.counter("initial calls").incr()
        return 41

    views = cache.view_counter("post", initial=initial)
    workers = [threading.Thread(target=lambda: (go.wait(), views.incr(7))) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def held_build(
    url: str,
    namespace: str,
    key: str,
    value: Any,
    started: Any,
    release: Any,
    done: Any,
    tags: tuple[str, ...] = (),
) -> None:
    """Build ``key`` (tagged ``tags``) as ``value``, pausing inside the builder until told
    to go on."""
    cache = Cache(url, namespace=namespace)

    def build() -> Any:
        started.set()
        release.wait(30)
        return value

    done.put(cache.get_or_build(key, build, ttl=60, tags=list(tags)))


def build_once(
    url: str, namespace: str, key: str, seconds: float, options: dict[str, Any], done: Any
) -> None:
    """One get_or_build of ``key`` with a counted builder taking ``seconds``; report its value."""
    cache = Cache(url, namespace=namespace)
    build = counting_builder(cache, seconds, f"pid {os.getpid()}")
    done.put(cache.get_or_build(key, build, **options))


def stale_by_time(
    url: str,
    namespace: str,
    keys: int,
    threads: int,
    ready: Any,
    written: Any,
    go: Any,
    read: Any,
    all_read: Any,
    results: Any,
) -> None:
    """Say this process started; once told the entries are ``written``, read every key once
    while fresh; told to go (they are stale by time by then), read every key from every
    thread at once, say so on ``read``. Report the values read and the lock ``add``s sent.
    A rebuild waits for ``all_read`` (every process's readers done), so every reader reads
    while its key is stale, however slow the machine; the entries are written once every
    process has started, so none is stale by its first read, however slow the start."""
    cache = Cache(url, namespace=namespace)
    counted = counting_builder(cache, 0.2, f"pid {os.getpid()}")

    def build() -> str:
        assert all_read.wait(30), "the readers never finished"
        return counted()

    options = {"ttl": 2, "stale_ttl": 60, "refresh": "background"}
    adds = []
    add = cache.store.add

    def counted_add(key: str, value: bytes, ttl: int = 0) -> bool:
        adds.append(key)
        return add(key, value, ttl)

    cache.store.add = counted_add  # type: ignore[method-assign]
    ready.put(os.getpid())
    assert written.wait(60), "the entries were never written"
    for number in range(keys):
        cache.get_or_build(("report", number), build, **options)
    values: list[Any] = []
    guard = threading.Lock()

    def read_all() -> None:
        go.wait()
        for number in range(keys):
            value = cache.get_or_build(("report", number), build, **options)
            with guard:
                values.append(value)

    run_together(read_all, threads, ready)
    read.put(os.getpid())
    cache.refresher.wait_idle(40)  # the background rebuilds this process won
    results.put((values, len(adds)))
