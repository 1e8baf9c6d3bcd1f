"""A background rebuild: run here by a thread, or handed to a task queue's worker.

The caller that wins a stale key's lock hands a :class:`Rebuild` to the
cache's refresher. Called, it rebuilds in this process. A queue refresher
calls :meth:`Rebuild.hand_off` instead: the lock stops being renewed here and
is held long enough for a worker to take it up, and the job goes as data
(:class:`mcache.jobs.Job`). The worker (:func:`run`) takes the lock over with
its token, renews it while it builds, checks first whether the entry is
fresh already (seed 001's control check), and releases it. So one job per
key is ever queued, across every process: nobody else wins the lock meanwhile.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import weakref
from typing import TYPE_CHECKING, Any

from .call import Call
from .jobs import Job, address_of, plain_function, resolve
from .lock import Lock
from .renewal import renewer

if TYPE_CHECKING:
    from .build import Builder
    from .cache import Cache

__all__ = ["Rebuild", "named", "register", "run"]


class Rebuild:
    """A stale entry's rebuild, with the lock its caller won."""

    def __init__(self, builder: Builder, call: Call, lock: Lock) -> None:
        self.builder = builder
        self.call = call
        self.lock = lock
        self._job: Job | str | None = None

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
        self.builder.build_in_background(self.call, self.lock)

    def why_local(self) -> str | None:
        """Return why this rebuild cannot leave the process, or None if it can."""
        job = self.job()
        return job if isinstance(job, str) else None

    def job(self) -> Job | str:
        """Return the job as data, or the reason it must stay in this process."""
        if self._job is None:
            self._job = self._describe()
        return self._job

    def _describe(self) -> Job | str:
        call, cache = self.call, self.builder.cache
        reason = getattr(call.origin or call.build, "__mcache_local__", None)
        if reason:
            return str(reason)
        address = address_of(call.origin or call.build)
        if address is None:
            return (
                f"{self.name} is rebuilt in this process: a queue worker can only import a"
                " module-level function, a functools.partial of one, or a @cache.cached function"
            )
        if cache.locator is None:
            return "the cache has no name a worker could find it by: give it Cache(name=…)"
        try:
            arguments = cache.codec.dumps([list(address.args), address.kwargs], call.key)
        except Exception as error:
            return f"{self.name}'s arguments cannot be encoded by the cache's codec: {error!r}"
        seen = call.seen.fresh_until_ms if call.seen is not None else 0
        return Job(
            cache.locator,
            address.path,
            Job.encode_arguments(arguments),
            call.key,
            list(call.tags),
            {name: getattr(call.options, name) for name in call.options.__dataclass_fields__},
            self.lock.key,
            self.lock.token.decode(),
            seen,
        )

    def hand_off(self, seconds: float) -> str | None:
        """Give the lock ``seconds`` to be taken up elsewhere; return the job's JSON.

        None when the job cannot leave (see :meth:`why_local`) or the lock is no
        longer ours: nothing was changed then.
        """
        job = self.job()
        if isinstance(job, str):
            return None
        renewer.drop(self.lock)
        try:
            if self.lock.extend(max(1, int(seconds))):
                return job.to_json()
        except Exception as error:
            self.builder.cache.store_failed("lock", error)
        self.take_back()
        return None

    def take_back(self) -> bool:
        """After a failed send: renew the lock here again; return whether it is still ours."""
        try:
            ours = self.lock.extend()
        except Exception as error:
            self.builder.cache.store_failed("lock", error)
            ours = False
        if ours:
            renewer.hold(self.lock, self.builder.cache.failures)
        return ours

    def give_up(self) -> None:
        """Free the lock: nobody rebuilds now; a later caller will try again."""
        self.builder.writer.unlock(self.call.key, self.lock)


_NAMED: weakref.WeakValueDictionary[str, Cache] = weakref.WeakValueDictionary()


def register(name: str, cache: Cache) -> str:
    """Make ``cache`` findable by ``name`` in this process; return its locator."""
    _NAMED[name] = cache
    return f"mcache.rebuild:named:{name}"


def named(name: str) -> Cache:
    """Return the cache registered as ``name`` (the worker must have created it)."""
    try:
        return _NAMED[name]
    except KeyError:
        raise LookupError(
            f"no Cache(name={name!r}) in this worker: import the module that creates it"
            " (the builder's module usually does)"
        ) from None


def find_cache(locator: str) -> Cache:
    """Return the cache a locator names: ``"module:function:argument"`` called."""
    module, _, rest = locator.partition(":")
    function, _, argument = rest.partition(":")
    return resolve(f"{module}:{function}")(argument)  # type: ignore[no-any-return]


def run(payload: str) -> str:
    """Rebuild the entry a job describes; what a queue worker calls.

    Returns what happened: ``"built"``, ``"fresh"`` (rebuilt meanwhile: the
    control check skipped it), ``"taken"`` (someone else holds the key's lock
    now) or ``"failed"`` (the builder raised: the stale entry stays, and the
    lock is kept for a back-off before anyone retries).
    """
    job = Job.from_json(payload)
    function = plain_function(resolve(job.builder))  # imports its module: it may create the cache
    cache = find_cache(job.cache)
    args, kwargs = cache.codec.loads(job.arguments(), job.key)  # type: ignore[misc]
    build: Any = functools.partial(function, *args, **kwargs)
    if inspect.iscoroutinefunction(function):
        coroutine = build
        build = functools.partial(_run_coroutine, coroutine)
    try:
        return cache.builder.run_job(job, build)
    finally:
        cache.metrics.flush()  # a worker's builds and failures show in mcache_stats at once


def _run_coroutine(coroutine: Any) -> Any:
    return asyncio.run(coroutine())
