"""Counters of visitors: who is online now, and visitors per period.

Both are built on :func:`~mcache.features.counters.bump_steps` (the incr → add loop).
Online visits are counted on every request, so :meth:`OnlineCounter.hit` is
written as steps, with an awaitable twin an ASGI middleware awaits without a thread.
Either may show its count blurred by a few percent (``noise=``), as the articles
this design comes from advise, so a page never gives away the exact number
(:func:`blurred`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import TYPE_CHECKING

from mcache.contract.store import NO_VALUE
from mcache.contract.store_helpers import stored_count
from mcache.features.counters import bump_steps, counter_key
from mcache.model.keys import make_key
from mcache.sansio.steps import Steps, StoreCall, aperform, arun_steps, one, perform, run_steps

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts
    from mcache.randomness import RandomSource

__all__ = ["OnlineCounter", "VisitorCounter", "blurred", "checked_noise"]


def checked_noise(noise: float, setting: str = "noise") -> float:
    """Return ``noise`` if it is a fraction a count may be blurred by (0 to under 1), else
    raise ``ValueError`` naming ``setting`` and what to write."""
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < 1:
        raise ValueError(
            f"{setting} must be a fraction from 0 (exact counts) to under 1, e.g. 0.05 for"
            f" counts shown within 5%, got {noise!r}"
        )
    return float(noise)


def blurred(count: int, noise: float, draws: RandomSource) -> int:
    """Return ``count`` moved by a whole number drawn afresh, uniformly, within
    ``noise × count`` (rounded up, so a small count moves too) either way: never below 1
    for a count above 0 (a site with visitors never shows none), 0 for 0, exact with no
    ``noise``. Drawn from the cache's source (:mod:`mcache.randomness`): unseeded, the
    system's, so there is no seed to guess."""
    if not noise or count <= 0:
        return count
    spread = math.ceil(noise * count)
    return max(1, count + draws.randint(-spread, spread))


