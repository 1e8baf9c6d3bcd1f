"""The server's lease as a build lock: won in the read, guarding the write, nothing to free.

On a store that :class:`~mcache.contract.store.LeasesInRead` (memcached's meta
protocol: ``docs/explanation/memcached-protocols.md``) the read that finds an
entry missing or stale is also the bid for its rebuild, and the winner writes
the entry with ``ms … C`` against the lease (the item's cas): a delete, a newer
write or a stale marking meanwhile makes the write fail, and there is no lock
key to take or release. :class:`ServerLease` gives that lease the shape of
:class:`~mcache.engine.lock.Lock`, so the read path, the renewer and the
hand-over to a refresher or a queue worker treat both alike: renewal touches
the leased item (a touch keeps its cas), and a release after a build that
stored nothing hands a stale entry's rebuild to the next reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache.clock import Clock, system_clock
from mcache.contract.store import NO_VALUE, LeaseBid, Store, stale_hold_ttl
from mcache.engine.lock import Lock
from mcache.engine.write_lease import Lease, own_life_left
from mcache.sansio.steps import Steps, StoreCall

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts

__all__ = ["JOB_TOKEN_PREFIX", "ServerLease", "holder_gone", "lock_for_job"]

JOB_TOKEN_PREFIX = "cas:"
"""How a queued rebuild's job names a server lease instead of a lock's owner token."""


class ServerLease(Lock):
    """The server's lease on ``key`` (its cas), in the shape of a build lock."""

    def __init__(
        self, store: Store, key: str, timeout: int, lease: Lease, clock: Clock = system_clock
    ) -> None:
        token = f"{JOB_TOKEN_PREFIX}{lease.token}".encode()
        super().__init__(store, key, timeout, token=token, clock=clock)
        self.lease = lease
        self.claim: str | None = None
        """The key a queue worker claimed the lease with (:meth:`take_over_steps`)."""

    @classmethod
    def won(
        cls, parts: CacheParts, key: str, timeout: int, bid: LeaseBid, placed: bool
    ) -> ServerLease:
        """Return the lease a read just won (``bid.outcome`` True); ``placed``: on a miss,
        so the key holds the server's placeholder, to be taken away if nothing is stored."""
        left = bid.lease_ttl if placed or bid.left is None or bid.left < 0 else bid.left
        expires = parts.clock.monotonic() + left
        lease = Lease(NO_VALUE, bid.token, placed, b"", expires, native=True)
        return cls(parts.store, key, timeout, lease, parts.clock)

    def try_acquire_steps(self) -> Steps[bool]:
        """A server lease is won in a read, never taken afterwards."""
        return self.held
        yield  # steps, like every lock operation

    def take_over_steps(self, token: bytes) -> Steps[bool]:
        """A worker takes the server lease it was handed, if no copy of its job took it
        first: the lease is the item's cas, which a worker cannot make its own, so the
        first copy claims it with an ``add`` of a key of its own (brokers deliver a job at
        least once; two copies would otherwise both extend it, and both build). The claim
        is kept alive with the lease (:meth:`extend_steps`): a copy delivered later than a
        lock's life must still find it."""
        claim = (f"{self.key}:job:{self.lease.token}", token, self.expiry())
        if not (yield StoreCall(self.store, "add", claim)):
            self.held = False
            return False
        self.claim = claim[0]
        return (yield from self.extend_steps())

    def hold_steps(self) -> Steps[None]:
        """As the build starts: give a stale entry the lock's life (a placeholder has it).

        memcached keeps a stale entry's lease until the entry goes, so a dead holder
        would keep every reader on the stale value for its whole stale window; held
        and renewed like a lock, it outlives a dead holder by at most ``lock_timeout``
        (see "What differs when a holder dies" in docs/explanation/memcached-protocols.md).
        """
        if not self.lease.placed:
            yield from self.extend_steps()

    def extend_steps(self, timeout: int | None = None) -> Steps[bool]:
        """Keep the leased item, and no other, alive ``timeout`` more seconds (its lock's by
        default); a touch keeps the cas, so the build can still store.

        Once the release began, nothing is sent: memcached gives the rebuild of an item
        handed back (``md … I``) to the first ``mg`` that reads it, so the renewal's own
        check would take it from the next reader, and its touch would give the stale entry
        a lock's life again.
        """
        if self.lease.stored or not self.held:
            return self.held
        ttl = self.expiry(timeout)
        if not self.lease.placed:  # a stale item: held a lock's life more (holder_gone)
            ttl += stale_hold_ttl(self.expiry()) - self.expiry()
        now = self.clock.monotonic()
        keep = (self.key, self.lease.token, ttl)
        self.held = bool((yield StoreCall(self.store, "keep_lease", keep)))
        if self.held:
            self.lease.expires = now + ttl
            if self.claim is not None:  # a job's: no later copy of it may claim the lease
                # a lock's life, not the lease's: once the holder is gone the claim ends
                # before a reader may take the rebuild over and queue it again
                yield StoreCall(self.store, "touch", (self.claim, self.expiry()))
        return self.held

    def release_steps(self) -> Steps[bool]:
        """After a stale entry's rebuild that stored nothing, let the next reader win it,
        with only the life the entry had of its own (kept for the build, it would outlive
        its ``ttl + stale_ttl``: guarantee 2); past that life, it goes."""
        held, self.held = self.held, False
        lease = self.lease
        if not held or lease.stored or lease.placed:
            return held
        left = own_life_left(lease, self.clock.monotonic())
        if left is not None and left <= 0:
            gone = (self.key, b"", lease.token, -1)
            return bool((yield StoreCall(self.store, "leased_write", gone)))
        return bool((yield StoreCall(self.store, "release_lease", (self.key, lease.token, left))))


def holder_gone(bid: LeaseBid) -> bool:
    """Whether a read found a stale item leased to another whose holder stopped renewing it.

    A live holder keeps the item more than one lock's TTL alive
    (:func:`~mcache.contract.store.stale_hold_ttl`); with less left, the holder was killed
    or its queued job lost, and the reader takes the rebuild over
    (:meth:`~mcache.contract.store.LeasesInRead.claim_stale`) while the stale value is there.
    """
    return bid.outcome is False and bid.left is not None and 0 <= bid.left < bid.lease_ttl


def lock_for_job(
    store: Store, key: str, timeout: int, token: str, clock: Clock, life_left: float
) -> Lock:
    """Return the lock a queued rebuild's job hands its worker: an owner-token lock, or
    the server lease its enqueuer won (its cas), held until its worker's write.
    ``life_left``: the seconds the stale entry has of its own life, all a rebuild that
    stores nothing gives it back (the hand-off and the renewals kept it longer)."""
    if not token.startswith(JOB_TOKEN_PREFIX):
        return Lock(store, key, timeout, token=token.encode(), clock=clock)
    cas = int(token[len(JOB_TOKEN_PREFIX) :])
    now = clock.monotonic()
    lease = Lease(NO_VALUE, cas, False, b"", now, native=True, own_expires=now + life_left)
    return ServerLease(store, key, timeout, lease, clock)
