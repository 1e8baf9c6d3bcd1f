"""Locks, leases and writes: how a build takes its key and how its entry is stored.

The build lock (``add`` with an owner token, renewed while held: see
:mod:`mcache.engine.lock`, :mod:`mcache.engine.renewal`) decides who builds; the lease
(:mod:`mcache.engine.write_lease`) decides whether what was built may still be stored.
Every store failure here is logged and absorbed: a build never fails because
the cache could not be reached.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from mcache.contract.store import NO_VALUE, LeaseBid, StaleClaim
from mcache.engine import write_lease as leases
from mcache.engine.bidding import Bidding, shielded_bid
from mcache.engine.call import Call
from mcache.engine.lock import Lock
from mcache.engine.server_lease import ServerLease, holder_gone
from mcache.errors import StoreUnavailable, Unserializable, ValueTooLarge
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.model.entry import Entry
from mcache.sansio.steps import Steps, StoreCall, perform, run_steps

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts
    from mcache.engine.reading import Reader

__all__ = ["BUSY_SECONDS", "Writer"]

BUSY_SECONDS = 0.25
"""How long a process trusts that a stale key's lock, found held, is still held."""


class Writer:
    """Takes and frees a ``Cache``'s build locks and leases, and stores built entries."""

    def __init__(self, parts: CacheParts, reader: Reader) -> None:
        self.parts = parts
        self.reader = reader
        self._busy: BoundedMemo[str, float] = BoundedMemo(PER_KEY_LIMIT)  # until when it is held
        self.bidding = Bidding(parts, self.rebuild_under_way)

    def drop_claim_steps(self, key: str, claim: StaleClaim | LeaseBid | None) -> Steps[None]:
        """Free a lock the read claimed for a rebuild that is not needed after all (rare: the
        store judged by time left, the entry said otherwise, as a clock ahead of the store's)."""
        if type(claim) is StaleClaim and claim.outcome:
            yield from self.unlock_steps(
                key, Lock(self.parts.shared, claim.lock_key, token=claim.token)
            )

    def try_stale_lock_steps(self, call: Call) -> Steps[Lock | None]:
        """Take the lock of a stale key, unless it was found held moments ago.

        Once a reader here found it held, the others serve stale for ``BUSY_SECONDS``
        without asking: a burst of stale reads costs one round trip each, as hits do.
        Where the read itself bid for the lock (:mod:`.bidding`), its answer is used.
        """
        now = self.parts.clock.monotonic()
        read_at = call.read_at or now  # when the read that bid for the lock was sent
        claim = call.claim
        if type(claim) is LeaseBid and not claim.unleased:
            if (claim.outcome is None or holder_gone(claim)) and claim.token is not None:
                # Stale by what the server cannot see (a bumped tag), or leased to a
                # holder that stopped renewing: mark it stale again, bid again.
                read_at = now
                try:
                    bid = StoreCall(self.parts.store, "claim_stale", (call.key, claim.token, claim))
                    yield shielded_bid(self.parts, call.key, bid, claim)
                except Exception as error:
                    self.parts.store_failed("lock", error)
                else:  # neither leased nor marked stale after the mark: a newer write
                    call.rewritten = claim.outcome is None
            lock = self.server_lease(call)
            if lock is None and claim.outcome is False:  # another reader holds the lease
                self._mark_busy(call.key, read_at)
            return lock
        if claim is not None and claim.outcome:
            self.parts.trace(call.key, "L")
            self._mark_busy(call.key, now)
            timeout = call.options.lock_timeout
            return self._held(Lock(self.parts.shared, claim.lock_key, timeout, token=claim.token))
        if self.rebuild_under_way(call.key, now):
            return None
        lock = None
        if claim is None or claim.outcome is not False:
            lock = yield from self.try_lock_steps(call)
            read_at = now
        if lock is None and not call.lock_refused:
            # Found held. Not when the store failed: nobody may be rebuilding it, so the
            # next reader tries for itself rather than serving stale (guarantee 2).
            self._mark_busy(call.key, read_at)
        return lock

    def rebuild_under_way(self, key: str, now: float | None = None) -> bool:
        """Whether ``key``'s lock was won or found held here in the last quarter second."""
        return self._busy.get(key, 0.0) > (self.parts.clock.monotonic() if now is None else now)

    def _mark_busy(self, key: str, seen: float) -> None:
        """Note that ``key``'s lock was found held at ``seen``, so this process's readers
        leave it alone a while (a later finding is never cut short by an older one)."""
        until = seen + BUSY_SECONDS
        if self._busy.get(key, 0.0) < until:
            self._busy.remember(key, until)

    def try_lock(self, call: Call) -> Lock | None:
        """Try the key's distributed lock once; return it (renewed while held) if won."""
        return run_steps(self.try_lock_steps(call), perform)

    def try_lock_steps(self, call: Call) -> Steps[Lock | None]:
        """:meth:`try_lock`, as steps; where the read bid for the server's lease, its answer is
        the first try, and every later one is a leasing read of the key again."""
        claim = call.claim
        if type(claim) is LeaseBid and claim.unleased and self.parts.store.leases_key(call.key):  # type: ignore[attr-defined]
            # Its server answers again: its lease decides who builds, not a portable lock.
            claim.token, claim.unleased = None, False
        if type(claim) is LeaseBid and not claim.unleased:
            if claim.token is None:
                try:
                    # the tags again too: a build it wins records the versions read with it
                    entry, versions, _ = yield from self.reader.read_steps(
                        call.key, call.tags, claim
                    )
                except Exception as error:
                    self.parts.store_failed("lock", error)
                    return None
                call.versions = versions
                if claim.outcome:  # what it won: an entry (kept alive for the build) or a miss
                    call.seen = entry
            if not claim.unleased:
                return self.server_lease(call)
        self.parts.trace(call.key, "L")
        lock_key = self.parts.derived_key("l", call.key)
        lock = self.parts.new_lock(lock_key, call.options.lock_timeout)
        call.lock_refused = False
        try:
            if not (yield from lock.try_acquire_steps()):
                return None
        except Exception as error:
            self.parts.store_failed("lock", error)
            call.lock_refused = True
            return None
        return self._held(lock)

    def server_lease(self, call: Call) -> Lock | None:
        """Return the server's lease the call's last read won (renewed while held), or None;
        used once: a blank bid replaces it, so the next try asks again.

        The read's bid was this caller's lock attempt, won or lost, and is traced ``L``
        as the text protocol's ``add`` is: a waiter's trace reads ``MLL…H`` on both.
        """
        claim = call.claim
        assert type(claim) is LeaseBid
        call.claim = LeaseBid(claim.lease_ttl, claim.early_ttl)
        self.parts.trace(call.key, "L")
        if not claim.outcome or claim.token is None:
            return None
        timeout = call.options.lock_timeout
        placed = call.seen is None
        lease = ServerLease.won(self.parts, call.key, timeout, claim, placed)
        if not placed:  # the read that won it held the item longer: its own life is less
            left = self.life_left(call, call.seen)
            lease.lease.own_expires = self.parts.clock.monotonic() + left
        return self._held(lease)

    def _held(self, lock: Lock) -> Lock:
        """Keep the won ``lock`` renewed while its build runs (see :mod:`mcache.engine.renewal`)."""
        self.parts.renewer.hold(lock, self.parts.failures)
        return lock

    def unlock(self, key: str, lock: Lock) -> None:
        """Release ``lock`` if still ours; a store failure here is logged, not raised."""
        run_steps(self.unlock_steps(key, lock), perform)

    def unlock_steps(self, key: str, lock: Lock) -> Steps[None]:
        """:meth:`unlock`, as steps."""
        yield from self.parts.renewer.drop_steps(lock)
        try:
            yield from lock.release_steps()
        except Exception as error:
            self.parts.store_failed("unlock", error)
        self.parts.trace(key, "U")

    def take_lease_steps(self, call: Call, lock: Lock | None) -> Steps[leases.Lease | None]:
        """Return the lease the entry will be written against (None: the store failed), kept
        alive while the lock is renewed: a build outliving its key's time left still stores."""
        if isinstance(lock, ServerLease):
            try:
                yield from lock.hold_steps()  # won with the read: nothing more to take
            except Exception as error:
                self.parts.store_failed("lock", error)
            return lock.lease
        o, parts = call.options, self.parts
        ttl = math.ceil(o.ttl + o.stale_ttl) if o.ttl else 0
        try:
            lease = yield from leases.take_steps(
                parts.store,
                parts.codec,
                call.key,
                ttl,
                call.seen is None,
                lambda found: self.lifetime(call, found),
                parts.random,
                parts.clock.monotonic(),
            )
        except Exception as error:
            parts.store_failed("get_or_build", error)
            return None
        if lease is not None and lock is not None:
            parts.renewer.also(lock, lambda: self.keep_lease_steps(call.key, lease, lock))
        return lease

    def lifetime(self, call: Call, found: bytes) -> float:
        """Return the seconds an entry found under the key has left in the store (estimated)."""
        return self.life_left(call, self.reader.decode(call.key, found))

    def life_left(self, call: Call, entry: Entry | None) -> float:
        """Return the seconds ``entry`` has left of its own life, ``ttl + stale_ttl`` from
        its write (estimated; ``inf``: a plain value, whose TTL is its writer's)."""
        if entry is None or not entry.fresh_until_ms:
            return math.inf
        slack = self.parts.traits.expiry_slack
        ends = entry.fresh_until_ms + call.options.stale_ttl * 1000
        return (ends - self.parts.clock.time_ms()) / 1000 - slack

    def keep_lease_steps(self, key: str, lease: leases.Lease, lock: Lock) -> Steps[bool]:
        """On a renewal of the build's lock: extend its leased key if it could end before the
        lock just renewed, by the lock's life and one turn of the renewer (so that, for a
        short lock, it is extended every other renewal rather than at each).

        The key lives no longer than that past the lock's last renewal: if the build's
        process dies, its lock expires within ``lock_timeout`` and its kept stale entry
        a turn later (on a clock of whole seconds, a second more), rather than living
        a second lock's life of stale serving with nobody rebuilding it.
        """
        parts = self.parts
        now = parts.clock.monotonic()
        if lease.expires - now > lock.timeout:
            return True
        ttl = math.ceil(lock.timeout + parts.renewer.interval(lock)) + parts.traits.expiry_slack
        return (yield from leases.keep_steps(parts.store, key, lease, ttl, now))

    def replace_unreadable_steps(self, store_key: str, data: bytes, seconds: int) -> Steps[bool]:
        """Store ``data`` over what no read would return (a stale entry, a build's placeholder):
        for ``add`` that is no value. ``cas`` makes it safe: of several adding at once, one wins."""
        store = self.parts.store
        current, token = yield StoreCall(store, "gets", (store_key,))
        if current is NO_VALUE or token is None:
            return False
        if (yield from self.reader.plain_steps(store_key, current)) is not NO_VALUE:
            return False
        return (yield StoreCall(store, "cas", (store_key, data, token, seconds)))

    def unwrap_steps(self, store_key: str, seconds: int) -> Steps[bool]:
        """Store a fresh, untagged entry's int plainly, if the entry is still there (cas)."""
        store, codec = self.parts.store, self.parts.codec
        data, token = yield StoreCall(store, "gets", (store_key,))
        if data is NO_VALUE or token is None:
            return False
        entry = Entry.from_wire(codec.loads(data, store_key))
        if entry is None or entry.tags or type(entry.value) is not int:
            return False  # a plain value already, or not a plain number's entry
        if not entry.is_fresh(self.parts.clock.time_ms()):
            return False
        return (
            yield StoreCall(
                store, "cas", (store_key, codec.dumps(entry.value, store_key), token, seconds)
            )
        )

    def settle_steps(
        self, key: str, lease: leases.Lease | None, lock: Lock | None, back_off: bool = False
    ) -> Steps[None]:
        """After a build: take away its placeholder if it stored nothing, and free its lock; with
        ``back_off`` (a background rebuild failed) keep it unrenewed, so nobody retries soon."""
        parts = self.parts
        if lock is not None:  # first: a renewal landing after the placeholder went revives it
            yield from parts.renewer.drop_steps(lock)
        if lease is not None:
            yield from parts.store_steps(
                "delete",
                leases.abandon_steps(parts.store, key, lease, parts.clock.monotonic()),
                None,
            )
        if lock is None:
            return
        backed_off = back_off and (
            yield from parts.store_steps("lock", lock.extend_steps(2 * lock.timeout), False)
        )
        if backed_off:
            self.parts.trace(key, "B")
            return
        yield from self.unlock_steps(key, lock)

    def let_go(self, key: str, won: Any, lock: Lock | None) -> Steps[None]:
        """Return the steps that free a lock or lease won for a caller gone meanwhile; its
        renewal stops now, so if they never run (the loop closed) it still frees on time."""
        if isinstance(won, Lock):
            self.parts.renewer.drop(won)
            # a lease won on a miss holds the server's placeholder: it goes with the lease
            lease = won.lease if isinstance(won, ServerLease) else None
            return self.settle_steps(key, lease, won)
        if lock is not None:
            self.parts.renewer.drop(lock)
        return self.settle_steps(key, won, lock)

    def write_steps(self, call: Call, value: Any, lease: leases.Lease) -> Steps[bool]:
        """Store the entry, fresh for ``ttl`` spread by ``jitter`` (already stale if built from
        stale data), kept ``stale_ttl`` longer; return whether it was stored."""
        parts, o = self.parts, call.options
        if not parts.may_store():
            return False  # built from data that may yet be rolled back: returned, never shared
        now = parts.clock.time_ms()
        if o.ttl:
            down, up = o.jitter
            fresh = o.ttl * (1 + parts.random.uniform(-down, up))
            fresh_until = now if call.stale else now + int(fresh * 1000)
            store_ttl = math.ceil(fresh + o.stale_ttl)
        else:
            fresh_until, store_ttl = (now if call.stale else 0), 0
        entry = Entry(value, fresh_until, call.build_ms, call.depends)
        try:
            data = parts.codec.dumps(entry.to_wire(), call.key)
        except Unserializable as error:  # named after the built value, not its envelope
            cause = error.__cause__ or error
            raise Unserializable(value, error.serializer, cause, error.setting) from cause
        try:
            stored = yield from leases.write_steps(parts.store, call.key, data, lease, store_ttl)
        except ValueTooLarge as error:
            parts.store_failed("set", error)
            yield from parts.store_steps(
                "delete", leases.withdraw_steps(parts.store, call.key, lease), None
            )
            return False
        except StoreUnavailable as error:
            parts.store_failed("set", error)
            return False
        parts.wrote((call.key,))
        parts.trace(call.key, "W" if stored else "X")  # X: a delete or newer write won
        if stored and self.bidding.bids:
            self.bidding.saw(call.key, entry)
        return stored
