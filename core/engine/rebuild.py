"""A background rebuild: run here by a thread, or handed to a task queue's worker.

The caller that wins a stale key's lock hands a :class:`Rebuild` to the cache's
refresher. Called, it rebuilds in this process; :meth:`Rebuild.hand_off` sends
it instead, as data (:class:`mcache.model.jobs.Job`) with the lock, to a worker
that takes the lock over and runs :func:`run`. So one job per key is ever
queued, across every process (``docs/how-to/task-queue.md`` tells the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mcache.engine.call import BuildOptions, Call
from mcache.engine.lock import Lock
from mcache.engine.server_lease import lock_for_job
from mcache.errors import Uncacheable
from mcache.model.dependencies import report
from mcache.model.entry import Entry
from mcache.model.jobs import Job, address_of, plain_function, resolve
from mcache.sansio.steps import Pause, Shielded, Steps, perform, run_steps, settled

if TYPE_CHECKING:
    from mcache.engine.build import Builder

__all__ = ["Rebuild", "Rebuilds", "named", "register", "run"]


class Rebuild:
    """A stale entry's rebuild, with the lock its caller won."""

    def __init__(self, builder: Builder, call: Call, lock: Lock) -> None:
        self.builder = builder
        self.call = call
        self.lock = lock

    @property
    def name(self) -> str:
        """The builder's qualified name, for log lines."""
        function = self.call.origin or self.call.build
        while isinstance(function, functools.partial):
            function = function.func
        module = getattr(function, "__module__", "?")
        return f"{module}.{getattr(function, '__qualname__', repr(function))}"

    def __call__(self) -> None:
        """Rebuild in this process (the lock is still renewed here)."""
        self.builder.rebuilds.in_background(self.call, self.lock)

    def steps(self) -> Steps[None]:
        """The rebuild, as steps: what a refresher of a driver of its own runs."""
        return self.builder.rebuilds.in_background_steps(self.call, self.lock)

    def why_local(self) -> str | None:
        """Return why this rebuild cannot leave the process, or None if it can."""
        return self.job if isinstance(self.job, str) else None

    @functools.cached_property
    def job(self) -> Job | str:
        """The job as data, or the reason it must stay in this process."""
        call, parts = self.call, self.builder.parts
        reason = getattr(call.origin or call.build, "__mcache_local__", None)
        if reason:
            return str(reason)
        address = address_of(call.origin or call.build)
        if address is None:
            return (
                f"{self.name} is rebuilt in this process: a queue worker can only import a"
                " module-level function, a functools.partial of one, or a @cache.cached function"
            )
        if parts.locator is None:
            return "the cache has no name a worker could find it by: give it Cache(name=…)"
        try:
            arguments = parts.codec.dumps([list(address.args), address.kwargs], call.key)
        except Exception as error:
            return f"{self.name}'s arguments cannot be encoded by the cache's codec: {error!r}"
        seen = call.seen.fresh_until_ms if call.seen is not None else 0
        return Job(
            parts.locator,
            address.path,
            Job.encode_arguments(arguments),
            call.key,
            list(call.tags),
            {name: getattr(call.options, name) for name in call.options.__dataclass_fields__},
            self.lock.key,
            self.lock.token.decode(),
            seen,
            call.newest_version(),
        )

    def hand_off(self, seconds: float) -> str | None:
        """Give the lock ``seconds`` to be taken up elsewhere; return the job's JSON, or None
        when the job cannot leave (:meth:`why_local`: nothing changed) or the lock is no
        longer this process's: lost, or let go because the store failed the hand-off."""
        return run_steps(self.hand_off_steps(seconds), perform)

    def hand_off_steps(self, seconds: float) -> Steps[str | None]:
        """:meth:`hand_off`, as steps (see :mod:`mcache.sansio.steps`).

        A store failure leaves the lock in doubt (the extension may have landed, its reply
        lost): it is let go, so that the next reader rebuilds. Taken back and renewed
        here instead, with None telling the refresher that another rebuilds, nobody
        would have, and the stale entry would have been served for as long as the
        process lived.
        """
        job = self.job
        if isinstance(job, str):
            return None
        yield from self.builder.parts.renewer.drop_steps(self.lock)
        try:
            if (yield from self.lock.extend_steps(max(1, int(seconds)))):
                return job.to_json()
        except Exception as error:
            self.builder.parts.store_failed("lock", error)
            yield from self.give_up_steps()
        return None

    def take_back(self) -> bool:
        """After a failed send: renew the lock here again; return whether it is still ours."""
        return run_steps(self.take_back_steps(), perform)

    def take_back_steps(self) -> Steps[bool]:
        """:meth:`take_back`, as steps."""
        try:
            ours = yield from self.lock.extend_steps()
        except Exception as error:
            self.builder.parts.store_failed("lock", error)
            ours = False
        if ours:
            parts = self.builder.parts
            parts.renewer.hold(self.lock, parts.failures)
        return ours

    def give_up(self) -> None:
        """Free the lock: nobody rebuilds now; a later caller will try again."""
        run_steps(self.give_up_steps(), perform)

    def give_up_steps(self) -> Steps[None]:
        """:meth:`give_up`, as steps."""
        yield from self.builder.writer.unlock_steps(self.call.key, self.lock)


