"""One build of ``get_or_build``: under the lock, over a lease, with what every build needs.

:class:`Building` runs a build once the read path (:mod:`mcache.engine.build`) has
decided one is due, as steps (:mod:`mcache.sansio.steps`): it takes the lease,
checks that no other process rebuilt the key meanwhile, calls the builder while
collecting what it reads (:mod:`mcache.model.dependencies`), serves the stale
value if it raises, writes the entry and frees the lock and lease, shielded from
the caller's cancellation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcache.engine.call import Call, ServedStale
from mcache.engine.fresh_reads import reading_primary_after
from mcache.engine.lock import Lock
from mcache.errors import Uncacheable
from mcache.model.dependencies import collecting, merged, report
from mcache.model.entry import Entry
from mcache.sansio.steps import CallBuilder, Shielded, Steps, StoreCall

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts
    from mcache.engine.reading import Reader
    from mcache.engine.writing import Writer

__all__ = ["Building"]


class Building:
    """Runs one build for the read path: lease, build, write, release (see the module)."""

    def __init__(
        self,
        parts: CacheParts,
        reader: Reader,
        writer: Writer,
        serve_stale: Callable[[Call, Entry], Any],
    ) -> None:
        self.parts, self.reader, self.writer = parts, reader, writer
        self.serve_stale = serve_stale
        """The read path's answer with a stale entry (stale-if-error serves it)."""

    def built_meanwhile_steps(self, call: Call, found: object | None) -> Steps[Entry | None]:
        """After winning the lock, return an entry someone else just rebuilt, if any.

        ``found``: what the shared tier holds now (None: read it here). The tag versions read
        here, before the build, are those the new entry records.
        """
        parts = self.parts
        try:
            if found is None:
                found = yield StoreCall(parts.shared, "get", (call.key,))
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

    def run_build_steps(self, call: Call, stale: Entry | None) -> Steps[Any]:
        """Call the builder, collecting what it reads into ``call.depends`` and ``call.stale``;
        an exception serves ``stale`` (as :class:`ServedStale`) or goes on up."""
        parts = self.parts
        started = parts.clock.monotonic()
        watch = parts.counts.watch_build(call.key)
        newest = call.newest_version() if parts.replication_lag_ms else 0
        try:
            with (
                collecting(parts.tags.scope) as found,
                reading_primary_after(parts.clock, newest, parts.replication_lag_ms),
            ):
                value = yield CallBuilder(call.build)
        except Uncacheable:
            watch.end("uncacheable")
            report(parts.tags.scope, merged(call.versions, found.versions), found.stale)
            raise  # not a failure: the builder's value is for its caller alone
        except Exception as error:
            watch.end("error" if stale is None else "stale-served")
            parts.counts.add("build_errors", key=call.key)
            parts.trace(call.key, "E")
            call.failed = True
            if stale is None:
                raise
            parts.failures.warning(
                "build.error", "building %r failed, serving its stale value: %r", call.key, error
            )
            raise ServedStale(self.serve_stale(call, stale)) from error
        except BaseException:
            watch.end("cancelled")
            raise
        watch.end("built")
        parts.counts.add("builds", key=call.key)
        call.built = True
        call.build_ms = int((parts.clock.monotonic() - started) * 1000)
        call.depends = merged(call.versions, found.versions)
        call.stale = found.stale
        return value

    def build_and_store_steps(
        self, call: Call, lock: Lock | None, stale: Entry | None
    ) -> Steps[Any]:
        """Build, store the entry over what the key held when it began, release the lock."""
        lease = None
        try:
            lease = yield Shielded(
                self.writer.take_lease_steps(call, lock), self.let_go(call, lock)
            )
            if lock is not None and lease is not None and not (lease.native and call.claim):
                # A server lease won by this call's own read comes with what the read saw;
                # any other (a queued job's, taken up by its worker) is checked as a lock is.
                found = None if lease.native else lease.found
                fresh = yield from self.built_meanwhile_steps(call, found)
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
                back_off = call.failed and call.background
                yield Shielded(self.writer.settle_steps(call.key, lease, lock, back_off))

    def let_go(self, call: Call, lock: Lock | None) -> Callable[[Any], Steps[None]]:
        """Return what frees a lock or lease won for an async caller cancelled meanwhile."""
        return lambda won: self.writer.let_go(call.key, won, lock)
