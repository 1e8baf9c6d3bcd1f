"""Counts per key family and minute: the last hour's hit ratio of pages, fragments and each
``@cached`` function, for the dashboard's chart.

Opt-in, as an observer a cache is given by name (``metrics=["families"]``, Django's
``OPTIONS["metrics"]``, Flask's ``MCACHE_METRICS``), because it costs each hit a few
microseconds (``bench_cpu``'s "families counted" rows). It counts only, so no call is
recorded for it and a near hit keeps its one-frame path. Each process counts hits,
stale answers and misses per family (``page``, ``fragment``, a function's name, ``other``)
and per minute in memory, and every ``interval`` seconds adds them to one counter per
(minute, family, event) in the store with ``incr_many``. A counter lives 59 minutes, so
the minute's key is free again before the same minute of the next hour comes; reading
the chart is one ``get_many`` of 60 minutes x families x 3 keys.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from mcache.clock import Clock, system_clock
from mcache.contract.store_helpers import stored_count
from mcache.observe.events import Observer, Origin
from mcache.observe.samples import MINUTES, Minute
from mcache.observe.stats import CacheStats, add_counts_steps
from mcache.sansio.steps import Steps, perform, run_steps

__all__ = ["COUNTED", "FamilyCounts", "family_minutes"]

COUNTED = ("hits", "stale", "misses")
"""The events counted per family: what a hit ratio is made of."""
_LIFETIME = 59 * 60
"""Seconds a minute's counter lives: gone before the same minute of the next hour."""


def _key(stats: CacheStats, minute: int, family: str, event: str) -> str:
    return stats.key(f"f{minute % MINUTES}:{family}:{event}")


class FamilyCounts(Observer):
    """Hits, stale answers and misses per key family and minute, added up in the store."""

    watches_calls = False

    def __init__(self) -> None:
        self._stats: dict[Origin, CacheStats] = {}
        """The counted caches' stats, by their origin: where each one's counts go."""
        self._pending: dict[tuple[Origin, int, str, str], int] = {}
        self._lock = threading.Lock()
        self._clock: Clock = system_clock
        """The counted caches' clock (the last one attached): minutes by it."""

    def attached(self, stats: CacheStats) -> None:
        self._stats[stats.origin] = stats
        self._clock = stats.clock

    def counted(self, origin: Origin, event: str, key: str | None, count: int) -> None:
        if event not in COUNTED:
            return
        slot = (origin, int(self._clock.time() // 60), origin.family(key), event)
        with self._lock:
            self._pending[slot] = self._pending.get(slot, 0) + count

    def exiting(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Add what this process counted for every cache to the store's counters."""
        for stats in list(self._stats.values()):
            run_steps(self.flush_steps(stats), perform)

    def flush_steps(self, stats: CacheStats) -> Steps[None]:
        """Add what this process counted for ``stats``' cache to the store's counters, when
        that cache flushes its own. A failure is logged and the counts dropped: the chart
        may miss them, a request never waits for them."""
        with self._lock:
            mine = {slot: n for slot, n in self._pending.items() if slot[0] == stats.origin}
            for slot in mine:
                del self._pending[slot]
        deltas = {
            _key(stats, minute, family, event): count
            for (_, minute, family, event), count in mine.items()
        }
        if not deltas:
            return
        try:
            yield from add_counts_steps(stats.store, deltas, _LIFETIME)
        except Exception as error:  # counting must never fail a request
            stats.failures.warning("stats.families", "family counts not added: %s", error)


def family_minutes(
    stats: CacheStats, families: Iterable[str], now_minute: int
) -> dict[str, list[Minute]]:
    """Return each of ``families``' minutes of the last hour that counted a lookup, oldest
    first (what every process added up; the current minute is still filling)."""
    wanted = list(families)
    minutes = range(now_minute - MINUTES + 1, now_minute + 1)
    keys = {
        (minute, family, event): _key(stats, minute, family, event)
        for minute in minutes
        for family in wanted
        for event in COUNTED
    }
    found: Mapping[str, Any] = stats.store.get_many(list(keys.values())) if keys else {}
    chart: dict[str, list[Minute]] = {family: [] for family in wanted}
    for minute in minutes:
        for family in wanted:
            counts = {
                event: stored_count(found.get(keys[minute, family, event])) or 0
                for event in COUNTED
            }
            if any(counts.values()):
                chart[family].append(Minute(minute, counts))
    return chart
