"""A cache's random draws, from one source it owns.

Jitter, early refresh, back-off pauses, lock and lease tokens and blurred counts all draw
from the cache's :class:`RandomSource` instead of the ``random`` and ``secrets`` modules,
so a run can be replayed from a seed (a simulation gives every cache a seeded source) and
two caches never share a sequence.

Unseeded (every cache's default), the draws that only spread load (jitter, early refresh,
pauses) come from a fast generator seeded by the operating system, seeded afresh in a
forked child: a pre-forking server's workers would otherwise jitter in step, the very
herd jitter is there to break. What someone could gain by guessing (a lock's owner token,
a blurred count) comes from the operating system's source each time. Seeded, everything
comes from the one generator, and the same seed gives the same draws.
"""

from __future__ import annotations

import os
import random
import threading
import weakref
from collections.abc import Callable

__all__ = ["RandomSource", "system_random"]

_unseeded: weakref.WeakSet[RandomSource] = weakref.WeakSet()
_unseeded_lock = threading.Lock()


def _reseed_after_fork() -> None:
    for source in list(_unseeded):
        source.reseed()


os.register_at_fork(after_in_child=_reseed_after_fork)


class RandomSource:
    """Where one cache's random numbers and tokens come from (``seed``: replay them)."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        self._draws = random.Random(seed)
        # The generator's own methods, bound: early refresh draws on every hit it checks.
        self.random: Callable[[], float] = self._draws.random
        """Return a float in [0, 1): early refresh's draw."""
        self.uniform: Callable[[float, float], float] = self._draws.uniform
        """Return a float between two bounds: jitter and back-off pauses."""
        if seed is None:
            self._secret: random.Random = random.SystemRandom()
            with _unseeded_lock:
                _unseeded.add(self)
        else:
            self._secret = self._draws

    def __repr__(self) -> str:
        return "RandomSource()" if self.seed is None else f"RandomSource(seed={self.seed!r})"

    def reseed(self) -> None:
        """Draw a new sequence from the operating system (a forked child does, unseeded)."""
        if self.seed is None:
            self._draws.seed()

    def randint(self, low: int, high: int) -> int:
        """Return an int from ``low`` to ``high`` inclusive, unguessable unless seeded
        (a blurred count must not give the exact one away)."""
        return self._secret.randint(low, high)

    def token(self, nbytes: int = 16) -> str:
        """Return ``nbytes`` random bytes as hex: an owner's token for a lock or a lease,
        unguessable unless seeded (a guessed token could free another owner's lock)."""
        return self._secret.getrandbits(nbytes * 8).to_bytes(nbytes, "big").hex()


system_random = RandomSource()
"""The source of what is made outside any cache (a :class:`mcache.Lock` built by hand,
a hole's nonce): unseeded, so never shared with another process."""
