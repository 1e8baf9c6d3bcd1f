"""What a read bids for the rebuild it may have to do: a lock claimed in the read, or
the server's lease.

A claim of the key's lock goes to a store that :class:`~mcache.contract.store.ClaimsStale`
(Redis, by Lua), a bid for the server's lease to one that
:class:`~mcache.contract.store.LeasesInRead` (memcached's meta protocol). An entry this
process knows to be fresh (by what it saw of each key) is read plainly, so a hit
costs what it costs without bids (``docs/explanation/memcached-protocols.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcache.contract.store import LeaseBid, StaleClaim
from mcache.engine.call import BuildOptions
from mcache.engine.lock import Lock
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.model.entry import Entry
from mcache.sansio.steps import Shielded, Steps, StoreCall, one

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts

__all__ = ["Bidding", "bid_given_back", "shielded_bid"]

FORCING_WINDOW = 1 << 30
"""Seconds: an entry with less than this left is leased to a forced refresh (all are)."""


class Bidding:
    """Bids made with reads, for :class:`~mcache.engine.writing.Writer` (see the module)."""

    def __init__(
        self, parts: CacheParts, rebuild_under_way: Callable[[str, float | None], bool]
    ) -> None:
        """Decide, by the store, which bids reads may carry; ``rebuild_under_way`` is the
        writer's note of the keys whose lock this process knows to be held."""
        self.parts = parts
        self.rebuild_under_way = rebuild_under_way
        store = parts.store
        traits = parts.traits
        self.claims = parts.shared is store and traits.claims_stale and store.claims_in_read  # type: ignore[attr-defined]
        # Whether it may lease: whether it does is ``leases_in_read``, which asks servers.
        self.leasing = parts.shared is store and traits.leases
        self.bids = self.claims or self.leasing
        self._stale_at: BoundedMemo[str, int] = BoundedMemo(PER_KEY_LIMIT)  # when it goes stale
        self._build_ms: BoundedMemo[str, int] = BoundedMemo(PER_KEY_LIMIT)  # its last build's ms

    def leases_now(self) -> bool:
        """Whether builds take the server's lease (the store speaks memcached's meta protocol)."""
        return self.leasing and self.parts.store.leases_in_read  # type: ignore[attr-defined, no-any-return]

    def bid_for(self, key: str, o: BuildOptions, native: bool) -> StaleClaim | LeaseBid | None:
        """Return what the read of ``key`` bids for its rebuild (:meth:`claim_for`,
        :meth:`lease_bid`), or None: an entry known fresh is read plainly, a little faster."""
        if native:  # (:meth:`leases_now`, asked once per call by the caller)
            if self.known_fresh(key, o):
                return None
            return self.lease_bid(key, o)
        return self.claim_for(key, o) if self.claims else None

    def known_fresh(self, key: str, o: BuildOptions) -> bool:
        """Whether the entry this process last saw under ``key`` is fresh, with its early
        refresh (and memcached's whole-second clock) not yet due."""
        due = self._stale_at.get(key)
        if due is None:
            return False
        early_ms = o.early_refresh * self._build_ms.get(key, 0) + 2000
        return self.parts.clock.time_ms() < due - early_ms

    def lease_bid(self, key: str, o: BuildOptions) -> LeaseBid:
        """Return the bid for the server's lease that a read of ``key`` carries.

        A miss is leased for as long as a lock would be held; an entry once it has
        no more than ``stale_ttl`` left in the store, widened by ``early_refresh``
        times its last build's duration: the gap XFetch draws at random on
        average, given by the server to exactly one reader instead.
        """
        lease_ttl = o.lock_timeout + self.parts.traits.expiry_slack
        if not o.ttl or not (o.stale_ttl or o.early_refresh):
            return LeaseBid(lease_ttl, 0)
        early = o.early_refresh * self._build_ms.get(key, 0) / 1000
        return LeaseBid(lease_ttl, math.ceil(o.stale_ttl + early))

    def forcing_bid(self, o: BuildOptions) -> LeaseBid | None:
        """The bid of a forced refresh (``Cache.refresh``) where the server leases rebuilds:
        won on any entry, fresh or not, unless another reader holds its lease (``R`` with a
        window longer than any entry's life); None where rebuilds take the key's lock."""
        if not self.leases_now():
            return None
        return LeaseBid(o.lock_timeout + self.parts.traits.expiry_slack, FORCING_WINDOW)

    def claim_for(self, key: str, o: BuildOptions) -> StaleClaim | None:
        """Return the lock claim for ``key``'s rebuild that its read makes, or None.

        Only once the entry this process last saw is past its fresh time: other reads
        stay plain, costing the server a tenth of a claiming one.
        """
        if not (self.claims and o.ttl and o.stale_ttl):
            return None
        due = self._stale_at.get(key)
        if due is None or self.parts.clock.time_ms() < due:
            return None
        if self.rebuild_under_way(key):
            return None  # a plain read will do
        lock = self.parts.new_lock(self.parts.derived_key("l", key), o.lock_timeout)
        return StaleClaim(lock.key, lock.token, lock.expiry() * 1000, o.stale_ttl * 1000)

    def lease_due(self, entry: Entry, bid: LeaseBid, now: int, o: BuildOptions) -> bool:
        """Whether a lease the server gave on ``entry`` is one this caller should use.

        The server leases by the time left against the reader's stale window; an
        entry written with a shorter one (other options for the same key) may be
        leased while still fresh by its own times, well before its early refresh.
        """
        if not bid.outcome or bid.marked_stale or not entry.is_fresh(now):
            return True
        if not entry.fresh_until_ms:
            return False  # a plain value: fresh as long as the store keeps it
        early_ms = o.early_refresh * entry.build_ms + 2000  # whole seconds on the server
        return entry.fresh_until_ms - now <= early_ms

    def hand_back_steps(self, key: str, entry: Entry, bid: LeaseBid) -> Steps[None]:
        """Give back a lease on an entry that is not due: written again as it is, it
        loses its lease flag, and is leased again when it is due."""
        bid.outcome = None
        parts = self.parts
        if bid.token is None or bid.left is None or bid.left < 1:
            return
        data = parts.codec.dumps(entry.to_wire(), key)
        yield from parts.store_steps(
            "set",
            one(StoreCall(parts.store, "leased_write", (key, data, bid.token, bid.left))),
            False,
        )

    def saw(self, key: str, entry: Entry | None) -> None:
        """Remember when the entry just read or written goes stale (see :meth:`claim_for`),
        and how long it took to build (see :meth:`lease_bid`)."""
        if entry is None or not entry.fresh_until_ms:
            return
        if self.leasing and self._build_ms.get(key) != entry.build_ms:
            self._build_ms.remember(key, entry.build_ms)
        if self._stale_at.get(key) != entry.fresh_until_ms:
            self._stale_at.remember(key, entry.fresh_until_ms)


