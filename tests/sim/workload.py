"""What a simulated site does: reads of rows and of pages over them, and writes of rows.

A read is ``get_or_build`` of a row's entry, tagged with the row's tag, whose builder
reads the row (taking the time its plan says, and sometimes raising or returning
``Uncacheable``). A page read is ``get_or_build`` of a page whose builder reads the
row's entry with a nested ``get_or_build``, as a Russian-doll template does: what the
page records, it records through that nested read (composition rules 1 and 2). A write
commits the row's next version, then bumps its tag or deletes its entry.

A value carries its provenance: a row's is ``[row, version, build]``, a page's
``[row, version of the row it shows, page build, row build]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from mcache import read_primary
from mcache.engine.build import STALE_SERVED
from mcache.errors import Uncacheable
from mcache.observe.outcome import STORE_FAILED
from mcache.sansio.steps import Pause
from tests.sim.history import Call
from tests.sim.keys import entry_key
from tests.sim.pages import page_over_stale
from tests.sim.processes import SimThread, Steps, Task
from tests.sim.queue import addressable
from tests.sim.transactions import IN_TRANSACTION, row_version

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation


class BuildFailed(Exception):
    """What a simulated builder raises when its seed has it fail."""


@dataclass
class Plan:
    """What a read's builder is to do: which entry, for how long, and how it ends."""

    key: int
    call: Call
    build_seconds: float
    ending: str = "value"
    """"value", "raise" (the build fails) or "uncacheable" (its value is not to be stored)."""
    entry: str = "row"
    part_seconds: float = 0.0
    """A page's: how long the build of its row takes, if its nested read builds it."""

    @property
    def nested(self) -> bool:
        """Whether the builder reads another entry (its steps run on the caller's thread)."""
        return self.entry == "page"


