"""What the algorithm needs of a cache, and nothing of the facade.

:class:`CacheParts` holds a cache's stores, codec, clock, tags, counts, tracer,
refresher and its fail-open policy. :class:`mcache.Cache` builds one and hands
it down to the read path (:mod:`.build`, :mod:`.reading`, :mod:`.writing`,
:mod:`.rebuild`) and the counters (:mod:`.counters`, :mod:`.visitors`), so
that the algorithm depends on this small object and the facade on the
algorithm, never the reverse (the layers in ``docs/layout.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from mcache.engine import renewal
from mcache.engine.lock import Lock, pauses
from mcache.errors import StoreUnavailable, ValueTooLarge
from mcache.model.keys import MAX_KEY_BYTES, make_key
from mcache.observe.outcome import STORE_FAILED
from mcache.observe.trace import logging_events
from mcache.randomness import RandomSource

if TYPE_CHECKING:
    from mcache.clock import Clock
    from mcache.contract.refresher import Refresher
    from mcache.contract.store import Store
    from mcache.logs import FailureLog
    from mcache.model.codec import Codec
    from mcache.model.near import Coherence, NearCache
    from mcache.model.tags import Tags
    from mcache.observe.stats import CacheStats
    from mcache.observe.trace import Tracer
    from mcache.sansio.steps import Steps

__all__ = ["CacheParts"]

T = TypeVar("T")


@dataclass(eq=False, repr=False)
class CacheParts:
    """One cache's collaborators, and the policy every store call of the algorithm follows.

    ``may_store``, ``refresher`` and ``locator`` are the facade's to change
    after start-up (a framework adapter sets them), and ``random`` a simulation's (a
    seeded source replays a run); the rest are fixed.
    """

    store: Store
    shared: Store
    """Where locks, tags and counters live: the store itself, or a tiered store's
    shared tier (every process must see them)."""
    namespace: str
    codec: Codec
    clock: Clock
    tags: Tags
    counts: CacheStats
    tracer: Tracer
    failures: FailureLog
    refresher: Refresher
    may_store: Callable[[], bool]
    """Asked before a build is stored: a framework says no while the caller's
    database transaction holds uncommitted writes."""
    coherence: Coherence
    """Told of every key this process writes, so near copies and local tag versions
    never outlive it (see :mod:`mcache.model.near`)."""
    replication_lag_ms: int = 0
    """How far behind its primary a database replica may be: a rebuild set off by a
    younger tag bump reads the primary (:mod:`mcache.engine.fresh_reads`); 0: off."""
    locator: str | None = None
    """How a queue worker finds this cache again (see :mod:`mcache.engine.rebuild`)."""
    random: RandomSource = field(default_factory=RandomSource)
    """Where jitter, early refresh, pauses and tokens are drawn from (seeded: replayable)."""
    renewer: renewal.LockRenewer = field(default_factory=lambda: renewal.renewer)
    """What keeps this cache's build locks alive while their builds run: the process's
    renewer thread, or a simulation's, which runs each renewal as steps of its own."""

    def __post_init__(self) -> None:
        self.traits = self.store.traits
        """What the store can do beyond the contract, read once (see ``StoreTraits``)."""
        self.near: NearCache | None = self.coherence.near
        """Hot entries kept in this process, or None (``near_ttl`` not set)."""

    def wrote(self, keys: Iterable[str] | None) -> None:
        """Forget this process's near copies of ``keys`` (None: of every key), just written:
        its own writes are seen at once."""
        if self.near is not None:
            if keys is None:
                self.coherence.reset()
            else:
                self.coherence.changed(keys)

    def new_lock(
        self, key: str, timeout: int, wait: float = 0.0, renewer: renewal.LockRenewer | None = None
    ) -> Lock:
        """Return a lock on ``key`` in the shared store, its token and pauses drawn from this
        cache's source and clock."""
        return Lock(self.shared, key, timeout, wait, renewer, draws=self.random, clock=self.clock)

    def pauses(self, seconds: float, cap: float = 0.05) -> Iterator[float]:
        """Return the sleeps of a wait of ``seconds`` (:func:`mcache.engine.lock.pauses`),
        timed on this cache's clock and jittered from its source."""
        return pauses(self.clock, self.random, seconds, cap)

    def derived_key(self, kind: str, key: str) -> str:
        """Return the key of a companion record (``l`` lock, …) of ``key``, within 250 bytes."""
        derived = f"{kind}:{key}"
        if len(derived) <= MAX_KEY_BYTES:
            return derived
        return f"{kind}:{make_key('', key)}"

    def trace(self, key: str, letter: str) -> None:
        """Record a trace event for ``key`` when tracing is on (files kept or the
        ``mcache.trace`` logger at DEBUG)."""
        tracer = self.tracer
        if tracer.trace_dir is not None or logging_events():
            tracer.event(key, letter)

    def hit(self, key: str) -> None:
        """Trace and count a hit of ``key``."""
        self.trace(key, "H")
        self.counts.hit(key)

    def store_failed(self, operation: str, error: BaseException) -> None:
        """Count and log (once per interval) a store failure the caller never sees."""
        if isinstance(error, ValueTooLarge):
            # The store is up: this value alone is over its limit, which is no outage.
            if not STORE_FAILED.get():
                STORE_FAILED.set("too-large")
            self.counts.add("too_large")
            self.failures.warning("store.too_large", "value not cached: %s", error)
            return
        STORE_FAILED.set("store-down")
        self.counts.add("store_errors")
        message = "cache %s failed, carrying on without the cache: %s"
        self.failures.warning(f"store.{operation}", message, operation, error)

    def store_call(self, operation: str, call: Callable[[], T], fallback: T) -> T:
        """Run a store call; on a store failure log once per interval and return ``fallback``."""
        try:
            return call()
        except (StoreUnavailable, ValueTooLarge) as error:
            self.store_failed(operation, error)
            return fallback

    def store_steps(self, operation: str, steps: Steps[T], fallback: T) -> Steps[T]:
        """:meth:`store_call` for steps (a counter's, run by either driver)."""
        try:
            return (yield from steps)
        except (StoreUnavailable, ValueTooLarge) as error:
            self.store_failed(operation, error)
            return fallback
