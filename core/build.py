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

The algorithm is written once, as steps (:mod:`mcache.steps`): every method
named ``*_steps`` yields the I/O it needs. ``get_or_build`` runs them by
calling (the store, ``time.sleep``, the builder); ``aget_or_build`` by
awaiting (the store's async twin, or a worker thread for a store without one;
``asyncio.sleep``; the coroutine builder on the caller's loop). No thread ever
blocks waiting for the event loop, so nested cached coroutines cannot exhaust
the thread pool and deadlock.

Inside another build the rules tighten (composition rule 2): a stale entry is
rebuilt before use, in the caller's thread whatever ``refresh`` says, and one
that can only be had stale (another process holds its lock) makes the
enclosing entry be stored already stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .api import NO_VALUE
from .call import BuildOptions, Call, ServedStale
from .dependencies import collecting, inside_build, merged, report
from .entry import Entry
from .errors import Uncacheable
from .flight import Flight, NotShared, SingleFlight
from .lock import Lock, pauses
from .rebuild import Rebuilds
from .steps import (
    CallBuilder,
    Pause,
    Shielded,
    Steps,
    Wait,
    aperform,
    arun_steps,
    perform,
    run_steps,
    settled,
)
from .writing import Writer

if TYPE_CHECKING:
    from .parts import CacheParts
    from .reading import Reader

__all__ = ["STALE_SERVED", "BuildOptions", "Builder", "Call", "ServedStale"]

STALE_SERVED: ContextVar[bool] = ContextVar("mcache_stale_served", default=False)
"""Set when ``get_or_build`` answered the current context with a stale value.

For adapters that report it (``X-Cache: STALE``): set it to False before the
call, read it after.
"""


class Builder:
    """Runs a cache's read path on its :class:`~mcache.parts.CacheParts`: one algorithm
    (steps), two drivers."""

    def __init__(self, parts: CacheParts, reader: Reader) -> None:
        self.parts = parts
        self.reader = reader
        self.rng = random.Random()
        self.writer = Writer(parts, reader, self.rng)
        self.rebuilds = Rebuilds(self)
        self.flights = SingleFlight()  # callers that found nothing: followers get the value
        self.refreshes = SingleFlight()  # stale rebuilds: the others serve stale meanwhile

    # -- the two drivers --------------------------------------------------------------------------

    def get_or_build(
        self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions
    ) -> Any:
        """Return the cached value for ``key``, building it at most once across callers."""
        return run_steps(self.get_or_build_steps(key, build, tags, o), perform)

    async def aget_or_build(
        self, key: str, build: Callable[[], Awaitable[Any]], tags: list[str], o: BuildOptions
    ) -> Any:
        """:meth:`get_or_build` with a coroutine builder, awaited on the caller's loop."""
        return await arun_steps(self.get_or_build_steps(key, build, tags, o), aperform)

    def build_and_store(self, call: Call, lock: Lock | None, stale: Entry | None) -> Any:
        """Build, store the entry and free the lock, now (a refresher's, or a forced, rebuild)."""
        return run_steps(self.build_and_store_steps(call, lock, stale), perform)

    # -- the algorithm ------------------------------------------------------------------------

    def get_or_build_steps(
        self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions
    ) -> Steps[Any]:
        """The read path, as steps (see the module's docstring)."""
        parts = self.parts
        try:
            if not parts.may_store():
                # Uncommitted data (see Cache.may_store): built for this caller alone,
                # never stored and never handed to the threads that share its calls.
                return (yield from self.build_alone_steps(Call(key, build, tags, o, {})))
            claim = self.writer.claim_for(key, o)
            try:
                entry, declared, others = yield from self.reader.read_steps(key, tags, claim)
            except Exception as error:
                parts.store_failed("get_or_build", error)
                parts.metrics.add("misses")
                call = Call(key, build, tags, o, {})
                return (yield from self.build_alone_steps(call, unread=True))
            if self.writer.claims:
                self.writer.saw(key, entry)
            now = parts.clock.time_ms()
            if self.is_hit(key, entry, declared, others, now, o):
                if claim is not None:
                    yield from self.writer.drop_claim_steps(key, claim)
                if entry.tags and inside_build():  # type: ignore[union-attr]
                    report(self.parts.tags.scope, entry.tags)  # type: ignore[union-attr]
                return entry.value  # type: ignore[union-attr]
            parts.trace(key, "M")
            call = Call(key, build, tags, o, declared, entry, claim=claim)
            if entry is not None:
                call.seen_fresh = entry.is_fresh(now) and entry.tags_current(declared, others)
                value = yield from self.refresh_stale_steps(call, entry)
            else:
                yield from self.writer.drop_claim_steps(key, claim)
                parts.metrics.add("misses")
                value = yield from self.build_missing_steps(call)
            report(self.parts.tags.scope, call.depends, call.stale)
            return value
        except Uncacheable as own:  # this caller's own build: followers got NotShared
            parts.metrics.add("uncached")
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
            if self.parts.tracer.enabled:
                self.parts.tracer.event(key, "H")
            self.parts.metrics.add("hits")
            return True
        return False

    def build_alone_steps(self, call: Call, unread: bool = False) -> Steps[Any]:
        """Build for this caller only (nothing is read or stored), reporting what it read.

        ``unread``: the store could not be read (it is down), so what the value
        depends on is unknown: an enclosing build must not store it as fresh.
        """
        value = yield from self.run_build_steps(call, None)
        report(self.parts.tags.scope, call.depends, call.stale or unread)
        return value

    def serve_stale(self, call: Call, entry: Entry) -> Any:
        """Return the stale value, counted and traced."""
        STALE_SERVED.set(True)
        self.parts.trace(call.key, "S")
        self.parts.metrics.add("stale")
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
            self.parts.metrics.add("coalesced")
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
        lock = yield Shielded(self.writer.try_stale_lock_steps(call), self._let_go(call, None))
        if lock is None:
            return (yield from self.fresh_or_stale_steps(call, entry))
        if call.options.refresh == "background" and not inside_build():
            yield HandOver(self.rebuilds, call, lock)
            return (yield from self.fresh_or_stale_steps(call, entry))
        self.parts.metrics.add("misses")
        return (yield from self.build_and_store_steps(call, lock, entry))

    def fresh_or_stale_steps(self, call: Call, entry: Entry) -> Steps[Any]:
        """While another rebuilds: its new value if it comes within ``stale_wait``, else stale."""
        if not call.seen_fresh:
            for pause in pauses(call.options.stale_wait):
                yield Pause(pause)
                fresh = yield from self.fresh_entry_steps(call)
                if fresh is not None:
                    call.depends = fresh.tags
                    return fresh.value
        return self.serve_stale(call, entry)

    def fresh_entry_steps(self, call: Call) -> Steps[Entry | None]:
        """Return the key's entry if it is fresh with every tag current now, else None."""
        try:
            entry, declared, others = yield from self.reader.read_steps(call.key, call.tags)
        except Exception as error:
            self.parts.store_failed("get_or_build", error)
            return None
        now = self.parts.clock.time_ms()
        if entry is not None and entry.is_fresh(now) and entry.tags_current(declared, others):
            return entry
        return None

    def outcome_of_steps(self, flight: Flight, call: Call) -> Steps[Any]:
        """Return the leader's value; if it was the leader's alone, build our own."""
        try:
            value = flight.outcome()
        except NotShared:
            return (yield from self.build_and_store_steps(call, None, None))
        call.depends, call.stale = flight.depends, flight.stale
        return value

    def build_missing_steps(self, call: Call) -> Steps[Any]:
        """Build a missing entry once per process, and once across processes.

        Followers wait up to ``wait`` for their leader. If it has not finished by
        then, the first of them leads a new flight and builds without more waiting
        (bounded duplication), and the rest follow that one for as long as a build
        may take (``lock_timeout``) before building themselves.
        """
        flight, leader = self.flights.join(call.key)
        if not leader:
            self.parts.metrics.add("coalesced")
            if (yield Wait(flight, call.options.wait)) and flight.answered():
                return (yield from self.outcome_of_steps(flight, call))
            self.parts.metrics.add("wait_timeouts")
            flight, leader = self.flights.take_over(call.key, flight)
            if not leader:
                if (yield Wait(flight, call.options.lock_timeout)) and flight.answered():
                    return (yield from self.outcome_of_steps(flight, call))
                return (yield from self.build_and_store_steps(call, None, None))
            return (
                yield from self.lead_steps(
                    flight, call, self.build_and_store_steps(call, None, None)
                )
            )
        return (yield from self.lead_steps(flight, call, self.lead_missing_steps(call)))

    def lead_steps(self, flight: Flight, call: Call, work: Steps[Any]) -> Steps[Any]:
        """Run ``work`` as the flight's leader and publish its outcome to the followers."""
        try:
            value = yield from work
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

    def lead_missing_steps(self, call: Call) -> Steps[Any]:
        """Build under the lock, or wait (bounded) for the process that holds it."""
        let_go = self._let_go(call, None)
        lock = yield Shielded(self.writer.try_lock_steps(call), let_go)
        if lock is not None:
            return (yield from self.build_and_store_steps(call, lock, None))
        self.parts.metrics.add("lock_waits")
        # Waiters in other processes poll the store: a short cap lets them see the
        # winner's entry soon after it is written (a 50 ms cap keeps a 0.5 s build's
        # waiters within ~10% of it), for a few gets a second per waiting process.
        for pause in pauses(call.options.wait, cap=0.05):
            yield Pause(pause)
            entry = yield from self.reader.peek_steps(call.key)
            if entry is not None:
                return self.take_peeked(call, entry)
            # The holder may have died and its lock expired.
            lock = yield Shielded(self.writer.try_lock_steps(call), let_go)
            if lock is not None:
                return (yield from self.build_and_store_steps(call, lock, None))
        self.parts.metrics.add("wait_timeouts")
        return (yield from self.build_and_store_steps(call, None, None))

    def take_peeked(self, call: Call, entry: Entry) -> Any:
        """Return the entry another process just wrote, with what it depends on."""
        self.parts.trace(call.key, "H")
        call.depends = entry.tags
        call.stale = not entry.is_fresh(self.parts.clock.time_ms())
        return entry.value

    def built_meanwhile_steps(self, call: Call, found: object) -> Steps[Entry | None]:
        """After winning the lock, return an entry someone else just rebuilt, if any.

        ``found`` is what the shared tier holds now (read for the lease): a near
        cache would still show this process the stale copy it had. Fresher tag
        versions read here become the ones the new entry records.
        """
        parts = self.parts
        try:
            entry = self.reader.decode(call.key, found)
            call.versions = versions = yield from parts.tags.read_steps(call.tags, call.key)
            if entry is None or (
                call.seen is not None and entry.fresh_until_ms == call.seen.fresh_until_ms
            ):
                return None  # nothing new: the entry that sent us here (an early refresh keeps it)
            now = parts.clock.time_ms()
            if entry.is_fresh(now) and (yield from self.reader.is_current_steps(entry, versions)):
                return entry
        except Exception as error:
            parts.store_failed("get_or_build", error)
        return None

    # -- locks, builds, writes -------------------------------------------------------------------

    def run_build_steps(self, call: Call, stale: Entry | None) -> Steps[Any]:
        """Call the builder, collecting what it reads; on an error serve ``stale`` or re-raise."""
        with self.building(call, stale):
            return (yield CallBuilder(call.build))

    @contextlib.contextmanager
    def building(self, call: Call, stale: Entry | None) -> Iterator[None]:
        """Run a build in the block, with what every build needs around it.

        What the block reads is collected into ``call.depends`` and ``call.stale``;
        an exception serves ``stale`` (as :class:`ServedStale`) or goes on up.
        """
        started = time.monotonic()
        try:
            with collecting(self.parts.tags.scope) as found:
                yield
        except Uncacheable:
            report(self.parts.tags.scope, merged(call.versions, found.versions), found.stale)
            raise  # not a failure: the builder's value is for its caller alone
        except Exception as error:
            self.build_failed(call.key, error)
            call.failed = True
            if stale is None:
                raise
            self.parts.failures.warning(
                "build.error", "building %r failed, serving its stale value: %r", call.key, error
            )
            raise ServedStale(self.serve_stale(call, stale)) from error
        self.parts.metrics.add("builds")
        call.built = True
        call.build_ms = int((time.monotonic() - started) * 1000)
        call.depends = merged(call.versions, found.versions)
        call.stale = found.stale

    def build_failed(self, key: str, error: Exception) -> None:
        """Count and trace a build that raised."""
        self.parts.metrics.add("build_errors")
        self.parts.trace(key, "E")

    def build_and_store_steps(
        self, call: Call, lock: Lock | None, stale: Entry | None
    ) -> Steps[Any]:
        """Build, store the entry over what the key held when it began, release the lock."""
        lease = None
        try:
            lease = yield Shielded(
                self.writer.take_lease_steps(call, lock), self._let_go(call, lock)
            )
            if lock is not None and lease is not None:
                fresh = yield from self.built_meanwhile_steps(call, lease.found)
                if fresh is not None:
                    call.depends = fresh.tags
                    return fresh.value
            try:
                value = yield from self.run_build_steps(call, stale)
            except ServedStale as served:
                return served.value
            if lease is not None and (yield from self.writer.write_steps(call, value, lease)):
                lease = None
            return value
        finally:
            if lease is not None or lock is not None:
                # A background rebuild that failed keeps the lock for a while: the stale
                # entry is served meanwhile, and the next request does not retry at once.
                back_off = call.failed and call.background
                yield Shielded(self.writer.settle_steps(call.key, lease, lock, back_off))

    def _let_go(self, call: Call, lock: Lock | None) -> Callable[[Any], Steps[None]]:
        """Return what frees a lock or lease won for an async caller cancelled meanwhile."""
        return lambda won: self.writer.let_go(call.key, won, lock)


@dataclass(slots=True)
class HandOver:
    """Give a stale key's rebuild to the refresher, with the lock its caller won."""

    rebuilds: Rebuilds
    call: Call
    lock: Lock

    def run(self) -> bool:
        return self.rebuilds.hand_over(self.call, self.lock)

    async def arun(self) -> bool:
        # The refresher cannot count on the caller's loop: under WSGI (asgiref) it
        # belongs to one request and is gone once the response is sent. So the job
        # runs the coroutine on a loop of its own; a queue worker imports the builder.
        build = self.call.build
        job = dataclasses.replace(self.call, build=lambda: _completed(build()), origin=build)
        return await asyncio.to_thread(self.rebuilds.hand_over, job, self.lock)


def _completed(result: Any) -> Any:
    """Return a builder's ``result``, run to its end on a loop of its own if it is a coroutine."""
    return asyncio.run(settled(result)) if inspect.isawaitable(result) else result
