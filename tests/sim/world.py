"""Virtual time: one heap of events, the hosts' clocks on it, and the seed's draws.

Nothing here sleeps or reads the machine's clock: an event runs when every earlier
one has, so a run is the same on any machine, under any ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class World:
    """The run's virtual time (seconds from 0) and its one generator of chance."""

    seed: int
    now: float = 0.0
    rng: random.Random = field(init=False)
    _heap: list[tuple[float, int, Callable[[], None]]] = field(default_factory=list)
    _order: itertools.count[int] = field(default_factory=itertools.count)
    events: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run ``action`` at virtual time ``when`` (never before now)."""
        heapq.heappush(self._heap, (max(when, self.now), next(self._order), action))

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` ``seconds`` from now."""
        self.at(self.now + seconds, action)

    def run(self, until: float = math.inf, limit: int = 2_000_000) -> None:
        """Run events in time order until none is left before ``until``."""
        heap = self._heap
        while heap and heap[0][0] <= until:
            when, _, action = heapq.heappop(heap)
            self.now = when
            self.events += 1
            if self.events > limit:
                raise RuntimeError(f"more than {limit} events: a livelock in the simulation")
            action()
        self.now = max(self.now, until) if until != math.inf else self.now

    def pending(self) -> bool:
        """Whether any event is still to run."""
        return bool(self._heap)


EPOCH = 1_000_000.0
"""What the hosts' clocks read at virtual time 0 (seconds since 1970)."""


@dataclass
class HostClock:
    """A host's clock on virtual time: ``skew`` seconds ahead (behind if negative)."""

    world: World
    skew: float = 0.0

    def time(self) -> float:
        return self.world.now + self.skew + EPOCH

    def time_ms(self) -> int:
        return int(self.time() * 1000)

    def monotonic(self) -> float:
        return self.world.now


@dataclass
class WholeSecondClock:
    """memcached's clock: whole seconds, as its expiry counts them."""

    world: World

    def time(self) -> float:
        return float(math.floor(self.world.now + EPOCH))

    def time_ms(self) -> int:
        return int(self.time() * 1000)

    def monotonic(self) -> float:
        return self.world.now
