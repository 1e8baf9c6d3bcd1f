"""Dog-pile-safe ``get_or_build``: exactly one rebuild of a stale or missing entry.

The read path (DESIGN.md "get_or_build"):

1. One round trip fetches the entry and its tag versions.
2. Fresh, with every tag at its recorded version: a hit.
3. Stale (past fresh-until, a tag bumped, or picked for early refresh): one
   caller wins the lock and rebuilds, now (``sync``) or on the refresher
   (``background``, returning the stale value at once); every other caller gets
   the stale value at once.
4. Missing: threads of a process share one call; across processes the lock
   winner builds and the others poll for its entry, for at most ``wait``
   seconds, then build anyway: bounded duplication, never an endless wait.
5. The tag versions stored with an entry are those read before its build.
6. A build that raises serves the stale value if there is one (stale-if-error)
   and re-raises otherwise. The lock is always released, and only by its owner.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .api import NO_VALUE
from .entry import Entry
from .errors import Uncacheable
from .flight import Flight, NotShared, SingleFlight
from .lock import Lock, backoff_delays

if TYPE_CHECKING:
    from .cache import Cache

__all__ = ["STALE_SERVED", "BuildOptions", "Builder"]

STALE_SERVED: ContextVar[bool] = ContextVar("mcache_stale_served", default=False)
"""Set when ``get_or_build`` answered the current context with a stale value.

