"""Dog-pile-safe ``get_or_build``: exactly one rebuild of a stale or missing entry.

The read path (DESIGN.md "get_or_build"):

1. One round trip fetches the entry and its tag versions.
2. Fresh, with every tag at its recorded version: a hit.
3. Stale (past fresh-until, a tag bumped, or picked for early refresh): one
   caller wins the lock and rebuilds, now (``sync``) or on the refresher
   (``background``, returning the stale value at once); every other caller gets
   the stale value at once, or waits up to ``stale_wait`` for the new one.
4. Missing: threads of a process share one call; across processes the lock
   winner builds and the others poll for its entry, for at most ``wait``
   seconds, then build anyway: bounded duplication, never an endless wait.
5. The tag versions stored with an entry are those read before its build,
   plus those of every cached value read inside it (:mod:`mcache.dependencies`).
6. A build that raises serves the stale value if there is one (stale-if-error)
   and re-raises otherwise. The lock is renewed while the build runs
   (:mod:`mcache.renewal`), always released, and only by its owner.
7. The entry is written only over what the key held when the build began
   (:mod:`mcache.lease`): a delete or a newer write meanwhile wins.

Inside another build the rules tighten (composition rule 2): a stale entry is
rebuilt before use, in the caller's thread whatever ``refresh`` says, and one
that can only be had stale (another process holds its lock) makes the
enclosing entry be stored already stale.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .api import NO_VALUE
from .call import BuildOptions, Call, ServedStale
from .dependencies import collecting, inside_build, merged, report
from .entry import Entry
from .errors import Uncacheable
from .flight import Flight, NotShared, SingleFlight
from .lock import Lock, pauses
from .rebuild import Rebuilds
from .writing import Writer

if TYPE_CHECKING:
    from .cache import Cache

__all__ = ["STALE_SERVED", "BuildOptions", "Builder", "Call", "ServedStale"]

STALE_SERVED: ContextVar[bool] = ContextVar("mcache_stale_served", default=False)
"""Set when ``get_or_build`` answered the current context with a stale value.

