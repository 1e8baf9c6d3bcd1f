"""Dog-pile-safe ``get_or_build``: exactly one rebuild of a stale or missing entry.

The read path, told for users in ``docs/explanation/dog-pile.md``: a fresh entry
with every tag current is a hit; a stale one is rebuilt by one caller (now, or on
the refresher) while the others get the stale value, after up to ``stale_wait``;
a missing one is built once per process and once across processes, the others
waiting at most ``wait``. The lock is renewed while the build runs
(:mod:`mcache.engine.renewal`); the entry is written only over what the key held
when the build began (:mod:`mcache.engine.write_lease`).

Written once as steps (:mod:`mcache.sansio.steps`), run by calling or awaiting:
no thread ever blocks waiting for the event loop, so nested cached coroutines
cannot exhaust the thread pool and deadlock. Inside another build a stale entry
is rebuilt before use, and one that can only be had stale makes the enclosing
entry be stored already stale (rule 2 in ``docs/explanation/consistency.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from mcache.contract.store import NO_VALUE, LeaseBid
from mcache.engine.building import Building
from mcache.engine.call import BuildOptions, Call, ServedStale
from mcache.engine.flight import Flight, NotShared, SingleFlight
from mcache.engine.fresh_reads import newest_version
from mcache.engine.lock import Lock
from mcache.engine.options import TagsArg, tag_list
from mcache.engine.rebuild import HandOver, Rebuilds
from mcache.engine.writing import BUSY_SECONDS, Writer
from mcache.errors import Uncacheable
from mcache.model.dependencies import inside_build, report
from mcache.model.entry import Entry
from mcache.observe.outcome import UNCACHED
from mcache.sansio.steps import (
    Pause,
    Shielded,
    Steps,
    Wait,
    perform,
    run_steps,
)

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts
    from mcache.engine.reading import Reader
    from mcache.model.near import NearCopy

__all__ = ["STALE_SERVED", "BuildOptions", "Builder", "Call", "ServedStale"]

_NONE: dict[str, int] = {}  # read-only

STALE_SERVED: ContextVar[bool] = ContextVar("mcache_stale_served", default=False)
"""Set when ``get_or_build`` answered the current context with a stale value.