class OnlineCounter:
    """Visitors seen in the last ``window`` seconds: ``slots - 1`` complete slots and a filling one.

    A. Smirnov's online counter (HighLoad++ 2008): slots of ``window / (slots - 1)``
    seconds, keyed by their absolute number (a key reused ``% slots`` would still
    hold its previous round's count); ``hit(visitor)`` counts a visitor once per
    window by an ``add`` of a marker, or on Redis a HyperLogLog per slot (~12 KB,
    0.81% error). The rules and their reasons: docs/how-to/counters.md.
    """

    def __init__(
        self,
        parts: CacheParts,
        name: str,
        window: int = 300,
        slots: int = 6,
        unique: str = "auto",
        noise: float = 0.0,
    ) -> None:
        """``noise``: :meth:`count` is :func:`blurred` by that fraction (0: exact)."""
        if slots < 2 or window < slots:
            raise ValueError("an online counter needs slots >= 2 and window >= slots seconds")
        if unique not in {"auto", "markers", "hll"}:
            raise ValueError(f"unique must be 'auto', 'markers' or 'hll', got {unique!r}")
        self.parts = parts
        self.name = name
        self.window = window
        self.slots = slots
        self.slot_len = window / (slots - 1)
        has_hll = parts.shared.traits.hyperloglog
        if unique == "hll" and not has_hll:
            raise ValueError("unique='hll' needs a Redis store (HyperLogLog)")
        self.hll = has_hll and unique != "markers"
        self.noise = checked_noise(noise)

    def __repr__(self) -> str:
        return f"OnlineCounter({self.name!r}, window={self.window}, slots={self.slots})"

    def _slot(self) -> int:
        return math.floor(self.parts.clock.time() / self.slot_len)

    def slot_key(self, slot: int) -> str:
        """Return the store key of one slot."""
        return counter_key(self.parts, "o", self.name, slot)

    def hit(self, visitor: Hashable | None = None) -> bool:
        """Count one visit; with ``visitor``, at most once per window. Return whether counted."""
        return run_steps(self.hit_steps(visitor), perform)

    async def ahit(self, visitor: Hashable | None = None) -> bool:
        """Await :meth:`hit` (on the store's async twin: no thread)."""
        return await arun_steps(self.hit_steps(visitor), aperform)

    def hit_steps(self, visitor: Hashable | None) -> Steps[bool]:
        """:meth:`hit`, as steps; a store failure counts nothing (logged).

        memcached's expiry is in whole seconds and may come up to one early, so each
        TTL is rounded up and given a second more: no slot or marker dies too soon.
        """
        now = self.parts.clock.time()
        slot = math.floor(now / self.slot_len)
        # Slot s is read by the counts made during slots s + 1 … s + slots - 1.
        ttl = math.ceil((slot + self.slots) * self.slot_len - now) + 1
        if self.hll and visitor is not None:
            member = make_key("", visitor).encode()
            pfadd = StoreCall(self.parts.shared, "pfadd", (self.unique_key(slot), member, ttl))
            return bool((yield from self.parts.store_steps("counter", one(pfadd), False)))
        if visitor is not None:
            # Counted in slot s, the visit is in every count up to the one made during
            # slot s + slots - 1; counted again from then on, never twice in a window.
            marker = counter_key(self.parts, "om", self.name, visitor)
            marker_ttl = math.ceil((slot + self.slots - 1) * self.slot_len - now) + 1
            add = StoreCall(self.parts.store, "add", (marker, b"1", marker_ttl))
            if not (yield from self.parts.store_steps("counter", one(add), False)):
                return False
        yield from bump_steps(self.parts, self.slot_key(slot), 1, ttl)
        return True

    def unique_key(self, slot: int) -> str:
        """Return the HyperLogLog key of one slot (kept apart from anonymous hit counts).

        A counter's slots share a Redis hash tag, so on a Redis Cluster the count stays
        one ``PFCOUNT``."""
        return f"{counter_key(self.parts, 'ou', self.name, hash_tag=True)}:{slot}"

    def count(self, current: bool = False) -> int:
        """Return the visits (with ``hit(visitor)``: the visitors) of the last ``window``
        seconds of complete slots.

        ``current=True`` counts the filling slot in place of the oldest: a visit shows at
        once (the visitor looking at the page is online), and the count grows within a
        slot. Still ``slots - 1`` slots, so a visitor is never counted twice: a marker
        lets a visitor be counted again only ``slots - 1`` slots on, a second into that
        slot (memcached may expire a key a second early); a steady visitor is missing
        from the count during that one second.
        """
        newest = self._slot() + (1 if current else 0)
        slots = range(newest - self.slots + 1, newest)
        keys = [self.slot_key(slot) for slot in slots]
        found = self.parts.store_call("counter", lambda: self.parts.store.get_many(keys), {})
        anonymous = sum(stored_count(value) or 0 for value in found.values())
        if not self.hll:
            return blurred(anonymous, self.noise, self.parts.random)
        store, unique = self.parts.shared, [self.unique_key(slot) for slot in slots]
        named = self.parts.store_call("counter", lambda: store.pfcount(unique), 0)
        return blurred(anonymous + named, self.noise, self.parts.random)


class VisitorCounter:
    """Visits per period ``T``: this period's count, and the last complete period's.

    Keys name their period (``floor(now / T)``), so one key serves both reads (the
    classic recipe's current/shadow pair is not needed); it lives until the next
    period ends, plus a second for memcached's whole-second expiry.
    """

    def __init__(
        self, parts: CacheParts, name: str, period: int = 3600, noise: float = 0.0
    ) -> None:
        """``noise``: every count it returns (:meth:`hit`'s, :meth:`value`, :meth:`previous`)
        is :func:`blurred` by that fraction (0: exact)."""
        if period < 2:
            raise ValueError("a visitor counter's period must be at least 2 seconds")
        self.parts = parts
        self.name = name
        self.period = period
        self.noise = checked_noise(noise)

    def __repr__(self) -> str:
        return f"VisitorCounter({self.name!r}, period={self.period})"

    def _key(self, index: int) -> str:
        return counter_key(self.parts, "v", self.name, index)

    def hit(self) -> int:
        """Count a visit; return the current period's count."""
        index, into = divmod(self.parts.clock.time(), self.period)
        ttl = math.ceil(2 * self.period - into) + 1
        counted = run_steps(bump_steps(self.parts, self._key(int(index)), 1, ttl), perform)
        return blurred(counted, self.noise, self.parts.random)

    def value(self) -> int:
        """Return the current period's count."""
        return self._read(int(self.parts.clock.time() // self.period))

    def previous(self) -> int:
        """Return the last complete period's count."""
        return self._read(int(self.parts.clock.time() // self.period) - 1)

    def _read(self, index: int) -> int:
        key = self._key(index)
        data = self.parts.store_call("counter", lambda: self.parts.store.get(key), NO_VALUE)
        return blurred(stored_count(data) or 0, self.noise, self.parts.random)