class Rebuilds:
    """Rebuilds off the read path: handed to the refresher, forced now, queued, run by a worker."""

    def __init__(self, builder: Builder) -> None:
        self.builder = builder
        self.parts = builder.parts

    def hand_over(self, call: Call, lock: Lock) -> bool:
        """Give the rebuild to the refresher; if it refuses or fails, free the lock."""
        job = dataclasses.replace(call, background=True)  # the caller goes on with its own
        try:
            accepted = self.parts.refresher(Rebuild(self.builder, job, lock))
        except Exception as error:  # e.g. a task queue whose broker is down
            self.parts.failures.warning("refresh.submit", "background refresh refused: %r", error)
            accepted = False
        if not accepted:
            self.builder.writer.unlock(call.key, lock)
        return bool(accepted)

    def enqueue(self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions) -> str:
        """Hand a rebuild of ``key`` to the refresher now, whatever its state (warm-up); return
        ``"queued"``, ``"busy"`` (its lock is held) or ``"refused"`` (by the refresher)."""
        return run_steps(self.enqueue_steps(key, build, tags, o), perform)

    def enqueue_steps(
        self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions
    ) -> Steps[str]:
        """:meth:`enqueue`, as steps."""
        seen = yield from self.builder.reader.peek_steps(key)
        call = Call(key, build, tags, o, {}, seen)
        lock = yield from self.try_lock_steps(call)
        if lock is None:
            return "busy"
        return "queued" if self.hand_over(call, lock) else "refused"

    def force(self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions) -> Any:
        """Rebuild ``key`` now whatever its state (a forced refresh); return the new value.

        It waits up to ``wait`` for the key's lock (a rebuild under way), then reads its
        tags' versions again and builds, with the lock or without; the entry is written
        against its lease.
        """
        return run_steps(self.force_steps(key, build, tags, o), perform)

    def force_steps(
        self, key: str, build: Callable[[], Any], tags: list[str], o: BuildOptions
    ) -> Steps[Any]:
        """:meth:`force`, as steps: its waits for the lock are pauses a driver schedules."""
        call = Call(key, build, tags, o, {}, (yield from self.builder.reader.peek_steps(key)))
        # where the server leases rebuilds, the refresh bids for the lease as a reader does:
        # the key's lock would exclude nobody who holds it
        call.claim = self.builder.writer.bidding.forcing_bid(o)
        yield from self.builder.read_versions_steps(call)
        lock = yield from self.try_lock_steps(call)
        for pause in self.parts.pauses(o.wait) if lock is None else ():
            yield Pause(pause)
            lock = yield from self.try_lock_steps(call)
            if lock is not None:
                break
        self.parts.counts.add("misses", key=call.key)
        if lock is None:  # the wait over: built without the lock, on the tags read again
            value = yield from self.builder.build_after_wait_steps(call)
        else:  # its winner reads them again as it looks for a build made meanwhile
            value = yield from self.builder.building.build_and_store_steps(call, lock, None)
        report(self.parts.tags.scope, call.depends, call.stale)
        return value

    def try_lock_steps(self, call: Call) -> Steps[Lock | None]:
        """Try the key's lock, shielded: a caller cancelled meanwhile (an async task) lets
        go of what it won, as a read's lock attempt does."""
        attempt = self.builder.writer.try_lock_steps(call)
        lock: Lock | None = yield Shielded(attempt, self.builder.building.let_go(call, None))
        return lock

    def run_job(self, job: Job, build: Callable[[], Any]) -> str:
        """Rebuild what a queue worker was handed (see :func:`mcache.engine.rebuild.run`)."""
        return run_steps(self.run_job_steps(job, build), perform)

    def run_job_steps(self, job: Job, build: Callable[[], Any]) -> Steps[str]:
        """:meth:`run_job`, as steps: a simulated worker runs them beside the callers."""
        options = BuildOptions(**job.options)
        parts = self.parts
        seen = Entry(None, job.seen) if job.seen else None
        call = Call(job.key, build, job.tags, options, {}, seen, background=True)
        call.newest = job.newest
        life = self.builder.writer.life_left(call, seen)  # what a rebuild storing nothing leaves
        lock = lock_for_job(
            parts.shared, job.lock, options.lock_timeout, job.token, parts.clock, life
        )
        mine = parts.random.token(16).encode()
        try:  # the enqueuer's lock, unless it expired while the job waited and is gone
            if not (
                (yield from lock.take_over_steps(mine)) or (yield from lock.try_acquire_steps())
            ):
                return "taken"
        except Exception as error:
            self.parts.store_failed("lock", error)
            return "taken"
        parts.renewer.hold(lock, parts.failures)
        stale = yield from self.builder.reader.peek_steps(job.key)
        try:
            yield from self.builder.building.build_and_store_steps(call, lock, stale)
        except Uncacheable:
            return "uncacheable"
        return "built" if call.built else "failed" if call.failed else "fresh"

    def in_background(self, call: Call, lock: Lock) -> None:
        """Rebuild on the refresher; a value the builder marked Uncacheable is dropped."""
        run_steps(self.in_background_steps(call, lock), perform)
        self.parts.counts.flush_if_due()  # a process whose reads are all hits counts these

    def in_background_steps(self, call: Call, lock: Lock) -> Steps[None]:
        """:meth:`in_background`, as steps."""
        with contextlib.suppress(Uncacheable):
            yield from self.builder.building.build_and_store_steps(call, lock, None)


