"""The counters a ``Cache`` hands out: atomic counts, view counts, visitors.

A mixin of :class:`mcache.Cache`, as :mod:`mcache.plain_operations` is for the plain
operations: each counter is built on the cache's
:class:`~mcache.engine.parts.CacheParts`, so it follows the cache's store, namespace
and fail-open policy.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcache.features.counters import Counter, ViewCounter
from mcache.features.visitors import OnlineCounter, VisitorCounter

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts

__all__ = ["CounterFactories"]


class CounterFactories:
    """``counter``, ``view_counter``, ``online_counter`` and ``visitor_counter``."""

    if TYPE_CHECKING:
        parts: CacheParts

    _view_counters: dict[str, ViewCounter]
    _registry_lock: threading.Lock

    def counter(self, name: str, ttl: int = 0) -> Counter:
        """Return the atomic counter ``name``."""
        return Counter(self.parts, name, ttl)

    def view_counter(
        self, name: str, initial: Callable[[Any], int] | None = None, ttl: int = 0
    ) -> ViewCounter:
        """Return view counts per object, seeded by ``initial(ident)`` from the database.

        One instance per name and cache, so the objects it counted are recorded
        for ``flush`` however often it is asked for; what it holds is also
        recorded when the process exits.
        """
        with self._registry_lock:
            counter = self._view_counters.get(name)
            if counter is None:
                counter = self._view_counters[name] = ViewCounter(self.parts, name, initial, ttl)
                atexit.register(counter.push)
            elif initial is not None:
                counter.initial = initial
            return counter

    def online_counter(
        self, name: str, window: int = 300, slots: int = 6, unique: str = "auto"
    ) -> OnlineCounter:
        """Return the count of visitors seen in the last ``window`` seconds."""
        return OnlineCounter(self.parts, name, window, slots, unique)

    def visitor_counter(self, name: str, period: int = 3600) -> VisitorCounter:
        """Return visits per ``period`` (current and previous period)."""
        return VisitorCounter(self.parts, name, period)
