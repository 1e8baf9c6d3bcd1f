"""The envelope a ``get_or_build`` entry is stored in.

An entry carries its own *fresh-until* time, so it can outlive its freshness in the
store (TTL = ttl + stale_ttl) and be served stale while one caller rebuilds it; how
long its build took (for early refresh); and its tags' versions as read *before* the
build started, so a tag bumped during the build leaves it stale. It is a plain list,
which every codec can carry: ``["mc1", value, fresh_until_ms, build_ms, {tag: version}]``.

While the first build of a missing key runs, the key holds a *placeholder*,
``["mc1p", token]`` (see :mod:`mcache.engine.write_lease`): a miss to every reader,
but something the build's write can be compared against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcache.randomness import RandomSource

__all__ = ["Entry", "is_placeholder", "placeholder"]

MARK = "mc1"
PLACEHOLDER_MARK = "mc1p"


def placeholder(token: str) -> list[str]:
    """Return the wire form of a build's placeholder for a missing key."""
    return [PLACEHOLDER_MARK, token]


def is_placeholder(data: object) -> bool:
    """Return whether a decoded value is a build's placeholder (a miss to every reader)."""
    return type(data) in (list, tuple) and len(data) == 2 and data[0] == PLACEHOLDER_MARK  # type: ignore[arg-type]


@dataclass(slots=True)
class Entry:
    """A cached value with its freshness and tag versions."""

    value: Any
    fresh_until_ms: int
    build_ms: int = 0
    tags: dict[str, int] = field(default_factory=dict)

    def to_wire(self) -> list[Any]:
        """Return the codec-neutral list form."""
        return [MARK, self.value, self.fresh_until_ms, self.build_ms, self.tags]

    @classmethod
    def from_wire(cls, data: object) -> Entry | None:
        """Return the entry, or None for anything that is not an envelope (a foreign value)."""
        if type(data) not in (list, tuple) or len(data) != 5 or data[0] != MARK:  # type: ignore[arg-type]
            return None
        _, value, fresh_until, build_ms, tags = data  # type: ignore[misc]
        if type(fresh_until) is not int or type(build_ms) is not int or type(tags) is not dict:
            return None
        return cls(value, fresh_until, build_ms, tags)

    def is_fresh(self, now_ms: int) -> bool:
        """Return whether the entry is within its fresh time (0 = fresh forever)."""
        return self.fresh_until_ms == 0 or now_ms < self.fresh_until_ms

    def tags_current(self, declared: dict[str, int], more: dict[str, int]) -> bool:
        """Return whether the entry records every declared tag, each at its current version.

        ``declared`` holds the current versions of the caller's tags, ``more``
        those of the other tags the entry recorded (what the values it was built
        from depend on; see :mod:`mcache.model.dependencies`).
        """
        if not more:
            return self.tags == declared  # same names, same versions
        return self.tags == {**declared, **more}

    def refresh_early(self, now_ms: int, beta: float, rng: RandomSource) -> bool:
        """Decide, XFetch-style, to rebuild a fresh entry before it goes stale.

        The chance grows as expiry nears and with the cost of the build
        (Vattani, Chierichetti, Lowenstein: "Optimal probabilistic cache stampede
        prevention", VLDB 2015), so a hot key is usually rebuilt by one caller
        before anyone sees it stale.
        """
        if beta <= 0 or self.fresh_until_ms == 0 or self.build_ms <= 0:
            return False
        gap = -self.build_ms * beta * math.log(1.0 - rng.random())
        return now_ms + gap >= self.fresh_until_ms
