"""What the composition rules read off a site: build counts, fresh values, who built.

Everything is asked of the site's own web processes (through its cache), so
a cell whose store only Django can reach (``alias``) is read like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.composition.cells import Cell

NEAR_TTL = 0.5
"""The ``near_ttl`` of a cell with the near cache on."""

SETTLE = 0.4
"""Seconds to keep watching after the counts reached what a rule expects: a second build
of a key would have begun by then (a build takes 0.1 s, a queued one starts in less)."""


def applies(test: Callable[[Cell], bool]) -> Callable[[Any], Any]:
    """Run the decorated rule only on the cells ``test`` accepts."""

    def mark(function: Any) -> Any:
        function.applies = test
        return function

    return mark


def counts(
    site: Any, rule: str, numbers: range | list[int], kind: str = "builds"
) -> dict[int, int]:
    names = [f"{kind}:{rule}:{n}" for n in numbers]
    found = site.first.ask(op="counts", names=names)
    return {n: found[f"{kind}:{rule}:{n}"] for n in numbers}


def fresh(site: Any, rule: str, number: int, fn: str = "page") -> Any:
    """The key's fresh value as the first web process reads it (None: missing or stale)."""
    return site.first.ask(op="get", key=[rule, number], fn=fn)


def settled(
    site: Any, rule: str, numbers: range | list[int], expected: int, seconds: float = 20
) -> dict[int, int]:
    """Wait until every key was built ``expected`` times and is fresh; watch a moment more."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if min(counts(site, rule, numbers).values()) >= expected and all(
            fresh(site, rule, n) is not None for n in numbers
        ):
            break
        time.sleep(0.05)
    time.sleep(SETTLE)
    return counts(site, rule, numbers)


def built_by(value: str) -> int:
    """The pid of the process that built a page (``"<rule> <n> #<k> by <pid> …"``)."""
    return int(value.split(" by ", 1)[1].split()[0])


def build_number(value: str) -> int:
    return int(value.split(" #", 1)[1].split()[0])


def near_bound(site: Any) -> None:
    """Wait out the near cache's stated bound (``near_ttl``) where the cell has it on: a
    process's near copy may outlive another process's write, delete or bump that long."""
    if site.cell.near == "on":
        time.sleep(NEAR_TTL + 0.2)


def bump(site: Any, *tags: str) -> None:
    """Invalidate ``tags`` from the last web process; return once every process sees it."""
    site.last.ask(op="invalidate", tags=list(tags))
    near_bound(site)


def keys(rule: str, numbers: range) -> list[tuple[str, int]]:
    return [(rule, n) for n in numbers]


def warm(site: Any, rule: str, numbers: range, fn: str = "page") -> None:
    """Build the keys once, in the first web process."""
    site.first.ask(op="read", keys=keys(rule, numbers), threads=1, fn=fn)
    site.first.ask(op="idle")
