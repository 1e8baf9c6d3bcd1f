"""Injectable clocks.

Expiry, tag versions and counter slots all ask a clock for the time instead of
calling :func:`time.time` directly, so tests can move time forward without
sleeping (cachetools' ``timer=`` idea). Waits, local copies' lifetimes and build
times ask it for :meth:`Clock.monotonic`, so a simulation moves them as well.
"""

from __future__ import annotations

import threading
import time
from time import monotonic as _monotonic
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "SystemClock", "system_clock"]


@runtime_checkable
class Clock(Protocol):
    """Wall-clock time source."""

    def time(self) -> float:
        """Return seconds since the epoch."""
        ...

    def time_ms(self) -> int:
        """Return whole milliseconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Return seconds from an arbitrary start that never go back (durations, deadlines)."""
        ...


class SystemClock:
    """The real wall clock."""

    time = staticmethod(time.time)
    """Return seconds since the epoch: :func:`time.time` itself, with no frame of ours
    (a memory:// read asks it on every hit)."""

    def time_ms(self) -> int:
        """Return whole milliseconds since the epoch."""
        return time.time_ns() // 1_000_000

    monotonic = staticmethod(_monotonic)
    """Return :func:`time.monotonic`, with no frame of ours (a near hit asks it)."""

    def __repr__(self) -> str:
        return "SystemClock()"


system_clock = SystemClock()


class FakeClock:
    """A wall clock that only moves when told to; thread-safe.

    Only the wall time is fake: :meth:`monotonic` is the real one, because the drivers
    really sleep the pauses a wait is made of, and a wait measured on a clock that stands
    still would never end.
    """

    monotonic = staticmethod(_monotonic)
    """Return :func:`time.monotonic`: waits and local lifetimes run on real time."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def time(self) -> float:
        """Return the current fake time in seconds."""
        return self._now

    def time_ms(self) -> int:
        """Return the current fake time in whole milliseconds."""
        return int(self._now * 1000)

    def advance(self, seconds: float) -> None:
        """Move time forward (or backward, for skew tests) by ``seconds``."""
        with self._lock:
            self._now += seconds

    def set(self, when: float) -> None:
        """Jump to an absolute time in seconds."""
        with self._lock:
            self._now = float(when)

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"
