"""Cache instrumentation, aggregated across processes through the store.

Each ``Cache`` counts what happens to it (hits, stale answers, builds, waits…)
in memory, and every ``interval`` seconds one caller adds the deltas to counters
in the store with ``incr`` (two round trips, never one per request; two more once a
minute, for the last hour's samples of :mod:`.samples`). That caller's driver sends them
after its call, as steps (:meth:`CacheStats.flush_steps`): an async caller awaits the
store's async twin, so a flush never blocks its loop. Any process
can then read the totals of every process, which is what lets the hit ratio be
reported net of lock, tag and counter traffic: those never pass through here.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from mcache.clock import Clock, system_clock
from mcache.contract.store import Store
from mcache.contract.store_helpers import stored_count
from mcache.logs import FailureLog
from mcache.model.tags import incr_many_steps
from mcache.observe.events import CURRENT_CALL, BuildWatch, Observer, Origin, quietly
from mcache.observe.samples import hit_ratio, offer_sample_steps
from mcache.sansio.steps import Steps, StoreCall, aperform, arun_steps, perform, run_steps

__all__ = ["COUNTERS", "SESSIONS", "CacheStats", "add_counts_steps", "counter_key"]

COUNTERS = {
    "hits": "fresh values served",
    "misses": "reads that found nothing usable",
    "stale": "stale values served while one caller rebuilt",
    "builds": "builds run",
    "build_errors": "builds that raised",
    "lock_waits": "callers that waited for another's build",
    "wait_timeouts": "waits for another's build that ran out",
    "coalesced": "callers that shared another thread's call in this process",
    "uncached": "values their builder marked Uncacheable",
    "store_errors": "store failures answered as misses",
    "too_large": "values over the store's item limit, served and not stored",
}
"""What is counted, and what each count means (the Prometheus metrics' help)."""

SESSIONS = "sessions"
"""The family the session stores of both adapters count as: sessions are no cached values,
so their reads stay out of the hit ratio, on a line of their own."""

FLUSHED = "flushed"
"""The counter key holding when a process last flushed (ms since the epoch): how old the
totals a reader sees may be."""

_LIVE: weakref.WeakSet[CacheStats] = weakref.WeakSet()
EXIT_FLUSH_SECONDS = 1.0  # what exit may wait for servers that accept and never answer


@atexit.register
def _flush_at_exit() -> None:
    """Flush what every live ``Cache`` counted since its last flush, and what its observers
    hold (the dashboard's per-family counts), within a second.

    A short-lived process (a command, a recycled worker) would otherwise take up to
    ``interval`` seconds of counts with it. A daemon thread does it, so that a hung
    server cannot hold the exit up.
    """
    live = [stats for stats in list(_LIVE) if stats.observers or any(stats.local().values())]
    if not live:
        return
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # a server already stopped at exit is no news
    try:
        flusher = threading.Thread(target=_flush_and_close, args=(live,), daemon=True)
        try:
            flusher.start()
        except RuntimeError:  # Python 3.12.0 and 3.12.1 start no thread at exit
            _flush_and_close(live)  # bounded by the store's own timeouts instead
        else:
            flusher.join(EXIT_FLUSH_SECONDS)
    finally:
        logging.disable(previous)


def _flush_and_close(live: list[CacheStats]) -> None:
    # The connections the flush took are the process's last: closed, not left to exit.
    for stats in live:
        stats.flush(quiet=True)
        for observer in stats.observers:
            quietly(observer.exiting)
        with contextlib.suppress(Exception):
            stats.store.close()


def _forget_parent_counts() -> None:
    """In a forked child: the parent's pending counts are the parent's to flush."""
    for stats in list(_LIVE):
        stats._lock = threading.Lock()  # a parent thread may have held it at the fork
        stats._pending = dict.fromkeys(COUNTERS, 0)
        stats._hits, stats._hits_taken = itertools.count(), 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_counts)