class Workload:
    """The calls of a run's threads, as steps a simulated thread runs."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.history = sim.history
        self.database = sim.database

    def read_steps(
        self,
        thread: SimThread,
        key: int,
        build_seconds: float,
        ending: str = "value",
        part_seconds: float | None = None,
        forced: bool = False,
    ) -> Steps:
        """``get_or_build`` of row ``key``'s entry, or (``part_seconds`` given) of its page;
        ``forced``: ``Cache.refresh`` of it instead."""
        cache = thread.process.cache
        STALE_SERVED.set(False)
        entry = "row" if part_seconds is None else "page"
        kind = "tx-read" if IN_TRANSACTION.get() else "read"
        call = self.history.invoke(kind, thread, key, entry)
        call.forced = forced
        plan = Plan(key, call, build_seconds, ending, entry, part_seconds or 0.0)
        shared_before = thread.waited_on_flight
        thread.building, thread.waited_on_flight = plan, False

        def build() -> Any:
            number = self.history.builds[-1].number
            if plan.nested:  # on the thread that runs the build (a refresher's, maybe)
                return self.page_steps(self.sim.running or thread, plan, number)
            value = [key, self.row_read(key, number), number]
            if plan.ending == "raise":
                raise BuildFailed(f"build of row {key} failed")
            if plan.ending == "uncacheable":
                raise Uncacheable(value, "simulated")
            return value

        build.plan = plan  # type: ignore[attr-defined]  # what a refresher's thread builds by
        if self.sim.config.refresh == "queue":
            build = addressable(build)  # type: ignore[assignment]  # a job names it
        options = cache.call_options()
        STORE_FAILED.set("")
        tags = [f"t{key}"] if entry == "row" else [f"p{key}"]
        try:
            if forced:  # Cache.refresh: rebuilt now whatever its state, waiting on its lock
                store_key = entry_key(cache, key, entry)
                steps = cache.builder.rebuilds.force_steps(store_key, build, tags, options)
            else:
                steps = cache.get_or_build_steps(f"{entry}{key}", build, options, tags)
            value = yield from steps
        finally:  # a call cut short (cancelled, failed) may have found the store down too
            call.store_failed = bool(STORE_FAILED.get())
        call.stale = STALE_SERVED.get()
        call.shared_flight = thread.waited_on_flight
        thread.waited_on_flight = shared_before
        return value, call

    def row_read(self, key: int, build: int) -> int:
        """The version of row ``key`` a build reads: its transaction's, or the primary's
        when the library says so (``read_primary()``, as a database router asks it), or else
        the replica's, which lags (``replica_lag``)."""
        database = self.database
        if not database.lag or IN_TRANSACTION.get() or read_primary():
            return row_version(database.rows[key], key)
        self.history.builds[build].replica = True
        return database.replica(key)

    def page_steps(self, thread: SimThread, plan: Plan, number: int) -> Steps:
        """A page's builder: the nested read of its row's entry, then the page's own work."""
        calls = self.history.calls
        first = len(calls)
        try:
            part, read = yield from self.read_steps(thread, plan.key, plan.part_seconds)
        except Exception as error:
            self.history.end(calls[first], "failed", repr(error))
            raise
        self.history.end(read, "ok", part)
        build = self.history.builds[number]
        build.part_stale, build.part_unknown = read.stale, read.store_failed
        if read.stale:
            page_over_stale(self.sim, thread.process, plan.key)
        yield Pause(plan.build_seconds)
        value = [plan.key, part[1], number, part[2]]
        if plan.ending == "raise":
            raise BuildFailed(f"build of page {plan.key} failed")
        if plan.ending == "uncacheable":
            raise Uncacheable(value, "simulated")
        return value

    def write_steps(self, thread: SimThread, key: int, by_delete: bool = False) -> Steps:
        """A row written, then its cache told: its tag bumped, or (``by_delete``) its entry
        deleted; ``invalidated`` only if the store took it."""
        call = self.history.invoke("write", thread, key)
        call.version, call.by_delete = self.database.write(key), by_delete
        cache = thread.process.cache
        if by_delete:
            STORE_FAILED.set("")
            result = yield from cache.delete_steps(f"row{key}")
            call.invalidated = not STORE_FAILED.get()
        else:
            result = yield from cache.invalidate_steps((f"t{key}",))
            call.invalidated = bool(result)
        return result, call

    def transaction_steps(self, thread: SimThread, key: int, commit: bool) -> Steps:
        """A row written inside a transaction, its tag bumped, the row's entry (or page)
        read from inside it, then the transaction committed (the write, and the tag bumped
        again, as an adapter's commit hook does) or rolled back (``transactions``)."""
        cache, rng = thread.process.cache, self.sim.world.rng
        IN_TRANSACTION.set({key: self.database.rows[key] + 1})
        try:
            yield from cache.invalidate_steps((f"t{key}",))
            page = self.sim.config.pages and rng.random() < 0.5
            part = rng.uniform(0.001, 0.1) if page else None
            seconds = rng.uniform(0.001, 0.1)
            value, read = yield from self.read_steps(thread, key, seconds, part_seconds=part)
            self.history.end(read, "ok", value)
            yield Pause(rng.uniform(0.01, 0.3))
        finally:
            IN_TRANSACTION.set(None)
        if not commit:
            return value, read
        return (yield from self.write_steps(thread, key))

    def queue(self, thread: SimThread, steps: Callable[[], Steps], delay: float) -> None:
        """Queue a call's ``steps`` on ``thread``, ``delay`` seconds after its previous task
        ends, its outcome recorded when it ends."""
        thread.push(Task(steps, self.ended(thread), delay))

    def transaction(self, thread: SimThread, key: int, delay: float, commit: bool) -> None:
        """Queue a transactional write on ``thread`` (see :meth:`transaction_steps`)."""
        self.queue(thread, partial(self.transaction_steps, thread, key, commit), delay)

    def ended(self, thread: SimThread) -> Any:
        """What records the end of ``thread``'s task: its call's outcome and value."""
        calls = self.history.calls

        def done(value: Any, error: BaseException | None) -> None:
            mine = [c for c in calls if c.thread == thread.name and c.outcome == "pending"]
            if error is not None:
                outcome = "cancelled" if isinstance(error, asyncio.CancelledError) else "failed"
                for call in mine:
                    self.history.end(call, outcome, repr(error))
                return
            result, call = value
            self.history.end(call, "ok", None if call.kind == "write" else result)

        return done

    def read(
        self,
        thread: SimThread,
        key: int,
        seconds: float,
        delay: float = 0.0,
        ending: str = "value",
        part_seconds: float | None = None,
        forced: bool = False,
    ) -> None:
        """Queue a read on ``thread``, ``delay`` seconds after its previous task ends."""
        steps = partial(self.read_steps, thread, key, seconds, ending, part_seconds, forced)
        self.queue(thread, steps, delay)

    def write(
        self, thread: SimThread, key: int, delay: float = 0.0, by_delete: bool = False
    ) -> None:
        """Queue a write on ``thread``, ``delay`` seconds after its previous task ends."""
        self.queue(thread, partial(self.write_steps, thread, key, by_delete), delay)

    def plan_threads(self) -> None:
        """Give every thread of every process the calls its seed draws."""
        config, rng = self.sim.config, self.sim.world.rng
        for process in self.sim.processes:
            for t in range(config.threads):
                thread = process.thread(f"p{process.number}t{t}")
                for _ in range(config.calls):
                    key = rng.randrange(config.keys)
                    delay = round(rng.uniform(0.0, 3.0), 4)
                    if rng.random() < 0.25:
                        self.write(thread, key, delay, rng.random() < config.delete_share)
                        continue
                    if config.transactions and rng.random() < 0.2:
                        self.transaction(thread, key, delay, rng.random() < 0.5)
                        continue
                    seconds = self.build_seconds()
                    draw = rng.random()
                    ending = (
                        "raise"
                        if draw < config.failing_builds
                        else "uncacheable"
                        if draw < 2 * config.failing_builds
                        else "value"
                    )
                    page = config.pages and rng.random() < config.pages
                    part = self.build_seconds() if page else None
                    forced = config.refreshes and rng.random() < config.refreshes
                    self.read(thread, key, seconds, delay, ending, part, bool(forced))

    def build_seconds(self) -> float:
        """A build's duration: most are short; with ``long_builds``, 30% outlast the lock;
        with ``outliving_builds``, one in ten outlasts its entry's ``ttl + stale_ttl`` (its
        placeholder, kept alive by its lock's renewals)."""
        config, rng = self.sim.config, self.sim.world.rng
        if config.outliving_builds and rng.random() < 0.1:
            life = config.ttl + config.stale_ttl
            return rng.uniform(life, life + 2.0 * config.lock_timeout)
        if config.long_builds and rng.random() < 0.3:
            return rng.uniform(1.0, 3.0 * config.lock_timeout)
        return rng.uniform(0.001, 0.6)
