"""One call of a cache's API as it runs: the events and store round trips it adds up.

The kernel's drivers count a call's round trips here as they perform its steps, and
observers (:mod:`mcache.observe.events`) read the record when the call returns; so it
lives with the kernel, which imports nothing of mcache.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["CURRENT_CALL", "CallRecord"]


@dataclass
class CallRecord:
    """One call of a cache's API as observers see it."""

    operation: str
    key: str
    tags: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    round_trips: int = 0
    """Store requests the call made; a pipelined read of several keys counts one."""
    seconds: float = 0.0

    @property
    def outcome(self) -> str:
        """``HIT``, ``STALE``, ``MISS``, ``BYPASS`` (its builder said ``Uncacheable``), or ``-``."""
        events = self.events
        if "uncached" in events:
            return "BYPASS"
        if "stale" in events:
            return "STALE"
        if "misses" in events or "builds" in events:
            return "MISS"
        return "HIT" if "hits" in events else "-"


CURRENT_CALL: ContextVar[CallRecord | None] = ContextVar("mcache_current_call", default=None)
"""The observed call in progress in this context, which counts its events and round trips."""