def add_counts_steps(store: Store, deltas: dict[str, int], ttl: int = 0) -> Steps[None]:
    """Add ``deltas`` to counters in ``store`` (one ``incr_many``), creating those that are
    missing with ``ttl`` (0: no expiry); a counter another process created meanwhile is
    incremented instead."""
    results = yield from incr_many_steps(store, deltas)
    for key, result in results.items():
        if result is None and not (yield StoreCall(store, "add", (key, b"%d" % deltas[key], ttl))):
            yield StoreCall(store, "incr", (key, deltas[key]))


class CacheStats:
    """Counters of one ``Cache``, flushed to the store every ``interval`` seconds and at exit."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        interval: float = 5.0,
        failures: FailureLog | None = None,
        label: str | None = None,
        family: str = "",
        clock: Clock = system_clock,
    ) -> None:
        self.store = store
        self.clock = clock
        """What the flush interval, the flush's time stamp and the builds' durations are
        read on (the cache's)."""
        self.namespace = namespace
        self.family = family
        """Counted apart under this name ("": the namespace's own counters), as a sessions'
        cache is: out of the namespace's hit ratio, on a line of its own (:func:`apart`)."""
        self.origin = Origin(namespace, label or namespace or "default")
        self.observers: list[Observer] = []
        """What watches this cache's events as they happen (see :mod:`mcache.observe.events`)."""
        self.call_watchers: list[Observer] = []
        """The observers also told of each call (:attr:`Observer.watches_calls`)."""
        self.interval = interval
        self.failures = failures or FailureLog()
        self._pending: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._hits = itertools.count()  # see hit
        self._hits_taken = 0
        self._lock = threading.Lock()
        self._next_flush = clock.monotonic() + interval
        self._sampled_minute = 0
        """The last minute this process offered a sample of (see :mod:`.samples`)."""
        _LIVE.add(self)

    def key(self, name: str) -> str:
        """Return the store key of counter ``name``."""
        return counter_key(self.namespace, self.family, name)

    def add(self, name: str, count: int = 1, key: str | None = None) -> None:
        """Count ``count`` events ``name`` (of ``key``). Counting never flushes: it runs
        inside the steps of a call, where a store call of its own would block an async
        caller's loop; the call's driver flushes when one is due (:meth:`flush_if_due`)."""
        lock = self._lock
        lock.acquire()  # not ``with``: this runs on every hit, and costs a third less so
        try:
            self._pending[name] += count
        finally:
            lock.release()
        if self.observers:
            self._tell(name, count, key)

    def hit(self, key: str) -> None:
        """Count a hit of ``key``, as ``add("hits", 1, key)`` would, with no lock: ``next``
        on an :func:`itertools.count` is one C call, atomic under the GIL (this runs on
        every hit). What it counted joins the pending counts when they are read."""
        next(self._hits)
        if self.observers:
            self._tell("hits", 1, key)

    def _take_hits(self) -> None:
        """Move the hits :meth:`hit` counted since the last take into the pending counts
        (with the lock held). The take's own ``next`` is not a hit: the next take starts
        after it."""
        reached = next(self._hits)
        self._pending["hits"] += reached - self._hits_taken
        self._hits_taken = reached + 1

    def _tell(self, name: str, count: int, key: str | None) -> None:
        record = CURRENT_CALL.get()
        if record is not None:
            record.events.append(name)
        for observer in self.observers:
            quietly(observer.counted, self.origin, name, key, count)

    def watch_build(self, key: str) -> BuildWatch:
        """Start following a build of ``key`` for the observers (there may be none)."""
        return BuildWatch(self.observers, self.origin, key, self.clock)

    def flush_if_due(self) -> None:
        """Flush, on the caller's thread, if the interval is up."""
        if self.clock.monotonic() >= self._next_flush:
            run_steps(self.flush_steps(), perform)

    async def aflush_if_due(self) -> None:
        """Flush, awaiting the store's async twin, if the interval is up."""
        if self.clock.monotonic() >= self._next_flush:
            await arun_steps(self.flush_steps(), aperform)

    def flush(self, quiet: bool = False) -> None:
        """Add this process's pending counts to the store's totals (``quiet``: log no failure)."""
        run_steps(self.flush_steps(quiet), perform)

    def flush_steps(self, quiet: bool = False) -> Steps[None]:
        """:meth:`flush`, as steps: what an async caller's driver awaits, on the store's twin.
        The observers' own counts (:meth:`Observer.flush_steps`) go with it."""
        with self._lock:
            self._take_hits()
            pending, self._pending = self._pending, dict.fromkeys(COUNTERS, 0)
            self._next_flush = self.clock.monotonic() + self.interval
        deltas = {self.key(name): count for name, count in pending.items() if count}
        for observer in self.observers:
            try:
                yield from observer.flush_steps(self)
            except Exception as error:  # an observer's failure is never a request's
                self.failures.warning("stats.observer", "an observer did not flush: %s", error)
        if not deltas:
            return
        try:
            yield from add_counts_steps(self.store, deltas)
            now = self.clock.time()
            yield StoreCall(self.store, "set", (self.key(FLUSHED), b"%d" % int(now * 1000), 0))
            minute = int(now // 60)
            if minute != self._sampled_minute:  # the minute's first flush here: the chart's
                self._sampled_minute = minute
                totals = yield from self._totals_steps(self.key, dict.fromkeys(COUNTERS, 0))
                yield from offer_sample_steps(self.store, self.key, minute, totals)
        except Exception as error:  # statistics must never fail a request
            with self._lock:
                for name, count in pending.items():
                    self._pending[name] += count
            if not quiet:  # at exit, a server already stopped is no news
                self.failures.warning("stats.flush", "cache statistics not flushed: %s", error)

    def local(self) -> dict[str, int]:
        """Return this process's counts not yet flushed."""
        with self._lock:
            self._take_hits()
            return {name: self._pending.get(name, 0) for name in COUNTERS}

    def totals(self, pending: bool = True) -> dict[str, Any]:
        """Return every process's flushed counts (plus this one's ``pending``), the hit ratio,
        and ``flushed_at``: when a process last flushed (seconds since the epoch, or None).
        """
        local = self.local() if pending else dict.fromkeys(COUNTERS, 0)
        return run_steps(self._totals_steps(self.key, local), perform)

    def apart(self, family: str) -> dict[str, Any]:
        """Return every process's flushed counts of the caches on this namespace counted
        apart as ``family`` (a sessions' cache), their hit ratio and ``flushed_at``."""
        keyed = functools.partial(counter_key, self.namespace, family)
        return run_steps(self._totals_steps(keyed, dict.fromkeys(COUNTERS, 0)), perform)

    def _totals_steps(
        self, key: Callable[[str], str], local: dict[str, int]
    ) -> Steps[dict[str, Any]]:
        """Read the counters named by ``key(name)`` and ``flushed_at``: :func:`_totals`."""
        names = [key(name) for name in (*COUNTERS, FLUSHED)]
        return _totals((yield StoreCall(self.store, "get_many", (names,))), key, local)


def counter_key(namespace: str, family: str, name: str) -> str:
    """Return the store key of counter ``name`` of ``namespace`` (``family``: counted apart)."""
    counted = f"{family}.{name}" if family else name
    return f"{namespace}:s:{counted}" if namespace else f"s:{counted}"


def _totals(
    found: dict[str, bytes], key: Callable[[str], str], local: dict[str, int]
) -> dict[str, Any]:
    """The counts ``found`` under ``key(name)`` plus ``local`` ones, the hit ratio, flushed_at."""
    totals: dict[str, Any] = {
        name: (stored_count(found.get(key(name))) or 0) + local[name] for name in COUNTERS
    }
    totals["hit_ratio"] = hit_ratio(totals) or 0.0
    flushed = stored_count(found.get(key(FLUSHED)))
    totals["flushed_at"] = flushed / 1000 if flushed else None
    return totals
