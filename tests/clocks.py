"""A clock for tests of what is counted on a cache's or a store's monotonic clock."""

from __future__ import annotations

import time


class StandingClock:
    """Wall time as it is; ``monotonic()`` stands still until a test moves ``now``: a window,
    a dead time or a build's duration then lasts the seconds the test says, not real ones."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return time.time()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return self.now