For adapters that report it (``X-Cache: STALE``): set it to False before the
call, read it after.
"""


@dataclass
class Call:
    """One ``get_or_build`` call on its way through the algorithm."""

    key: str
    build: Callable[[], Any]
    tags: list[str]
    options: BuildOptions
    versions: dict[str, int]
    seen: Entry | None = None


@dataclass(frozen=True)
class BuildOptions:
    """The per-call settings of one ``get_or_build``."""

    ttl: int
    stale_ttl: int
    lock_timeout: int
    wait: float
    refresh: str
    early_refresh: float
    jitter: float


class Builder:
    """Runs the read path for a ``Cache``."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.flights = SingleFlight()  # callers that found nothing: followers get the value
        self.refreshes = SingleFlight()  # stale rebuilds: the others serve stale meanwhile
        self.rng = random.Random()

    # -- reading --------------------------------------------------------------------------

    def read(self, key: str, tags: list[str]) -> tuple[Entry | None, dict[str, int]]:
        """Fetch the entry and the current versions of its tags, in one round trip."""
        cache = self.cache
        if not tags:
            return self.decode(key, cache.store.get(key)), {}
        slots = cache.tags.near(tags, key)
        local = cache.tags.cached(slots)
        if local is not None:
            return self.decode(key, cache.store.get(key)), local
        keys = [slot[1] for slot in slots]
        if cache.shared is cache.store:
            found = cache.store.get_many([key, *keys])
            return self.decode(key, found.get(key, NO_VALUE)), cache.tags.from_found(slots, found)
        entry = self.decode(key, cache.store.get(key))
        return entry, cache.tags.from_found(slots, cache.shared.get_many(keys))

    def decode(self, key: str, data: object) -> Entry | None:
        """Return the entry stored as ``data``, or None for a miss or undecodable bytes.

        A value written by a plain ``set`` is an entry too: untagged, fresh until
        the store drops it. So ``set`` then ``get_or_build`` returns what was set,
        as Django's ``get_or_set`` after ``set`` does.
        """
        if data is NO_VALUE:
            return None
        value = self.cache.codec.loads(data, key)  # type: ignore[arg-type]
        if value is NO_VALUE:
            return None  # foreign or corrupted bytes: the codec logged them
        entry = Entry.from_wire(value)
        return Entry(value, 0) if entry is None else entry

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
                return self.run_build(key, build, None)[0]
            try:
                entry, versions = self.read(key, tags)
            except Exception as error:
                cache.store_failed("get_or_build", error)
                cache.metrics.add("misses")
                return self.run_build(key, build, None)[0]  # the store is down: call the backend
            if self.is_hit(key, entry, versions, cache.clock.time_ms(), o):
                return entry.value  # type: ignore[union-attr]
            cache.trace(key, "M")
            call = Call(key, build, tags, o, versions, entry)
            if entry is not None:
                return self.refresh_stale(call, entry)
            cache.metrics.add("misses")
            return self.build_missing(call)
        except Uncacheable as own:  # this caller's own build: followers got NotShared
            cache.metrics.add("uncached")
            return own.value

    def is_hit(
        self, key: str, entry: Entry | None, versions: dict[str, int], now: int, o: BuildOptions
    ) -> bool:
        """Return (counted and traced) whether ``entry`` is fresh, current and not picked early."""
        if (
            entry is not None
            and (entry.fresh_until_ms == 0 or now < entry.fresh_until_ms)
            and entry.tags == versions
            and not (o.early_refresh and entry.refresh_early(now, o.early_refresh, self.rng))
        ):
            if self.cache.tracer.enabled:
                self.cache.tracer.event(key, "H")
            self.cache.metrics.add("hits")
            return True
        return False

    def serve_stale(self, key: str, entry: Entry) -> Any:
        """Return the stale value, counted and traced."""
        STALE_SERVED.set(True)
        self.cache.trace(key, "S")
        self.cache.metrics.add("stale")
        return entry.value

    def refresh_stale(self, call: Call, entry: Entry) -> Any:
        """Let one caller rebuild; everyone else gets the stale value at once."""
        flight = self.refreshes.claim(call.key)
        if flight is None:
            self.cache.metrics.add("coalesced")
            return self.serve_stale(call.key, entry)
        try:
            lock = self.try_lock(call)
            if lock is None:
                return self.serve_stale(call.key, entry)
            if call.options.refresh == "background":
                self.hand_over(call, lock)
                return self.serve_stale(call.key, entry)
            self.cache.metrics.add("misses")
            return self.build_and_store(call, lock, entry)
        finally:
            flight.finish()
            self.refreshes.leave(call.key, flight)

    def hand_over(self, call: Call, lock: Lock) -> None:
        """Give the rebuild to the refresher; if it refuses or fails, free the lock."""
        try:
            accepted = self.cache.refresher(lambda: self.build_in_background(call, lock))
        except Exception as error:  # e.g. a task queue whose broker is down
            self.cache.failures.warning("refresh.submit", "background refresh refused: %r", error)
            accepted = False
        if not accepted:
            self.unlock(call.key, lock)

    def build_in_background(self, call: Call, lock: Lock) -> None:
        """Rebuild on the refresher; a value the builder marked Uncacheable is dropped."""
        with contextlib.suppress(Uncacheable):
            self.build_and_store(call, lock, None)

    def outcome_of(self, flight: Flight, call: Call) -> Any:
        """Return the leader's value; if it was the leader's alone, build our own."""
        try:
            return flight.outcome()
        except NotShared:
            return self.build_and_store(call, None, None)

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
            flight.finish(value)
            return value
        finally:
            self.flights.leave(call.key, flight)

    def lead_missing(self, call: Call) -> Any:
        """Build under the lock, or wait (bounded) for the process that holds it."""
        lock = self.try_lock(call)
        if lock is not None:
            return self.build_and_store(call, lock, None)
        self.cache.metrics.add("lock_waits")
        deadline = time.monotonic() + call.options.wait
        # Waiters in other processes poll the store: a short cap lets them see the
        # winner's entry soon after it is written (a 50 ms cap keeps a 0.5 s build's
        # waiters within ~10% of it), for a few gets a second per waiting process.
        for delay in backoff_delays(cap=0.05):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(delay, remaining))
            entry = self.peek(call.key)
            if entry is not None:
                self.cache.trace(call.key, "H")
                return entry.value
            lock = self.try_lock(call)  # the holder may have died and its lock expired
            if lock is not None:
                return self.build_and_store(call, lock, None)
        self.cache.metrics.add("wait_timeouts")
        return self.build_and_store(call, None, None)

    def peek(self, key: str) -> Entry | None:
        """Return whatever entry is stored now (any freshness), or None."""
        try:
            return self.decode(key, self.cache.store.get(key))
        except Exception as error:
            self.cache.store_failed("get_or_build", error)
            return None

    def built_meanwhile(self, call: Call) -> Entry | None:
        """After winning the lock, return an entry someone else just rebuilt, if any.

        The read goes to the shared tier: a near cache would still show this
        process the stale copy it had. Fresher tag versions read here become the
        ones the new entry records.
        """
        cache = self.cache
        try:
            entry = self.decode(call.key, cache.shared.get(call.key))
            versions = cache.tags.read(call.tags, call.key)
        except Exception as error:
            cache.store_failed("get_or_build", error)
            return None
        call.versions = versions
        if entry is None or (
            call.seen is not None and entry.fresh_until_ms == call.seen.fresh_until_ms
        ):
            return None  # nothing new: the entry that sent us here (an early refresh keeps it)
        now = cache.clock.time_ms()
        if entry.is_fresh(now) and entry.tags_current(versions):
            return entry
        return None

    # -- locks, builds, writes -------------------------------------------------------------------

    def try_lock(self, call: Call) -> Lock | None:
        """Try the key's distributed lock once; return it if won."""
        self.cache.trace(call.key, "L")
        lock_key = self.cache.derived_key("l", call.key)
        lock = Lock(self.cache.shared, lock_key, call.options.lock_timeout)
        try:
            return lock if lock.try_acquire() else None
        except Exception as error:
            self.cache.store_failed("lock", error)
            return None

    def unlock(self, key: str, lock: Lock) -> None:
        """Release ``lock`` if still ours; a store failure here is logged, not raised."""
        try:
            lock.release()
        except Exception as error:
            self.cache.store_failed("unlock", error)
        self.cache.trace(key, "U")

    def run_build(self, key: str, build: Callable[[], Any], stale: Entry | None) -> tuple[Any, int]:
        """Call the builder; on an exception serve ``stale`` if there is one, else re-raise."""
        started = time.monotonic()
        try:
            value = build()
        except Uncacheable:
            raise  # not a failure: the builder's value is for its caller alone
        except Exception as error:
            if stale is None:
                self.build_failed(key, error, None)
                raise
            raise _ServedStale(self.build_failed(key, error, stale)) from error
        self.cache.metrics.add("builds")
        return value, int((time.monotonic() - started) * 1000)

    def build_failed(self, key: str, error: Exception, stale: Entry | None) -> Any:
        """Count a failed build; with a stale entry, log and return its value (stale-if-error)."""
        self.cache.metrics.add("build_errors")
        self.cache.trace(key, "E")
        if stale is None:
            return None
        self.cache.failures.warning(
            "build.error", "building %r failed, serving its stale value: %r", key, error
        )
        return self.serve_stale(key, stale)

    def build_and_store(self, call: Call, lock: Lock | None, stale: Entry | None) -> Any:
        """Build, store the entry with the pre-build tag versions, release the lock."""
        try:
            if lock is not None:
                fresh = self.built_meanwhile(call)
                if fresh is not None:
                    return fresh.value
            try:
                value, build_ms = self.run_build(call.key, call.build, stale)
            except _ServedStale as served:
                return served.value
            self.write(call.key, value, build_ms, call.versions, call.options)
            return value
        finally:
            if lock is not None:
                self.unlock(call.key, lock)

    def write(
        self, key: str, value: Any, build_ms: int, versions: dict[str, int], o: BuildOptions
    ) -> None:
        """Store the entry: fresh for ``ttl`` less up to ``jitter``, kept ``stale_ttl`` longer."""
        cache = self.cache
        if not cache.may_store():
            return  # built from data that may yet be rolled back: returned, never shared
        if o.ttl:
            fresh = o.ttl * (1 - self.rng.uniform(0, o.jitter))
            fresh_until = cache.clock.time_ms() + int(fresh * 1000)
            store_ttl = math.ceil(fresh + o.stale_ttl)
        else:
            fresh_until, store_ttl = 0, 0
        entry = Entry(value, fresh_until, build_ms, versions)
        try:
            data = cache.codec.dumps(entry.to_wire(), key)
        except Exception as error:  # e.g. a JSON codec and a value JSON cannot carry
            cache.failures.warning("entry.encode", "cannot encode %r, not cached: %r", key, error)
            return
        if cache.store_call("set", lambda: cache.store.set(key, data, store_ttl) or True, False):
            cache.trace(key, "W")


class _ServedStale(Exception):
    """Carries the stale value served after a failed build out of ``run_build``."""

    def __init__(self, value: Any) -> None:
        super().__init__("served stale")
        self.value = value
