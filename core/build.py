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

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .api import NO_VALUE
from .entry import Entry
from .flight import SingleFlight
from .lock import Lock, backoff_delays

if TYPE_CHECKING:
    from .cache import Cache

__all__ = ["BuildOptions", "Builder"]


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
        self.flights = SingleFlight()
        self.rng = random.Random()

    # -- reading --------------------------------------------------------------------------

    def read(self, key: str, tags: list[str]) -> tuple[Entry | None, dict[str, int]]:
        """Fetch the entry and the current versions of its tags, in one round trip."""
        cache = self.cache
        local = cache.tags.cached(tags) if tags else {}
        if local is not None:
            return self.decode(key, cache.store.get(key)), local
        if cache.shared is cache.store:
            found = cache.store.get_many([key, *(cache.tags.key(t) for t in tags)])
            return self.decode(key, found.get(key, NO_VALUE)), cache.tags.from_found(tags, found)
        entry = self.decode(key, cache.store.get(key))
        return entry, cache.tags.read(tags)

    def decode(self, key: str, data: object) -> Entry | None:
        """Return the entry stored as ``data``, or None for a miss or foreign bytes."""
        if data is NO_VALUE:
            return None
        entry = Entry.from_wire(self.cache.codec.loads(data, key))  # type: ignore[arg-type]
        if entry is None:
            self.cache.failures.warning(
                "entry.foreign", "%r holds no mcache entry; rebuilding", key
            )
        return entry

    # -- the algorithm ------------------------------------------------------------------------

    def get_or_build(
        self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions
    ) -> Any:
        """Return the cached value for ``key``, building it at most once across callers."""
        cache = self.cache
        try:
            entry, versions = self.read(key, tags)
        except Exception as error:
            cache.store_failed("get_or_build", error)
            cache.metrics.add("misses")
            return self.run_build(key, build, None)[0]  # the store is down: call the backend
        now = cache.clock.time_ms()
        valid = entry is not None and entry.is_fresh(now) and entry.tags_current(versions)
        if valid and not entry.refresh_early(now, o.early_refresh, self.rng):  # type: ignore[union-attr]
            cache.trace(key, "H")
            cache.metrics.add("hits")
            return entry.value  # type: ignore[union-attr]
        cache.trace(key, "M")
        if entry is not None:
            return self.refresh_stale(key, build, entry, versions, o)
        cache.metrics.add("misses")
        return self.build_missing(key, build, versions, o)

    def serve_stale(self, key: str, entry: Entry) -> Any:
        """Return the stale value, counted and traced."""
        self.cache.trace(key, "S")
        self.cache.metrics.add("stale")
        return entry.value

    def refresh_stale(
        self,
        key: str,
        build: Callable[[], Any],
        entry: Entry,
        versions: dict[str, int],
        o: BuildOptions,
    ) -> Any:
        """Let one caller rebuild; everyone else gets the stale value at once."""
        flight = self.flights.claim(key)
        if flight is None:
            self.cache.metrics.add("coalesced")
            return self.serve_stale(key, entry)
        try:
            lock = self.try_lock(key, o)
            if lock is None:
                return self.serve_stale(key, entry)
            if o.refresh == "background":
                job = lambda: self.build_and_store(key, build, versions, o, lock, entry)  # noqa: E731
                if not self.cache.refresher(job):
                    self.unlock(key, lock)
                return self.serve_stale(key, entry)
            self.cache.metrics.add("misses")
            return self.build_and_store(key, build, versions, o, lock, entry)
        finally:
            flight.finish()
            self.flights.leave(key, flight)

    def build_missing(
        self, key: str, build: Callable[[], Any], versions: dict[str, int], o: BuildOptions
    ) -> Any:
        """Build a missing entry once per process, and once across processes."""
        flight, leader = self.flights.join(key)
        if not leader:
            self.cache.metrics.add("coalesced")
            if flight.wait(o.wait):
                if flight.error is not None:
                    raise flight.error
                return flight.value
            self.cache.metrics.add("wait_timeouts")
            return self.lead_missing(key, build, versions, o)
        try:
            value = self.lead_missing(key, build, versions, o)
        except BaseException as error:
            flight.finish(error=error)
            raise
        else:
            flight.finish(value)
            return value
        finally:
            self.flights.leave(key, flight)

    def lead_missing(
        self, key: str, build: Callable[[], Any], versions: dict[str, int], o: BuildOptions
    ) -> Any:
        """Build under the lock, or wait (bounded) for the process that holds it."""
        lock = self.try_lock(key, o)
        if lock is not None:
            return self.build_and_store(key, build, versions, o, lock, None)
        self.cache.metrics.add("lock_waits")
        deadline = time.monotonic() + o.wait
        for delay in backoff_delays():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(delay, remaining))
            entry = self.peek(key)
            if entry is not None:
                self.cache.trace(key, "H")
                return entry.value
            lock = self.try_lock(key, o)  # the holder may have died and its lock expired
            if lock is not None:
                return self.build_and_store(key, build, versions, o, lock, None)
        self.cache.metrics.add("wait_timeouts")
        return self.build_and_store(key, build, versions, o, None, None)

    def peek(self, key: str) -> Entry | None:
        """Return whatever entry is stored now (any freshness), or None."""
        try:
            return self.decode(key, self.cache.store.get(key))
        except Exception as error:
            self.cache.store_failed("get_or_build", error)
            return None

    # -- locks, builds, writes -------------------------------------------------------------------

    def try_lock(self, key: str, o: BuildOptions) -> Lock | None:
        """Try the key's distributed lock once; return it if won."""
        self.cache.trace(key, "L")
        lock = Lock(self.cache.shared, self.cache.derived_key("l", key), o.lock_timeout)
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
        except Exception as error:
            self.cache.metrics.add("build_errors")
            self.cache.trace(key, "E")
            if stale is None:
                raise
            self.cache.failures.warning(
                "build.error", "building %r failed, serving its stale value: %r", key, error
            )
            raise _ServedStale(self.serve_stale(key, stale)) from error
        self.cache.metrics.add("builds")
        return value, int((time.monotonic() - started) * 1000)

    def build_and_store(
        self,
        key: str,
        build: Callable[[], Any],
        versions: dict[str, int],
        o: BuildOptions,
        lock: Lock | None,
        stale: Entry | None,
    ) -> Any:
        """Build, store the entry with the pre-build tag versions, release the lock."""
        try:
            try:
                value, build_ms = self.run_build(key, build, stale)
            except _ServedStale as served:
                return served.value
            self.write(key, value, build_ms, versions, o)
            return value
        finally:
            if lock is not None:
                self.unlock(key, lock)

    def write(
        self, key: str, value: Any, build_ms: int, versions: dict[str, int], o: BuildOptions
    ) -> None:
        """Store the entry: fresh for ``ttl`` less up to ``jitter``, kept ``stale_ttl`` longer."""
        cache = self.cache
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