class BuildsHere(Protocol):
    """What a worker needs of the cache a job names: the builder that rebuilds its entries
    (a :class:`mcache.Cache` has one)."""

    @property
    def builder(self) -> Builder: ...


_NAMED: weakref.WeakValueDictionary[str, BuildsHere] = weakref.WeakValueDictionary()


def register(name: str, cache: BuildsHere) -> str:
    """Make ``cache`` findable by ``name`` in this process; return its locator."""
    _NAMED[name] = cache
    return f"mcache.engine.rebuild:named:{name}"


def named(name: str) -> BuildsHere:
    """Return the cache registered as ``name`` (the worker must have created it)."""
    try:
        return _NAMED[name]
    except KeyError:
        raise LookupError(
            f"no Cache(name={name!r}) in this worker: import the module that creates it"
            " (the builder's module usually does)"
        ) from None


def find_cache(locator: str) -> BuildsHere:
    """Return the cache a locator names: ``"module:function:argument"`` called."""
    module, _, rest = locator.partition(":")
    function, _, argument = rest.partition(":")
    return resolve(f"{module}:{function}")(argument)  # type: ignore[no-any-return]


def run(payload: str) -> str:
    """Rebuild the entry a job describes; what a queue worker calls.

    Returns what happened: ``"built"``, ``"fresh"`` (rebuilt meanwhile: the
    control check skipped it), ``"taken"`` (someone else holds the key's lock
    now, or another copy of the job took it), ``"uncacheable"`` (the builder said
    so: nothing stored, the stale entry keeps only its own life) or ``"failed"``
    (the builder raised: the stale entry stays, and the lock is kept for a
    back-off before anyone retries).
    """
    job = Job.from_json(payload)
    function = plain_function(resolve(job.builder))  # imports its module: it may create the cache
    rebuilds = find_cache(job.cache).builder.rebuilds
    args, kwargs = rebuilds.parts.codec.loads(job.arguments(), job.key)  # type: ignore[misc]
    build: Any = functools.partial(function, *args, **kwargs)
    if inspect.iscoroutinefunction(function):
        coroutine = build
        build = functools.partial(_run_coroutine, coroutine)
    try:
        return rebuilds.run_job(job, build)
    finally:
        rebuilds.parts.counts.flush()  # a worker's builds and failures show in stats at once


def _run_coroutine(coroutine: Any) -> Any:
    return asyncio.run(coroutine())


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
