"""The last hour of a cache's counts, one sample a minute: what a chart of it is drawn from.

The first stats flush of each minute in each process reads the cache's totals (every
process's, see :mod:`.stats`) and offers them as that minute's sample with the store's
``add``: the first process to offer wins, the others' offers fail and change nothing.
A sample lives a little under an hour, so the ring holds at most 60 keys, and the key
of a minute is free again when the same minute of the next hour comes. It costs each
process one read of the totals and one ``add`` a minute, and nothing on a request.

The difference between two consecutive samples is what every process counted in
between (a process's counts join the totals at its next flush, so a minute's figure
may hold a few seconds of the one before).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mcache.contract.store import Store
from mcache.sansio.steps import Steps, StoreCall

__all__ = [
    "MINUTES",
    "Minute",
    "Sample",
    "hit_ratio",
    "minute_counts",
    "offer_sample_steps",
    "read_samples",
]

MINUTES = 60
"""How many minutes the ring covers."""
_LIFETIME = MINUTES * 60 - 30
"""Seconds a sample lives: gone before its key's minute comes round again."""


@dataclass(frozen=True)
class Sample:
    """A cache's totals as they stood at the first flush of ``minute`` (minutes since the
    epoch)."""

    minute: int
    totals: Mapping[str, int]


@dataclass(frozen=True)
class Minute:
    """What every process counted between two samples, and the hit ratio of it."""

    minute: int
    counts: Mapping[str, int]

    @property
    def hit_ratio(self) -> float | None:
        """Hits and stale answers over every lookup; None for a minute without lookups."""
        return hit_ratio(self.counts)


def hit_ratio(counts: Mapping[str, int]) -> float | None:
    """Return (hits + stale) / (hits + stale + misses) of ``counts``, None without lookups."""
    served = counts.get("hits", 0) + counts.get("stale", 0)
    lookups = served + counts.get("misses", 0)
    return served / lookups if lookups else None


def _key(key_of: Callable[[str], str], minute: int) -> str:
    return key_of(f"m{minute % MINUTES}")


def offer_sample_steps(
    store: Store, key_of: Callable[[str], str], minute: int, totals: Mapping[str, object]
) -> Steps[bool]:
    """Offer ``totals`` as the sample of ``minute``; return whether it was taken (the first
    offer of the minute is). ``key_of`` names a stats key (``CacheStats.key``)."""
    counts = {name: value for name, value in totals.items() if type(value) is int}
    raw = json.dumps([minute, counts], separators=(",", ":")).encode()
    return (yield StoreCall(store, "add", (_key(key_of, minute), raw, _LIFETIME)))  # type: ignore[no-any-return]


def read_samples(store: Store, key_of: Callable[[str], str], now_minute: int) -> list[Sample]:
    """Return the samples of the last hour up to ``now_minute``, oldest first. A sample
    that cannot be read (another program's bytes under the key) is left out."""
    keys = [_key(key_of, minute) for minute in range(now_minute - MINUTES + 1, now_minute + 1)]
    found = store.get_many(keys)
    samples = []
    for raw in found.values():
        sample = _decoded(raw)
        if sample is not None and now_minute - MINUTES < sample.minute <= now_minute:
            samples.append(sample)
    return sorted(samples, key=lambda sample: sample.minute)


def _decoded(raw: bytes) -> Sample | None:
    try:
        minute, counts = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if type(minute) is not int or not isinstance(counts, dict):
        return None
    return Sample(minute, {k: v for k, v in counts.items() if type(v) is int})


def minute_counts(samples: list[Sample], now: Mapping[str, int] | None = None) -> list[Minute]:
    """Return what was counted between each pair of consecutive samples, per minute, each
    under the minute of the earlier sample (the minute it was counted in); with ``now``
    (the totals as they stand), the current minute so far too.

    Where a total went down (its counter was evicted, or the server restarted empty),
    the later sample starts afresh: that step is left out rather than shown negative.
    Between samples further apart than a minute (no flush in the minutes between), the
    counts are spread evenly, as the chart shows a rate.
    """
    steps = list(itertools.pairwise(samples))
    if now is not None and samples:
        steps.append((samples[-1], Sample(samples[-1].minute + 1, now)))
    minutes = []
    for before, after in steps:
        names = before.totals.keys() & after.totals.keys()
        counted = {name: after.totals[name] - before.totals[name] for name in names}
        if any(step < 0 for step in counted.values()):
            continue
        span = after.minute - before.minute
        minutes.append(Minute(before.minute, {k: v // span for k, v in counted.items()}))
    return minutes