def shielded_bid(
    parts: CacheParts, key: str, request: StoreCall, claim: StaleClaim | LeaseBid
) -> Shielded:
    """``request``, a read (or a claim) that bids ``claim`` for ``key``'s rebuild, shielded:
    a caller cancelled while the server answers (an async task) gives back what the bid won,
    as a cancelled caller's lock attempt does; else the rebuild stays leased to nobody, and
    every other reader is told that someone builds, until the lease expires."""
    return Shielded(one(request), lambda found: bid_given_back(parts, key, claim, found))


def bid_given_back(
    parts: CacheParts, key: str, claim: StaleClaim | LeaseBid, found: object
) -> Steps[None]:
    """Give back what ``claim`` won for a caller gone meanwhile: a lock the read claimed is
    released; a lease on a miss takes its placeholder away, one on an entry marks it stale
    again for the next reader (``found``: what the read returned; None for a claim)."""
    if not claim.outcome:
        return
    try:
        if type(claim) is StaleClaim:
            yield from Lock(parts.shared, claim.lock_key, token=claim.token).release_steps()
        elif claim.token is not None:
            placed = isinstance(found, dict) and key not in found
            if placed:
                yield StoreCall(parts.store, "leased_write", (key, b"", claim.token, -1))
            else:
                yield StoreCall(parts.store, "release_lease", (key, claim.token))
    except Exception as error:
        parts.store_failed("unlock", error)
