"""What the cache dashboard shows, gathered for either framework.

One :class:`CacheView` per cache: the stats report (servers, mcache's counters net of
lock, tag and counter keys), the last hour minute by minute (the samples the stats
flush writes, :mod:`mcache.observe.samples`), each key family's hit ratio when the cache
counts them (``metrics=["families"]``, :mod:`mcache.observe.families`), the hot keys and
slab memory on memcached, and the ``@cached`` functions an operator may refresh. Reading
it costs a handful of ``get_many`` calls and, on memcached, the servers' own stats.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcache.admin.hot_keys import hot_keys
from mcache.admin.report import collect, slab_rows, trace_letters
from mcache.cache import Cache
from mcache.observe.families import FamilyCounts, family_minutes
from mcache.observe.samples import Minute, minute_counts, read_samples
from mcache.observe.stats import COUNTERS

__all__ = ["HOT_KEYS", "RATES", "CacheView", "gather", "trace_of"]

HOT_KEYS = 15
"""How many hot keys the dashboard lists."""
RATES = (
    ("stale", "stale served"),
    ("builds", "builds"),
    ("build_errors", "build errors"),
    ("store_errors", "store errors"),
)
"""The counts shown as a rate per minute over the hour, and their labels."""
CHARTED_FUNCTIONS = 8
"""How many ``@cached`` functions get a line of their own in the chart."""


@dataclass(frozen=True)
class CacheView:
    """Everything the dashboard shows of one cache."""

    name: str
    report: Mapping[str, Any]
    minutes: list[Minute]
    families: dict[str, list[Minute]] | None
    """Each family's minutes, or None when the cache does not count families."""
    hot: list[dict[str, Any]] = field(default_factory=list)
    hot_note: str = ""
    """Why there are no hot keys (a store that cannot list them), or empty."""
    slabs: list[tuple[int, int, int]] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    now_minute: int = 0

    def rate(self, name: str) -> float:
        """Return ``name``'s count per minute over the minutes the hour has samples of."""
        if not self.minutes:
            return 0.0
        return sum(minute.counts.get(name, 0) for minute in self.minutes) / len(self.minutes)


def gather(cache: Cache, name: str, now: float | None = None) -> CacheView:
    """Return what the dashboard shows of ``cache`` (called ``name`` on the page)."""
    now_minute = int((time.time() if now is None else now) // 60)
    stats = cache.counts
    report = collect(cache)
    now_totals = {name: report["cache"].get(name, 0) for name in COUNTERS}
    minutes = minute_counts(read_samples(stats.store, stats.key, now_minute), now_totals)
    families = None
    counters = [observer for observer in stats.observers if isinstance(observer, FamilyCounts)]
    if counters:
        for counter in counters:
            counter.flush()  # this process's counts too
        functions = sorted(stats.origin.functions)[:CHARTED_FUNCTIONS]
        families = family_minutes(stats, ["page", "fragment", *functions, "other"], now_minute)
    hot, hot_note, slabs = [], "", []
    if cache.shared.traits.server_detail:
        try:
            hot = hot_keys(cache, HOT_KEYS)
        except ValueError as error:
            hot_note = str(error)
        slabs = slab_rows(cache.shared.stats_detail("slabs"))  # type: ignore[attr-defined]
    else:
        hot_note = (
            f"hot keys come from memcached's item dump; this cache uses {cache.shared!r}"
            " (on Redis, redis-cli --hotkeys lists them under an LFU maxmemory-policy)"
        )
    return CacheView(
        name=name,
        report=report,
        minutes=minutes,
        families=families,
        hot=hot,
        hot_note=hot_note,
        slabs=slabs,
        functions=sorted(stats.origin.cached_functions),
        now_minute=now_minute,
    )


@dataclass(frozen=True)
class Trace:
    """The events of what the trace form asked for: a page path, a fragment or a key."""

    asked: str
    rows: list[tuple[str, str, float | None]] = field(default_factory=list)
    """``(key, letters, when its last event was recorded)``, per traced key."""
    problem: str = ""
    """Why there are no rows, or empty."""


def trace_of(cache: Cache, asked: str) -> Trace:
    """Return the trace of a page path (``/…``: each of its stored pages), a fragment name,
    or a key, on ``cache``."""
    asked = asked.strip()
    path = asked.startswith("/")
    keys = [] if path else [cache.key(asked), asked]
    try:
        found = trace_letters(cache, keys, asked if path else None, None if path else asked)
    except ValueError:
        return Trace(asked, problem="tracing is off: give the cache a trace_dir")
    rows = [(key, letters, cache.tracer.last_written(key)) for key, letters in found.items()]
    return Trace(asked, rows, "" if rows else f"no events of {asked!r} yet")