For adapters that report it (``X-Cache: STALE``): set it to False before the
call, read it after.
"""


class Builder:
    """Runs the read path for a ``Cache``."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.reader = cache.reader
        self.rng = random.Random()
        self.writer = Writer(cache, self.rng)
        self.rebuilds = Rebuilds(self)
        self.flights = SingleFlight()  # callers that found nothing: followers get the value
        self.refreshes = SingleFlight()  # stale rebuilds: the others serve stale meanwhile

    # -- the algorithm ------------------------------------------------------------------------

    def get_or_build(
        self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions
    ) -> Any:
        """Return the cached value for ``key``, building it at most once across callers."""
        cache = self.cache
        try:
            if not cache.may_store():
                # Uncommitted data (see Cache.may_store): built for this caller alone,
                # never stored and never handed to the threads that share its calls.
                return self.build_alone(Call(key, build, tags, o, {}))
            claim = self.writer.claim_for(key, o)
            try:
                entry, declared, others = self.reader.read(key, tags, claim)
            except Exception as error:
                cache.store_failed("get_or_build", error)
                cache.metrics.add("misses")
                return self.build_alone(Call(key, build, tags, o, {}), unread=True)
            if self.writer.claims:
                self.writer.saw(key, entry)
            now = cache.clock.time_ms()
            if self.is_hit(key, entry, declared, others, now, o):
                if claim is not None:
                    self.writer.drop_claim(key, claim)
                if entry.tags and inside_build():  # type: ignore[union-attr]
                    report(self.cache.tags.scope, entry.tags)  # type: ignore[union-attr]
                return entry.value  # type: ignore[union-attr]
            cache.trace(key, "M")
            call = Call(key, build, tags, o, declared, entry, claim=claim)
            if entry is not None:
                call.seen_fresh = entry.is_fresh(now) and entry.tags_current(declared, others)
                value = self.refresh_stale(call, entry)
            else:
                self.writer.drop_claim(key, claim)
                cache.metrics.add("misses")
                value = self.build_missing(call)
            report(self.cache.tags.scope, call.depends, call.stale)
            return value
        except Uncacheable as own:  # this caller's own build: followers got NotShared
            cache.metrics.add("uncached")
            return own.value

    def is_hit(
        self,
        key: str,
        entry: Entry | None,
        declared: dict[str, int],
        others: dict[str, int],
        now: int,
        o: BuildOptions,
    ) -> bool:
        """Return (counted and traced) whether ``entry`` is fresh, current and not picked early."""
        if (
            entry is not None
            and (entry.fresh_until_ms == 0 or now < entry.fresh_until_ms)
            and (entry.tags == declared if not others else entry.tags_current(declared, others))
            and not (o.early_refresh and entry.refresh_early(now, o.early_refresh, self.rng))
        ):
            if self.cache.tracer.enabled:
                self.cache.tracer.event(key, "H")
            self.cache.metrics.add("hits")
            return True
        return False

    def build_alone(self, call: Call, unread: bool = False) -> Any:
        """Build for this caller only (nothing is read or stored), reporting what it read.

        ``unread``: the store could not be read (it is down), so what the value
        depends on is unknown: an enclosing build must not store it as fresh.
        """
        value = self.run_build(call, None)
        report(self.cache.tags.scope, call.depends, call.stale or unread)
        return value

    def serve_stale(self, call: Call, entry: Entry) -> Any:
        """Return the stale value, counted and traced."""
        STALE_SERVED.set(True)
        self.cache.trace(call.key, "S")
        self.cache.metrics.add("stale")
        call.depends, call.stale = entry.tags, not call.seen_fresh
        return entry.value

    def refresh_stale(self, call: Call, entry: Entry) -> Any:
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
            return self.rebuild_stale(call, entry)  # its read won the lock: it alone may rebuild
        if not leader:
            self.cache.metrics.add("coalesced")
            if not call.seen_fresh and flight.wait(call.options.stale_wait):
                answer = flight.outcome()
                if answer is not NO_VALUE:
                    call.depends, call.stale = flight.depends, flight.stale
                    return answer
            return self.serve_stale(call, entry)
        value: Any = NO_VALUE
        try:
            value = self.rebuild_stale(call, entry)
            return value
        finally:
            flight.depends, flight.stale = call.depends, call.stale
            flight.finish(NO_VALUE if call.stale else value)  # followers take only a fresh one
            self.refreshes.leave(call.key, flight)

    def rebuild_stale(self, call: Call, entry: Entry) -> Any:
        """As the one caller here of a stale key: rebuild, hand over, or wait and serve stale."""
        lock = self.writer.try_stale_lock(call)
        if lock is None:
            return self.fresh_or_stale(call, entry)
        if call.options.refresh == "background" and not inside_build():
            self.rebuilds.hand_over(call, lock)
            return self.fresh_or_stale(call, entry)
        self.cache.metrics.add("misses")
        return self.build_and_store(call, lock, entry)

    def fresh_or_stale(self, call: Call, entry: Entry) -> Any:
        """While another rebuilds: its new value if it comes within ``stale_wait``, else stale."""
        if not call.seen_fresh:
            fresh = self.await_fresh(call)
            if fresh is not None:
                call.depends = fresh.tags
                return fresh.value
        return self.serve_stale(call, entry)

    def await_fresh(self, call: Call) -> Entry | None:
        """Poll the store up to ``stale_wait`` seconds for a fresh, current entry."""
        for pause in pauses(call.options.stale_wait):
            time.sleep(pause)
            entry = self.fresh_entry(call)
            if entry is not None:
                return entry
        return None

    def fresh_entry(self, call: Call) -> Entry | None:
        """Return the key's entry if it is fresh with every tag current now, else None."""
        try:
            entry, declared, others = self.reader.read(call.key, call.tags)
        except Exception as error:
            self.cache.store_failed("get_or_build", error)
            return None
        now = self.cache.clock.time_ms()
        if entry is not None and entry.is_fresh(now) and entry.tags_current(declared, others):
            return entry
        return None

    def outcome_of(self, flight: Flight, call: Call) -> Any:
        """Return the leader's value; if it was the leader's alone, build our own."""
        try:
            value = flight.outcome()
        except NotShared:
            return self.build_and_store(call, None, None)
        call.depends, call.stale = flight.depends, flight.stale
        return value

    def build_missing(self, call: Call) -> Any:
        """Build a missing entry once per process, and once across processes.

        Followers wait up to ``wait`` for their leader. If it has not finished by
        then, the first of them leads a new flight and builds without more waiting
        (bounded duplication), and the rest follow that one for as long as a build
        may take (``lock_timeout``) before building themselves.
        """
        flight, leader = self.flights.join(call.key)
        if not leader:
            self.cache.metrics.add("coalesced")
            if flight.wait(call.options.wait) and flight.answered():
                return self.outcome_of(flight, call)
            self.cache.metrics.add("wait_timeouts")
            flight, leader = self.flights.take_over(call.key, flight)
            if not leader:
                if flight.wait(call.options.lock_timeout) and flight.answered():
                    return self.outcome_of(flight, call)
                return self.build_and_store(call, None, None)
            return self.lead(flight, call, lambda: self.build_and_store(call, None, None))
        return self.lead(flight, call, lambda: self.lead_missing(call))

    def lead(self, flight: Flight, call: Call, work: Callable[[], Any]) -> Any:
        """Run ``work`` as the flight's leader and publish its outcome to the followers."""
        try:
            value = work()
        except Uncacheable:
            flight.fail(NotShared())
            raise
        except BaseException as error:
            flight.fail(error)
            raise
        else:
            flight.depends, flight.stale = call.depends, call.stale
            flight.finish(value)
            return value
        finally:
            self.flights.leave(call.key, flight)

    def lead_missing(self, call: Call) -> Any:
        """Build under the lock, or wait (bounded) for the process that holds it."""
        lock = self.writer.try_lock(call)
        if lock is not None:
            return self.build_and_store(call, lock, None)
        self.cache.metrics.add("lock_waits")
        # Waiters in other processes poll the store: a short cap lets them see the
        # winner's entry soon after it is written (a 50 ms cap keeps a 0.5 s build's
        # waiters within ~10% of it), for a few gets a second per waiting process.
        for pause in pauses(call.options.wait, cap=0.05):
            time.sleep(pause)
            entry = self.reader.peek(call.key)
            if entry is not None:
                return self.take_peeked(call, entry)
            lock = self.writer.try_lock(call)  # the holder may have died and its lock expired
            if lock is not None:
                return self.build_and_store(call, lock, None)
        self.cache.metrics.add("wait_timeouts")
        return self.build_and_store(call, None, None)

    def take_peeked(self, call: Call, entry: Entry) -> Any:
        """Return the entry another process just wrote, with what it depends on."""
        self.cache.trace(call.key, "H")
        call.depends = entry.tags
        call.stale = not entry.is_fresh(self.cache.clock.time_ms())
        return entry.value

    def built_meanwhile(self, call: Call, found: object) -> Entry | None:
        """After winning the lock, return an entry someone else just rebuilt, if any.

        ``found`` is what the shared tier holds now (read for the lease): a near
        cache would still show this process the stale copy it had. Fresher tag
        versions read here become the ones the new entry records.
        """
        cache = self.cache
        try:
            entry = self.reader.decode(call.key, found)
            call.versions = versions = cache.tags.read(call.tags, call.key)
            if entry is None or (
                call.seen is not None and entry.fresh_until_ms == call.seen.fresh_until_ms
            ):
                return None  # nothing new: the entry that sent us here (an early refresh keeps it)
            now = cache.clock.time_ms()
            if entry.is_fresh(now) and self.reader.is_current(entry, versions):
                return entry
        except Exception as error:
            cache.store_failed("get_or_build", error)
        return None

    # -- locks, builds, writes -------------------------------------------------------------------

    def run_build(self, call: Call, stale: Entry | None) -> Any:
        """Call the builder, collecting what it reads; on an error serve ``stale`` or re-raise."""
        with self.building(call, stale):
            return call.build()

    @contextlib.contextmanager
    def building(self, call: Call, stale: Entry | None) -> Iterator[None]:
        """Run a build (sync or awaited) in the block, with what every build needs around it.

        What the block reads is collected into ``call.depends`` and ``call.stale``;
        an exception serves ``stale`` (as :class:`ServedStale`) or goes on up.
        """
        started = time.monotonic()
        try:
            with collecting(self.cache.tags.scope) as found:
                yield
        except Uncacheable:
            report(self.cache.tags.scope, merged(call.versions, found.versions), found.stale)
            raise  # not a failure: the builder's value is for its caller alone
        except Exception as error:
            self.build_failed(call.key, error)
            call.failed = True
            if stale is None:
                raise
            self.cache.failures.warning(
                "build.error", "building %r failed, serving its stale value: %r", call.key, error
            )
            raise ServedStale(self.serve_stale(call, stale)) from error
        self.cache.metrics.add("builds")
        call.built = True
        call.build_ms = int((time.monotonic() - started) * 1000)
        call.depends = merged(call.versions, found.versions)
        call.stale = found.stale

    def build_failed(self, key: str, error: Exception) -> None:
        """Count and trace a build that raised."""
        self.cache.metrics.add("build_errors")
        self.cache.trace(key, "E")

    def build_and_store(self, call: Call, lock: Lock | None, stale: Entry | None) -> Any:
        """Build, store the entry over what the key held when it began, release the lock."""
        lease = None
        try:
            lease = self.writer.take_lease(call, lock)
            if lock is not None and lease is not None:
                fresh = self.built_meanwhile(call, lease.found)
                if fresh is not None:
                    call.depends = fresh.tags
                    return fresh.value
            try:
                value = self.run_build(call, stale)
            except ServedStale as served:
                return served.value
            if lease is not None and self.writer.write(call, value, lease):
                lease = None
            return value
        finally:
            # A background rebuild that failed keeps the lock for a while: the stale
            # entry is served meanwhile, and the next request does not retry at once.
            self.writer.settle(call.key, lease, lock, call.failed and call.background)
