"""``aget_or_build``: the read path of :mod:`mcache.build` for coroutine builders.

The algorithm is the same; what differs is where the waiting happens. The
read is the sync path's own steps (:meth:`Reader.read_steps`), awaited: on a
store with an async twin (in-process, Redis) a hit never leaves the event
loop. The other store calls still run briefly in a worker thread
(``asyncio.to_thread``) and return, until they too are written as steps. The
builder is awaited on the caller's event loop; waits for another caller's
build are ``asyncio.sleep`` polls or awaits on the in-process flight. No
thread ever blocks waiting for the event loop, so nested cached coroutines
cannot exhaust the thread pool and deadlock. The pieces that do no waiting
(hit checks, reports, writes) are the sync builder's own, so both drivers
keep the same rules.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from . import lease as leases
from .api import NO_VALUE
from .call import Call, ServedStale
from .dependencies import inside_build, report
from .entry import Entry
from .errors import Uncacheable
from .flight import Flight, NotShared
from .lock import Lock, pauses
from .steps import aperform, arun_steps

if TYPE_CHECKING:
    from .build import Builder
    from .call import BuildOptions

__all__ = ["AsyncBuilder"]

AsyncBuild = Callable[[], Awaitable[Any]]


class AsyncBuilder:
    """Runs the read path with a coroutine builder, sharing a ``Builder``'s state."""

    def __init__(self, builder: Builder) -> None:
        self.sync = builder
        self.cache = builder.cache

    async def get_or_build(
        self, key: str, build: AsyncBuild, tags: list[str], o: BuildOptions
    ) -> Any:
        """Return the cached value for ``key``, awaiting ``build()`` at most once across callers."""
        sync = self.sync
        try:
            if not self.cache.may_store():  # here, not in a worker: it asks about this thread
                return await self.build_alone(Call(key, build, tags, o, {}))
            try:
                entry, declared, others = await arun_steps(
                    sync.reader.read_steps(key, tags), aperform
                )
            except Exception as error:
                self.cache.store_failed("get_or_build", error)
                self.cache.metrics.add("misses")
                return await self.build_alone(Call(key, build, tags, o, {}), unread=True)
            now = self.cache.clock.time_ms()
            if sync.is_hit(key, entry, declared, others, now, o):
                report(self.cache.tags.scope, entry.tags)  # type: ignore[union-attr]
                return entry.value  # type: ignore[union-attr]
            self.cache.trace(key, "M")
            call = Call(key, build, tags, o, declared, entry)
            if entry is not None:
                call.seen_fresh = entry.is_fresh(now) and entry.tags_current(declared, others)
                value = await self.refresh_stale(call, entry)
            else:
                self.cache.metrics.add("misses")
                value = await self.build_missing(call)
            report(self.cache.tags.scope, call.depends, call.stale)
            return value
        except Uncacheable as own:  # this caller's own build: followers got NotShared
            self.cache.metrics.add("uncached")
            return own.value

    async def build_alone(self, call: Call, unread: bool = False) -> Any:
        """Build for this caller only, reporting what it read (see Builder.build_alone)."""
        value = await self.run_build(call, None)
        report(self.cache.tags.scope, call.depends, call.stale or unread)
        return value

    async def refresh_stale(self, call: Call, entry: Entry) -> Any:
        """Let one caller rebuild; everyone else gets the stale value (after ``stale_wait``)."""
        flight, leader = self.sync.refreshes.join(call.key)
        if not leader:
            self.cache.metrics.add("coalesced")
            if not call.seen_fresh and await flight.await_for(call.options.stale_wait):
                answer = flight.outcome()
                if answer is not NO_VALUE:
                    call.depends, call.stale = flight.depends, flight.stale
                    return answer
            return self.sync.serve_stale(call, entry)
        value: Any = NO_VALUE
        try:
            value = await self.rebuild_stale(call, entry)
            return value
        finally:
            flight.depends, flight.stale = call.depends, call.stale
            flight.finish(NO_VALUE if call.stale else value)
            self.sync.refreshes.leave(call.key, flight)

    async def rebuild_stale(self, call: Call, entry: Entry) -> Any:
        """As the one caller here of a stale key: rebuild, hand over, or wait and serve stale."""
        lock = await _finished(self.sync.writer.try_stale_lock, (call,), self._let_go(call, None))
        if lock is None:
            return await self.fresh_or_stale(call, entry)
        if call.options.refresh == "background" and not inside_build():
            job = Call(call.key, _in_own_loop(call.build), call.tags, call.options, call.versions)
            job.seen, job.origin = call.seen, call.build  # a worker imports the builder itself
            await asyncio.to_thread(self.sync.rebuilds.hand_over, job, lock)
            return await self.fresh_or_stale(call, entry)
        self.cache.metrics.add("misses")
        return await self.build_and_store(call, lock, entry)

    async def fresh_or_stale(self, call: Call, entry: Entry) -> Any:
        """While another rebuilds: its new value if it comes within ``stale_wait``, else stale."""
        if not call.seen_fresh:
            for pause in pauses(call.options.stale_wait):
                await asyncio.sleep(pause)
                fresh = await asyncio.to_thread(self.sync.fresh_entry, call)
                if fresh is not None:
                    call.depends = fresh.tags
                    return fresh.value
        return self.sync.serve_stale(call, entry)

    async def build_missing(self, call: Call) -> Any:
        """Build a missing entry once per process and across processes (see Builder)."""
        flights = self.sync.flights
        flight, leader = flights.join(call.key)
        if not leader:
            self.cache.metrics.add("coalesced")
            if await flight.await_for(call.options.wait) and flight.answered():
                return await self.outcome_of(flight, call)
            self.cache.metrics.add("wait_timeouts")
            flight, leader = flights.take_over(call.key, flight)
            if not leader:
                if await flight.await_for(call.options.lock_timeout) and flight.answered():
                    return await self.outcome_of(flight, call)
                return await self.build_and_store(call, None, None)
            return await self.lead(flight, call, self.build_and_store(call, None, None))
        return await self.lead(flight, call, self.lead_missing(call))

    async def outcome_of(self, flight: Flight, call: Call) -> Any:
        """Return the leader's value; if it was the leader's alone, build our own."""
        try:
            value = flight.outcome()
        except NotShared:
            return await self.build_and_store(call, None, None)
        call.depends, call.stale = flight.depends, flight.stale
        return value

    async def lead(self, flight: Flight, call: Call, work: Awaitable[Any]) -> Any:
        """Await ``work`` as the flight's leader and publish its outcome."""
        try:
            value = await work
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
            self.sync.flights.leave(call.key, flight)

    async def lead_missing(self, call: Call) -> Any:
        """Build under the lock, or poll (bounded) for the process that holds it."""
        lock = await self.try_lock(call)
        if lock is not None:
            return await self.build_and_store(call, lock, None)
        self.cache.metrics.add("lock_waits")
        for pause in pauses(call.options.wait):
            await asyncio.sleep(pause)
            entry = await asyncio.to_thread(self.sync.reader.peek, call.key)
            if entry is not None:
                return self.sync.take_peeked(call, entry)
            lock = await self.try_lock(call)
            if lock is not None:
                return await self.build_and_store(call, lock, None)
        self.cache.metrics.add("wait_timeouts")
        return await self.build_and_store(call, None, None)

    async def try_lock(self, call: Call) -> Lock | None:
        """Try the lock in a worker thread; if we are cancelled meanwhile, release what it won.

        The thread goes on after a cancellation, so without this a lock won for a
        caller that is gone would stay held (and renewed) for as long as the process.
        """
        return await _finished(self.sync.writer.try_lock, (call,), self._let_go(call, None))

    async def take_lease(self, call: Call, lock: Lock | None) -> leases.Lease | None:
        """Take the lease in a worker thread; if cancelled meanwhile, give back what it took."""
        take = self.sync.writer.take_lease
        return await _finished(take, (call, lock), self._let_go(call, lock))

    def _let_go(self, call: Call, lock: Lock | None) -> Callable[[Any], None]:
        """Return what frees a lock or lease won for a caller that was cancelled meanwhile."""

        def let_go(won: Any) -> None:
            if isinstance(won, Lock):
                self.sync.writer.settle(call.key, None, won)
            else:
                self.sync.writer.settle(call.key, won, lock)

        return let_go

    async def run_build(self, call: Call, stale: Entry | None) -> Any:
        """Await the builder, collecting what it reads (see Builder.building)."""
        with self.sync.building(call, stale):
            return await call.build()

    async def build_and_store(self, call: Call, lock: Lock | None, stale: Entry | None) -> Any:
        """Await the build, store the entry over what the key held, release the lock.

        The release runs in a thread of its own, shielded: a cancellation that
        lands during it (anyio cancels again and again) must not leave the lock
        held, or renewed, for the life of the process.
        """
        lease: leases.Lease | None = None
        try:
            lease = await self.take_lease(call, lock)
            if lock is not None and lease is not None:
                fresh = await asyncio.to_thread(self.sync.built_meanwhile, call, lease.found)
                if fresh is not None:
                    call.depends = fresh.tags
                    return fresh.value
            try:
                value = await self.run_build(call, stale)
            except ServedStale as served:
                return served.value
            if lease is not None and await asyncio.to_thread(
                self.sync.writer.write, call, value, lease
            ):
                lease = None
            return value
        finally:
            if lease is not None or lock is not None:
                # Handed to a thread at once: a task could be cancelled before it started.
                settle = _hops().submit(self.sync.writer.settle, call.key, lease, lock)
                await asyncio.shield(asyncio.wrap_future(settle))


