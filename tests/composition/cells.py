"""The configurations the composition contract runs over, and which of them a run takes.

A cell is one configuration a site can run: a store, a refresher, the near
cache off or on, and a driver (``get_or_build`` or ``aget_or_build``). The
whole cross product is :func:`every_cell`; :func:`covering_cells` picks cells
until every pair of values from two axes appears in one of them (a pairwise
covering array, as in D. M. Cohen et al., "The AETG System", IEEE TSE 1997),
starting from the cells the task-queue scenario of the meta protocol named
(and the one the default run adds).

The greedy choice is written here rather than taken from a pairwise library:
the product is small enough to list, and the selection must start from given
cells and skip the ones no site can run (a queue worker cannot reach another
process's ``memory://``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

STORES = (
    "memory",
    "memcached-text",
    "memcached-meta",
    "pool-text",
    "pool-meta",
    "redis",
    "sentinel",
    "cluster",
    "postgres",
    "sqlite",
    "tiered",
    "alias",
)
"""``pool-*``: three memcached servers, every key on two of them; ``tiered``: memcached
over PostgreSQL; ``alias``: a Django cache over Django's own Redis backend."""
REFRESHERS = ("sync", "thread", "celery", "rq", "tasks")
"""``sync``: ``refresh="sync"`` (a stale key's reader rebuilds it); the others:
``refresh="background"`` on that refresher."""
QUEUES = ("celery", "rq", "tasks")
NEAR = ("off", "on")
DRIVERS = ("sync", "async")


@dataclass(frozen=True, order=True)
class Cell:
    """One configuration of the matrix."""

    store: str
    refresher: str
    near: str
    driver: str

    @property
    def id(self) -> str:
        return f"{self.store}-{self.refresher}-near_{self.near}-{self.driver}"

    @property
    def queued(self) -> bool:
        """Background rebuilds go to a task queue's workers."""
        return self.refresher in QUEUES

    @property
    def shared(self) -> bool:
        """Several processes share the store (all but ``memory://``)."""
        return self.store != "memory"


def runnable(cell: Cell) -> bool:
    """Whether a site can run this configuration at all."""
    return cell.shared or not cell.queued


NAMED = (
    Cell("memcached-meta", "celery", "off", "sync"),
    Cell("memcached-meta", "rq", "off", "sync"),
    Cell("memcached-text", "celery", "off", "sync"),
    Cell("memcached-text", "rq", "off", "sync"),
)
"""The scenario the meta protocol broke on: the default memcached URL with Celery and
RQ workers, and the text protocol it was compared with."""


DEFAULT = (*NAMED, Cell("redis", "thread", "on", "async"))
"""What the README's test command runs: the named cells, and one more so that every rule
runs (a thread refresher, the near cache, the async driver)."""


def every_cell() -> list[Cell]:
    """The whole cross product, less what no site can run."""
    product = itertools.product(STORES, REFRESHERS, NEAR, DRIVERS)
    return [cell for cell in itertools.starmap(Cell, product) if runnable(cell)]


def _pairs(cell: Cell) -> set[tuple[tuple[int, str], tuple[int, str]]]:
    values = list(enumerate((cell.store, cell.refresher, cell.near, cell.driver)))
    return set(itertools.combinations(values, 2))


def covering_cells(start: tuple[Cell, ...] = DEFAULT) -> list[Cell]:
    """``start``, then the runnable cell covering the most pairs not yet covered, until
    every pair some runnable cell has is covered (ties: the first in axis order)."""
    candidates = every_cell()
    wanted = set().union(*map(_pairs, candidates))
    chosen = list(start)
    for cell in chosen:
        wanted -= _pairs(cell)
    while wanted:
        best = max(
            candidates, key=lambda cell: (len(_pairs(cell) & wanted), -candidates.index(cell))
        )
        chosen.append(best)
        wanted -= _pairs(best)
    return chosen


def cells_for(selection: str) -> list[Cell]:
    """The cells a run takes: ``default``, ``pairs`` or ``full``."""
    if selection == "default":
        return list(DEFAULT)
    if selection == "pairs":
        return covering_cells()
    if selection == "full":
        return every_cell()
    raise ValueError(f"--matrix must be default, pairs or full, got {selection!r}")
