"""One ``get_or_build`` call as the algorithm carries it, and its options.

Shared by the sync and the async driver of :mod:`mcache.engine.build`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcache.contract.store import LeaseBid, StaleClaim
from mcache.engine.fresh_reads import newest_version
from mcache.model.entry import Entry

__all__ = ["BuildOptions", "Call", "ServedStale"]


@dataclass(frozen=True)
class BuildOptions:
    """The per-call settings of one ``get_or_build``."""

    ttl: int
    stale_ttl: int
    lock_timeout: int
    wait: float
    refresh: str
    early_refresh: float
    jitter: tuple[float, float]
    """Fresh times spread between ``ttl * (1 - down)`` and ``ttl * (1 + up)``."""
    stale_wait: float = 0.0


@dataclass
class Call:
    """One ``get_or_build`` call on its way through the algorithm.

    ``depends`` and ``stale`` (the tag versions its value was validated against or
    built under, and whether it is stale) go to its enclosing build.
    """

    key: str
    build: Callable[[], Any]
    tags: list[str]
    options: BuildOptions
    versions: dict[str, int]
    seen: Entry | None = None
    seen_fresh: bool = False  # the entry seen is fresh: it was picked for an early refresh
    depends: dict[str, int] = field(default_factory=dict)
    stale: bool = False
    build_ms: int = 0
    origin: Callable[[], Any] | None = None
    """The caller's own builder, when ``build`` wraps it (a coroutine run on a loop)."""
    background: bool = False
    """Run by a refresher (a thread here, or a queue worker) rather than for a caller."""
    built: bool = False
    lock_refused: bool = False
    """Its last try for the key's lock failed in the store (it was not found held)."""
    failed: bool = False
    served_stale: bool = False
    """Answered with a stale entry (counted, and said in ``STALE_SERVED``)."""
    claim: StaleClaim | LeaseBid | None = None
    """The bid for the rebuild its read made (see :class:`mcache.contract.store.ClaimsStale`)."""
    newest: int = 0
    """The newest version of the tags its entry recorded from what it contains (beyond
    ``versions``, those it declares): see :meth:`newest_version`."""
    read_at: float = 0.0
    """When its bidding read was sent (the clock's ``monotonic``; 0: it bid nothing): what
    that read said of the key's lock is as old as that, however late it is acted on (a
    process stopped meanwhile)."""
    rewritten: bool = False
    """Its stale claim found the entry rewritten since it was read, and not marked stale:
    the entry it read is no longer the key's, so it is read again before being served."""

    def newest_version(self) -> int:
        """Return the newest version of every tag read with the call's entry: a rebuild
        reads the primary while it is recent (:mod:`mcache.engine.fresh_reads`)."""
        return max(self.newest, newest_version(self.versions))


class ServedStale(Exception):
    """Carries the stale value served after a failed build out of ``run_build``."""

    def __init__(self, value: Any) -> None:
        super().__init__("served stale")
        self.value = value