def _in_own_loop(build: AsyncBuild) -> Callable[[], Any]:
    """Return a blocking builder that runs the coroutine on a loop of its own.

    The refresher thread cannot count on the caller's loop: under WSGI (asgiref)
    that loop belongs to one request and is gone once the response is sent.
    """
    return lambda: asyncio.run(build())  # type: ignore[arg-type]


async def _finished(
    function: Callable[..., Any], args: tuple[Any, ...], let_go: Callable[[Any], None]
) -> Any:
    """Await ``function(*args)`` in a worker thread; if cancelled, ``let_go`` what it returns.

    The thread goes on after the caller is cancelled (and after ``asyncio.run``
    cancels what is left), so what it wins (a lock, a lease) is handed to
    ``let_go`` by the thread itself once it is done: no event loop is needed
    then, and none is left to forget it.
    """
    outcome = _hops().submit(contextvars.copy_context().run, function, *args)
    try:
        return await asyncio.shield(asyncio.wrap_future(outcome))
    except asyncio.CancelledError:

        def when_done(done: Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None and done.result() is not None:
                let_go(done.result())

        outcome.add_done_callback(when_done)
        raise


_executor: tuple[int, ThreadPoolExecutor] | None = None
_executor_lock = threading.Lock()


def _hops() -> ThreadPoolExecutor:
    """Return this process's pool for the store calls that win something (started on first use).

    Its futures are not tied to any event loop, so a cancellation can never
    drop what they won; the interpreter waits for its threads at exit.
    """
    global _executor, _executor_lock
    if _executor is not None and _executor[0] == os.getpid():
        return _executor[1]
    if _executor is not None:  # a forked child: the parent's lock may have been held at the fork
        _executor_lock = threading.Lock()
    with _executor_lock:
        if _executor is None or _executor[0] != os.getpid():  # a forked child has no threads
            _executor = (os.getpid(), ThreadPoolExecutor(32, "mcache-async"))
        return _executor[1]
