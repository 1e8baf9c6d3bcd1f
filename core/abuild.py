"""``aget_or_build``: the read path of :mod:`mcache.build` for coroutine builders.

The algorithm is the same; what differs is where the waiting happens. Store
calls are blocking, so each runs briefly in a worker thread
(``asyncio.to_thread``) and returns; the builder is awaited on the caller's
event loop; waits for another caller's build are ``asyncio.sleep`` polls or
awaits on the in-process flight. No thread ever blocks waiting for the event
loop, so nested cached coroutines cannot exhaust the thread pool and deadlock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .build import BuildOptions, Call
from .entry import Entry
from .errors import Uncacheable
from .flight import NotShared
from .lock import Lock, backoff_delays

if TYPE_CHECKING:
    from .build import Builder

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
        try:
            if not self.cache.may_store():  # here, not in a worker: it asks about this thread
                return await build()
            try:
                entry, versions = await asyncio.to_thread(self.sync.read, key, tags)
            except Exception as error:
                self.cache.store_failed("get_or_build", error)
                self.cache.metrics.add("misses")
                return await build()
            now = self.cache.clock.time_ms()
            if self.sync.is_hit(key, entry, versions, now, o):
                return entry.value  # type: ignore[union-attr]
            self.cache.trace(key, "M")
            call = Call(key, build, tags, o, versions, entry)
            if entry is not None:
                return await self.refresh_stale(call, entry)
            self.cache.metrics.add("misses")
            return await self.build_missing(call)
        except Uncacheable as own:  # this caller's own build: followers got NotShared
            self.cache.metrics.add("uncached")
            return own.value

    async def refresh_stale(self, call: Call, entry: Entry) -> Any:
        """Let one caller rebuild; everyone else gets the stale value at once."""
        flight = self.sync.refreshes.claim(call.key)
        if flight is None:
            self.cache.metrics.add("coalesced")
            return self.sync.serve_stale(call.key, entry)
        try:
            lock = await self.try_lock(call)
            if lock is None:
                return self.sync.serve_stale(call.key, entry)
            if call.options.refresh == "background":
                sync_call = Call(
                    call.key,
                    _in_own_loop(call.build),
                    call.tags,
                    call.options,
                    call.versions,
                    call.seen,
                )
                await asyncio.to_thread(self.sync.hand_over, sync_call, lock)
                return self.sync.serve_stale(call.key, entry)
            self.cache.metrics.add("misses")
            return await self.build_and_store(call, lock, entry)
        finally:
            flight.finish()
            self.sync.refreshes.leave(call.key, flight)

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

    async def outcome_of(self, flight: Any, call: Call) -> Any:
        """Return the leader's value; if it was the leader's alone, build our own."""
        try:
            return flight.outcome()
        except NotShared:
            return await self.build_and_store(call, None, None)

    async def lead(self, flight: Any, call: Call, work: Awaitable[Any]) -> Any:
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
        deadline = time.monotonic() + call.options.wait
        for delay in backoff_delays(cap=0.05):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(delay, remaining))
            entry = await asyncio.to_thread(self.sync.peek, call.key)
            if entry is not None:
                self.cache.trace(call.key, "H")
                return entry.value
            lock = await self.try_lock(call)
            if lock is not None:
                return await self.build_and_store(call, lock, None)
        self.cache.metrics.add("wait_timeouts")
        return await self.build_and_store(call, None, None)

    async def try_lock(self, call: Call) -> Lock | None:
        """Try the lock in a worker thread; if we are cancelled meanwhile, release what it won.

        The thread goes on after a cancellation, so without this a lock won for a
        caller that is gone would stay held until ``lock_timeout``.
        """
        attempt = asyncio.ensure_future(asyncio.to_thread(self.sync.try_lock, call))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            loop = asyncio.get_running_loop()

            def release(done: asyncio.Future[Lock | None]) -> None:
                if not done.cancelled() and done.exception() is None and done.result() is not None:
                    loop.run_in_executor(None, self.sync.unlock, call.key, done.result())

            attempt.add_done_callback(release)
            raise

    async def build_and_store(self, call: Call, lock: Lock | None, stale: Entry | None) -> Any:
        """Await the build, store the entry, release the lock (see Builder.build_and_store)."""
        try:
            if lock is not None:
                fresh = await asyncio.to_thread(self.sync.built_meanwhile, call)
                if fresh is not None:
                    return fresh.value
            started = time.monotonic()
            try:
                value = await call.build()
            except Uncacheable:
                raise  # not a failure: the builder's value is for its caller alone
            except Exception as error:
                if stale is None:
                    self.sync.build_failed(call.key, error, None)
                    raise
                return self.sync.build_failed(call.key, error, stale)
            build_ms = int((time.monotonic() - started) * 1000)
            self.cache.metrics.add("builds")
            await asyncio.to_thread(
                self.sync.write, call.key, value, build_ms, call.versions, call.options
            )
            return value
        finally:
            if lock is not None:
                await asyncio.to_thread(self.sync.unlock, call.key, lock)


def _in_own_loop(build: AsyncBuild) -> Callable[[], Any]:
    """Return a blocking builder that runs the coroutine on a loop of its own.

    The refresher thread cannot count on the caller's loop: under WSGI (asgiref)
    that loop belongs to one request and is gone once the response is sent.
    """
    return lambda: asyncio.run(build())  # type: ignore[arg-type]