For adapters that report it (``X-Cache: STALE``): set it to False before the
call, read it after.
"""


class Builder:
    """Runs a cache's read path on its :class:`~mcache.engine.parts.CacheParts`: one algorithm
    (steps), two drivers."""

    def __init__(self, parts: CacheParts, reader: Reader) -> None:
        self.parts = parts
        self.reader = reader
        self.writer = Writer(parts, reader)
        self.building = Building(parts, reader, self.writer, self.serve_stale)
        self.rebuilds = Rebuilds(self)
        self.flights = SingleFlight()  # callers that found nothing: followers get the value
        self.refreshes = SingleFlight()  # stale rebuilds: the others serve stale meanwhile

    def build_and_store(self, call: Call, lock: Lock | None, stale: Entry | None) -> Any:
        """Build, store the entry and free the lock, now (a refresher's, or a forced, rebuild)."""
        return run_steps(self.building.build_and_store_steps(call, lock, stale), perform)

    # -- the algorithm ------------------------------------------------------------------------

    def get_or_build_steps(
        self,
        key: str,
        build: Callable[[], Any],
        tags: list[str],
        o: BuildOptions,
        near_looked: bool = False,
    ) -> Steps[Any]:
        """The read path, as steps (see the module's docstring); ``near_looked``: the caller
        has just asked :meth:`near_value` and missed, so the near tier is not asked again."""
        parts = self.parts
        try:
            if not parts.may_store():
                # Uncommitted data (see Cache.may_store): built for this caller alone,
                # never stored and never handed to the threads that share its calls.
                return (yield from self.build_alone_steps(Call(key, build, tags, o, {})))
            mark = None
            if parts.near is not None:
                if not near_looked:
                    value = self.near_value(key, tags, o)
                    if value is not NO_VALUE:
                        return value
                mark = parts.tags.invalidations.mark()
            bidding = self.writer.bidding
            native = bidding.leasing and bidding.leases_now()
            claim = bidding.bid_for(key, o, native) if bidding.bids else None
            while True:
                read_at = parts.clock.monotonic() if claim is not None else 0.0
                try:
                    entry, declared, others = yield from self.reader.read_steps(key, tags, claim)
                except Exception as error:
                    parts.store_failed("get_or_build", error)
                    parts.counts.add("misses", key=key)
                    call = Call(key, build, tags, o, {})
                    return (yield from self.build_alone_steps(call, unread=True))
                if bidding.bids:
                    bidding.saw(key, entry)
                now = parts.clock.time_ms()
                leased = type(claim) is LeaseBid
                if leased and entry is not None and not bidding.lease_due(entry, claim, now, o):  # type: ignore[arg-type]
                    yield from bidding.hand_back_steps(key, entry, claim)  # type: ignore[arg-type]
                if leased and entry is not None and (claim.outcome or claim.marked_stale):  # type: ignore[union-attr]
                    # The server leased this reader an early rebuild, or an invalidation
                    # marked the entry stale: not a hit, whatever the entry's own times say.
                    pass
                elif self.is_hit(key, entry, declared, others, now, o, xfetch=not native):
                    if claim is not None:
                        yield from self.writer.drop_claim_steps(key, claim)
                    return self.hit_value(key, entry, tags, mark)  # type: ignore[arg-type]
                if claim is None and native:
                    # Read plainly as an entry known fresh, and found otherwise: again,
                    # bidding for the server's lease (see Bidding.bid_for).
                    claim = bidding.lease_bid(key, o)
                    continue
                break
            parts.trace(key, "M")
            call = Call(key, build, tags, o, declared, entry, claim=claim, read_at=read_at)
            if parts.replication_lag_ms:
                call.newest = newest_version(others)
            if entry is not None:
                call.seen_fresh = (
                    not (leased and claim.marked_stale)  # type: ignore[union-attr]
                    and entry.is_fresh(now)
                    and entry.tags_current(declared, others)
                )
                value = yield from self.refresh_stale_steps(call, entry)
            else:
                yield from self.writer.drop_claim_steps(key, claim)
                parts.counts.add("misses", key=key)
                value = yield from self.build_missing_steps(call)
            report(self.parts.tags.scope, call.depends, call.stale)
            return value
        except Uncacheable as own:  # this caller's own build: followers got NotShared
            parts.counts.add("uncached", key=key)
            UNCACHED.set(own.reason)
            return own.value

    def is_hit(
        self,
        key: str,
        entry: Entry | None,
        declared: dict[str, int],
        others: dict[str, int],
        now: int,
        o: BuildOptions,
        xfetch: bool = True,
    ) -> bool:
        """Return (counted and traced) whether ``entry`` is fresh, current and not picked early
        (at random with ``xfetch``; not where the server leases it, see :mod:`.bidding`)."""
        if (
            entry is not None
            and (entry.fresh_until_ms == 0 or now < entry.fresh_until_ms)
            and (entry.tags == declared if not others else entry.tags_current(declared, others))
            and not (
                xfetch
                and o.early_refresh
                and entry.refresh_early(now, o.early_refresh, self.parts.random)
            )
        ):
            self.parts.hit(key)
            return True
        return False

    def fresh_value_steps(self, key: str, tags: list[str]) -> Steps[Any]:
        """Return the value ``get_or_build(key, tags=tags)`` would return as a hit (from the
        near tier, or the entry read with its tags' versions in one round trip), else
        ``NO_VALUE``: a read that builds, claims and waits for nothing, and counts no miss."""
        parts = self.parts
        mark = None
        if parts.near is not None:
            value = self.near_value(key, tags, None)
            if value is not NO_VALUE:
                return value
            mark = parts.tags.invalidations.mark()
        try:
            entry, declared, others = yield from self.reader.read_steps(key, tags)
        except Exception as error:
            parts.store_failed("get", error)
            return NO_VALUE
        now = parts.clock.time_ms()
        if not self.is_hit(key, entry, declared, others, now, None, xfetch=False):  # type: ignore[arg-type]
            return NO_VALUE
        return self.hit_value(key, entry, tags, mark)  # type: ignore[arg-type]

    def near_value(self, key: str, tags: TagsArg, o: BuildOptions | None) -> Any:
        """Return the value of ``key``'s near copy if it was kept for these ``tags`` and is
        still a hit (see :meth:`near_copy`), else ``NO_VALUE``: a copy of its own, so the
        caller may change it. A ``get_or_build`` asks ``may_store`` first: uncommitted
        data builds for its caller alone, with no near hit."""
        copy = self.near_copy(key, tags, o)
        return NO_VALUE if copy is None else copy.copied()

    def near_copy(self, key: str, tags: TagsArg, o: BuildOptions | None) -> NearCopy | None:
        """Return ``key``'s near copy if it was kept for these ``tags`` and is still a hit
        (every tag at the version this process knows, fresh, not picked early, as a hit
        from the store; counted as one), else None; with no options ``o``, never picked
        early (a read that would not rebuild it).

        The copy itself, not a copy of its value: for a reader that derives what it
        sends from the copy once and keeps that with it (the edge's answer), where a
        hit that hands the value on copies it (:meth:`near_value`). ``tags`` as the
        caller gave them: a list equal to the names a copy was kept for was checked
        then, so only other forms go through ``tag_list``.
        """
        parts = self.parts
        near = parts.near
        copy = near.copies.get(key)  # type: ignore[union-attr]
        if copy is None or copy.names != (tags if type(tags) is list else tag_list(tags)):
            return None
        entry = copy.entry
        versions = entry.tags
        moment = parts.clock.monotonic()
        if copy.until < moment or (versions and not parts.tags.all_current(versions, moment)):
            return None
        now = parts.clock.time_ms()
        if not self.is_hit(key, entry, versions, _NONE, now, o, o is not None):  # type: ignore[arg-type]
            return None
        if versions and inside_build():
            report(parts.tags.scope, versions)
        return copy

    def hit_value(self, key: str, entry: Entry, tags: list[str], mark: Any) -> Any:
        """Return a hit's value read from the store: kept in the near tier unless an
        invalidation came since ``mark``, its tags reported to an enclosing build."""
        parts = self.parts
        if parts.near is not None and parts.tags.invalidations.unchanged(key, mark):
            parts.near.keep(key, entry, tags, parts.clock.monotonic())
        if entry.tags and inside_build():
            report(parts.tags.scope, entry.tags)
        return entry.value

    def build_alone_steps(self, call: Call, unread: bool = False) -> Steps[Any]:
        """Build for this caller only (nothing is read or stored), reporting what it read.

        ``unread``: the store is down, so what the value depends on is unknown.
        """
        value = yield from self.building.run_build_steps(call, None)
        report(self.parts.tags.scope, call.depends, call.stale or unread)
        return value

    def serve_stale(self, call: Call, entry: Entry) -> Any:
        """Return the stale value, counted and traced."""
        STALE_SERVED.set(True)
        call.served_stale = True
        self.parts.trace(call.key, "S")
        self.parts.counts.add("stale", key=call.key)
        call.depends, call.stale = entry.tags, not call.seen_fresh
        return entry.value

    def refresh_stale_steps(self, call: Call, entry: Entry) -> Steps[Any]:
        """Let one caller rebuild; everyone else gets the stale value (after ``stale_wait``)."""
        if (
            (call.claim is None or not call.claim.outcome)
            and (call.seen_fresh or not call.options.stale_wait)
            and self.writer.rebuild_under_way(call.key)
        ):
            # Most reads of a stale key in a burst: its rebuild is known to be under way
            # and there is nothing to wait for, so the stale value goes out at once,
            # costing what a hit costs rather than a flight's worth more.
            return self.serve_stale(call, entry)
        flight, leader = self.refreshes.join(call.key)
        if not leader and call.claim is not None and call.claim.outcome:
            # Its read won the lock: it alone may rebuild.
            return (yield from self.rebuild_stale_steps(call, entry))
        if not leader:
            self.parts.counts.add("coalesced", key=call.key)
            if not call.seen_fresh and (yield Wait(flight, call.options.stale_wait)):
                answer = flight.outcome()
                if answer is not NO_VALUE:
                    call.depends, call.stale = flight.depends, flight.stale
                    return answer
            return self.serve_stale(call, entry)
        value: Any = NO_VALUE
        try:
            value = yield from self.rebuild_stale_steps(call, entry)
            return value
        finally:
            flight.depends, flight.stale = call.depends, call.stale
            flight.finish(NO_VALUE if call.stale else value)  # followers take only a fresh one
            self.refreshes.leave(call.key, flight)

    def rebuild_stale_steps(self, call: Call, entry: Entry) -> Steps[Any]:
        """As the one caller here of a stale key: rebuild, hand over, or wait and serve stale."""
        lock = yield Shielded(
            self.writer.try_stale_lock_steps(call), self.building.let_go(call, None)
        )
        if lock is None:
            if call.rewritten:  # the entry read was replaced meanwhile: maybe by a fresh one
                fresh = yield from self.fresh_entry_steps(call)
                if fresh is not None:
                    return self.take_peeked(call, fresh)
            return (yield from self.fresh_or_stale_steps(call, entry))
        if call.options.refresh == "background" and not inside_build():
            yield HandOver(self.rebuilds, call, lock)
            return (yield from self.fresh_or_stale_steps(call, entry))
        self.parts.counts.add("misses", key=call.key)
        return (yield from self.building.build_and_store_steps(call, lock, entry))

    def fresh_or_stale_steps(self, call: Call, entry: Entry) -> Steps[Any]:
        """While another rebuilds: its new value if it comes within ``stale_wait``, else stale."""
        if not call.seen_fresh:
            for pause in self.parts.pauses(call.options.stale_wait):
                yield Pause(pause)
                fresh = yield from self.fresh_entry_steps(call)
                if fresh is not None:
                    call.depends = fresh.tags
                    return fresh.value
        return self.serve_stale(call, entry)

    def fresh_entry_steps(self, call: Call) -> Steps[Entry | None]:
        """Return the key's entry if it is fresh with every tag current now, else None."""
        entry, current = yield from self.current_entry_steps(call)
        if current and entry.is_fresh(self.parts.clock.time_ms()):  # type: ignore[union-attr]
            return entry
        return None

    def current_entry_steps(self, call: Call) -> Steps[tuple[Entry | None, bool]]:
        """Return the key's entry (None: nothing there, or the store failed) and whether
        every tag it recorded is at its version now (read in the entry's own round trip),
        whatever its times say.

        A build that began before an invalidation writes an entry that is stale on
        arrival: whoever waited for it began later, and must not take it as fresh
        (guarantee 1 of ``docs/explanation/consistency.md``).
        """
        try:
            entry, declared, others = yield from self.reader.read_steps(call.key, call.tags)
        except Exception as error:
            self.parts.store_failed("get_or_build", error)
            return None, False
        return entry, entry is not None and entry.tags_current(declared, others)

    def outcome_of_steps(self, flight: Flight, call: Call) -> Steps[Any]:
        """Return the leader's value; if it was the leader's alone, build our own."""
        try:
            value = flight.outcome()
        except NotShared:
            return (yield from self.build_after_wait_steps(call))
        call.depends, call.stale = flight.depends, flight.stale
        if flight.served_stale:
            STALE_SERVED.set(True)  # the leader's answer was the stale entry: so is ours
        return value

    def build_missing_steps(self, call: Call) -> Steps[Any]:
        """Build a missing entry once per process, and once across processes.

        Followers wait up to ``wait`` for their leader. If it has not finished by
        then, the first of them leads a new flight and builds without more waiting
        (bounded duplication), and the rest follow that one for as long as a build
        may take (``lock_timeout``) before building themselves.
        """
        build_and_store = self.building.build_and_store_steps
        flight, leader = self.flights.join(call.key)
        if not leader and type(call.claim) is LeaseBid and call.claim.outcome:
            # The server leased the build to this caller, not to the flight's leader
            # (which waits for whoever holds the lease): it builds, and the leader
            # finds its entry.
            return (yield from build_and_store(call, self.writer.server_lease(call), None))
        if not leader:
            self.parts.counts.add("coalesced", key=call.key)
            if (yield Wait(flight, call.options.wait)) and flight.answered():
                return (yield from self.outcome_of_steps(flight, call))
            self.parts.counts.add("wait_timeouts", key=call.key)
            flight, leader = self.flights.join(call.key, flight)
            if not leader:
                if (yield Wait(flight, call.options.lock_timeout)) and flight.answered():
                    return (yield from self.outcome_of_steps(flight, call))
                return (yield from self.build_after_wait_steps(call))
            return (yield from self.lead_steps(flight, call, self.build_after_wait_steps(call)))
        return (yield from self.lead_steps(flight, call, self.lead_missing_steps(call)))

    def lead_steps(self, flight: Flight, call: Call, work: Steps[Any]) -> Steps[Any]:
        """Run ``work`` as the flight's leader and publish its outcome to the followers."""
        try:
            value = yield from work
        except BaseException as error:  # an Uncacheable value was the leader's alone
            flight.fail(NotShared() if isinstance(error, Uncacheable) else error)
            raise
        else:
            flight.depends, flight.stale = call.depends, call.stale
            flight.served_stale = call.served_stale
            flight.finish(value)
            return value
        finally:
            self.flights.leave(call.key, flight)

    def lead_missing_steps(self, call: Call) -> Steps[Any]:
        """Build under the lock, or wait (bounded) for the process that holds it."""
        let_go = self.building.let_go(call, None)
        lock = yield Shielded(self.writer.try_lock_steps(call), let_go)
        if lock is not None:
            return (yield from self.building.build_and_store_steps(call, lock, None))
        self.parts.counts.add("lock_waits", key=call.key)
        arrived: tuple[object, float] | None = None  # the entry that arrived stale, and when
        # Waiters in other processes poll the store: a short cap lets them see the
        # winner's entry soon after it is written (a 50 ms cap keeps a 0.5 s build's
        # waiters within ~10% of it), for a few gets a second per waiting process.
        for pause in self.parts.pauses(call.options.wait, cap=0.05):
            yield Pause(pause)
            entry, current = yield from self.current_entry_steps(call)
            if current and entry.is_fresh(self.parts.clock.time_ms()):  # type: ignore[union-attr]
                return self.take_peeked(call, entry)  # type: ignore[arg-type]
            if entry is not None and type(call.claim) is LeaseBid and not call.claim.unleased:
                value = yield from self.arrived_stale_steps(call)
                if value is not NO_VALUE:
                    return value
                continue
            # Nothing yet, built from what was invalidated since, or stored already stale
            # (built over a stale part, rule 2): the holder may have finished (or died and
            # its lock expired), so the lock may be ours now.
            lock = yield Shielded(self.writer.try_lock_steps(call), let_go)
            if lock is not None:
                return (yield from self.building.build_and_store_steps(call, lock, None))
            if entry is not None:
                # Stale on arrival. A build writes its entry, then frees its lock: the one
                # that wrote this one may hold it still, rebuilding nothing, so the lock is
                # asked for again, for as long as a lock found held is trusted from the
                # entry's arrival (a holder kept from freeing it longer is taken for one
                # still at work, as is another build that took it over). Then it is served
                # stale while it is rebuilt (guarantee 2), never as fresh, never waited on.
                now = self.parts.clock.monotonic()
                this = (entry.fresh_until_ms, entry.build_ms, entry.tags)  # type: ignore[union-attr]
                if arrived is None or arrived[0] != this:
                    arrived = (this, now)  # another build's entry: its holder's quarter second
                if now - arrived[1] < BUSY_SECONDS:
                    continue
                return self.serve_stale(call, entry)
        self.parts.counts.add("wait_timeouts", key=call.key)
        return (yield from self.build_after_wait_steps(call))

    def arrived_stale_steps(self, call: Call) -> Steps[Any]:
        """A waiter's answer, where the server leases rebuilds, once the entry it waited for
        came stale (built from what was invalidated meanwhile, or over a stale part); or
        NO_VALUE: wait on.

        The holder's write ended its lease, and the server cannot see a bumped tag, so
        nobody rebuilds the entry until a reader marks it stale: the key is read again,
        bidding, and the stale path marks it so (``claim_stale``) and rebuilds it here, or
        serves it stale while the reader the server chose does (guarantee 2).
        """
        claim = call.claim
        try:
            entry, versions, others = yield from self.reader.read_steps(call.key, call.tags, claim)
        except Exception as error:
            self.parts.store_failed("get_or_build", error)
            return NO_VALUE
        call.versions = versions
        if entry is None:
            if claim.outcome:  # type: ignore[union-attr]  # gone meanwhile, and leased to us
                lease = self.writer.server_lease(call)
                return (yield from self.building.build_and_store_steps(call, lease, None))
            return NO_VALUE
        fresh = entry.is_fresh(self.parts.clock.time_ms()) and entry.tags_current(versions, others)
        if fresh and not claim.outcome:  # type: ignore[union-attr]  # rebuilt meanwhile
            return self.take_peeked(call, entry)
        call.seen = entry  # a lease on it is a stale item's, held and given back as one
        return (yield from self.rebuild_stale_steps(call, entry))

    def build_after_wait_steps(self, call: Call) -> Steps[Any]:
        """Build without the lock after waiting for another's build, with the tag versions
        read again first (:meth:`read_versions_steps`)."""
        yield from self.read_versions_steps(call)
        return (yield from self.building.build_and_store_steps(call, None, None))

    def read_versions_steps(self, call: Call) -> Steps[None]:
        """Read the versions of the call's tags now, as its build is about to begin: those
        read before a wait may have been invalidated meanwhile, and an entry recording them
        would be stale on arrival, rebuilt by the next reader, its build routed to a
        database replica by a bump it had not seen (the versions an entry records must be
        the last read before its build begins). A store that fails leaves the call's
        versions as they were, and says so once per interval."""
        if call.tags:
            try:
                call.versions = yield from self.parts.tags.read_steps(call.tags, call.key)
            except Exception as error:
                self.parts.store_failed("get_or_build", error)

    def take_peeked(self, call: Call, entry: Entry) -> Any:
        """Return the fresh entry another process just wrote, with what it depends on."""
        self.parts.trace(call.key, "H")
        call.depends, call.stale = entry.tags, False
        return entry.value
