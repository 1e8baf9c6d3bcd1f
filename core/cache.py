"""The ``Cache`` facade: what applications and the framework adapters call.

It owns the policies nothing else should repeat: keys go through :func:`mcache.make_key`
under the namespace, values through the :class:`~mcache.model.codec.Codec`, and a cache
failure never fails the caller (see docs/explanation/reliability.md). The algorithms live
in :mod:`mcache.engine.build`, :mod:`mcache.model.tags` and :mod:`mcache.engine.lock`.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from mcache.clock import Clock, system_clock
from mcache.contract.refresher import Refresher
from mcache.contract.store import NO_VALUE, Store, missing_operations
from mcache.engine.build import Builder, BuildOptions
from mcache.engine.lock import Lock
from mcache.engine.options import (
    CallOptions,
    Jitter,
    TagsArg,
    build_options,
    call_option_names,
    check_settings,
    counted_name,
    duration,
    seconds,
    tag_list,
)
from mcache.engine.parts import CacheParts
from mcache.engine.reading import Reader
from mcache.engine.rebuild import register
from mcache.errors import ConfigError, InvalidKey
from mcache.features.counters import Counter, ViewCounter
from mcache.features.memoize import Memoized, memoize
from mcache.features.raw_keys import RawKeys
from mcache.features.visitors import OnlineCounter, VisitorCounter
from mcache.logs import FailureLog
from mcache.memo import BoundedMemo
from mcache.model.codec import Codec
from mcache.model.keys import make_key
from mcache.model.near import Coherence, Invalidations, NearCache
from mcache.model.signing import warn_if_unsigned
from mcache.model.tags import Tags
from mcache.observe.events import Observer, observers_named
from mcache.observe.stats import COUNTERS, SESSIONS, CacheStats
from mcache.observe.trace import Tracer
from mcache.plain_operations import Key, PlainOperations
from mcache.purge.urls import purger_from
from mcache.randomness import RandomSource
from mcache.refreshers.named import refresher_named
from mcache.refreshers.thread import ThreadPoolRefresher
from mcache.sansio.steps import Steps
from mcache.stores.url import from_url

__all__ = ["Cache", "Key"]

T = TypeVar("T")
_KEYS_REMEMBERED = 4096  # string keys whose store keys a cache keeps
_ALWAYS: Callable[[], bool] = itertools.repeat(True).__next__  # a C call: asked on every read


class Cache(PlainOperations):
    """A namespace of cached values on one store.

    The plain operations (``get``, ``set``, ``invalidate``, … and their awaitable
    ``aget``, ``aset``, …) come from :class:`~mcache.plain_operations.PlainOperations`.
    """

    def __init__(
        self,
        store: str | Store = "memory://",
        *,
        namespace: str = "",
        default_ttl: int = 300,
        stale_ttl: int | None = None,
        lock_timeout: int = 5,
        wait: float = 3.0,
        stale_wait: float = 0.0,
        refresh: str = "sync",
        early_refresh: float | bool = 0.0,
        jitter: Jitter = 0.1,
        codec: Codec | None = None,
        clock: Clock = system_clock,
        tag_cache_ttl: float = 0.0,
        refresher: Refresher | str | None = None,
        refresh_queue: str | None = None,
        refresh_fallback: str = "thread",
        name: str | None = None,
        trace_dir: str | None = None,
        stats_interval: float = 5.0,
        failure_log: FailureLog | None = None,
        may_store: Callable[[], bool] | None = None,
        near_ttl: float | None = None,
        near_size: int = 10_000,
        metrics: Iterable[str | Observer] = (),
        replication_lag: float = 0.0,
        purge: Any = None,
        counted_as: str = "",
    ) -> None:
        """Every option is in docs/reference/settings.md; a bad one raises ``ConfigError`` here.

        ``near_ttl``: keep hot entries in this process too (see :mod:`mcache.model.near`).
        ``jitter``: spread entries' fresh times so entries built together are not rebuilt
        together (see docs/explanation/dog-pile.md). ``replication_lag``: seconds a replica
        may be behind, within which a rebuild reads the primary (:func:`mcache.read_primary`).
        ``metrics``: ``"prometheus"``, ``"opentelemetry"`` or any
        :class:`mcache.observe.events.Observer`, told this cache's events as they happen.
        ``purge``: the caches in front (Varnish, Fastly, Cloudflare) whose pages
        ``invalidate`` purges by the same tags: a URL, a list of them, or a
        :class:`mcache.purge.sender.Purger` (see :mod:`mcache.purge.urls`).
        ``counted_as``: count this cache's reads apart under that name (the session
        stores' caches count as ``"sessions"``): out of the namespace's hit ratio, on a
        line of their own in ``stats()``.
        """
        self.store: Store = from_url(store) if isinstance(store, str) else store
        if not isinstance(self.store, Store):
            missing = missing_operations(self.store)
            lacking = f" (it lacks {', '.join(missing)})" if len(missing) < 5 else ""
            raise ConfigError(
                f"store must be a URL such as 'memory://' or a Store, got"
                f" {type(store).__name__}{lacking}: see docs/reference/stores.md"
            )
        try:
            make_key(namespace, "probe")  # now, not on the first request
        except InvalidKey as error:
            raise ConfigError(f"namespace: {error}") from None
        check_settings(stats_interval, trace_dir, clock)
        self.purger = purger_from(purge, "purge")
        self.namespace = namespace
        self.default_ttl = ttl = seconds(default_ttl, "default_ttl")
        self.defaults = build_options(
            ttl, stale_ttl, lock_timeout, wait, refresh, early_refresh, jitter, stale_wait
        )
        # stale_ttl None: a call's stale_ttl follows the call's own ttl
        self._options = CallOptions(self.defaults, stale_ttl)
        self.codec = codec or Codec()
        warn_if_unsigned(self.store, self.codec)
        self.failures = failure_log or FailureLog()
        self.shared: Store = self.store.shared if self.store.traits.tiered else self.store  # type: ignore[attr-defined]
        near = None if near_ttl is None else NearCache(near_ttl, near_size, self.codec.serializer)
        invalidations, tag_ttl = Invalidations(), duration(tag_cache_ttl, "tag_cache_ttl")
        tag_ttl = tag_ttl if near is None else max(tag_ttl, near.ttl)
        draws = RandomSource()
        self.tags = Tags(self.shared, namespace, clock, tag_ttl, invalidations, draws)
        coherence = Coherence(invalidations, near, self.tags)
        self.counts = CacheStats(
            self.shared,
            namespace,
            stats_interval,
            self.failures,
            name,
            counted_name(counted_as),
            clock,
        )
        for observer in observers_named(metrics):
            self.observe(observer)
        try:
            self.tracer = Tracer(trace_dir, clock)
        except OSError as error:
            raise ConfigError(f"trace_dir {trace_dir!r} cannot be created: {error}") from None
        if isinstance(refresher, str):
            refresher = refresher_named(refresher, refresh_queue, refresh_fallback)
        self.parts = CacheParts(
            self.store,
            self.shared,
            namespace,
            self.codec,
            clock,
            self.tags,
            self.counts,
            self.tracer,
            self.failures,
            refresher or ThreadPoolRefresher(),
            may_store or _ALWAYS,
            coherence,
            int(duration(replication_lag, "replication_lag") * 1000),
            random=draws,
        )
        if near is not None and self.shared is self.store:
            coherence.follow_store(self.store, namespace)
        if name is not None:
            self.locator = register(name, self)
        self._keys: BoundedMemo[str, str] = BoundedMemo(_KEYS_REMEMBERED)
        self._view_counters: dict[str, ViewCounter] = {}
        self._registry_lock = threading.Lock()
        self.reader = Reader(self.parts)
        self.builder = Builder(self.parts, self.reader)

    # What may change after start-up (an adapter's policies, a test's clock) lives in
    # the parts the algorithm reads.

    @property
    def clock(self) -> Clock:
        """The clock entries' times are read on (a ``FakeClock`` in tests)."""
        return self.parts.clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self.parts.clock = self.tags.clock = self.counts.clock = self.tracer.clock = clock

    @property
    def random(self) -> RandomSource:
        """Where the cache's jitter, pauses, tokens and tag versions' low bits are drawn from
        (a seeded ``RandomSource`` replays a simulation's run)."""
        return self.parts.random

    @random.setter
    def random(self, draws: RandomSource) -> None:
        self.parts.random = self.tags.draws = draws

    @property
    def refresher(self) -> Refresher:
        """Where ``refresh="background"`` rebuilds run (see :mod:`mcache.refreshers`)."""
        return self.parts.refresher

    @refresher.setter
    def refresher(self, refresher: Refresher) -> None:
        self.parts.refresher = refresher

    @property
    def locator(self) -> str | None:
        """How a queue worker finds this cache again: set by ``name`` or by an adapter."""
        return self.parts.locator

    @locator.setter
    def locator(self, locator: str | None) -> None:
        self.parts.locator = locator

    @property
    def may_store(self) -> Callable[[], bool]:
        """Asked before ``get_or_build`` stores what it built; a framework says no while
        the caller's database transaction holds uncommitted writes (see django_mcache)."""
        return self.parts.may_store

    @may_store.setter
    def may_store(self, may_store: Callable[[], bool]) -> None:
        self.parts.may_store = may_store

    def __repr__(self) -> str:
        return f"Cache({self.store!r}, namespace={self.namespace!r})"

    @property
    def single_flight(self) -> str:
        """How ``get_or_build`` elects the one caller that builds, on this store now: ``"lease"``
        (memcached's meta protocol, which a pool is asked about once) or ``"lock"`` (an ``add``)."""
        return "lease" if self.builder.writer.bidding.leases_now() else "lock"

    @property
    def raw(self) -> RawKeys:
        """Keys exactly as given and values as bare bytes, for data another program shares
        (see :mod:`mcache.features.raw_keys`): no namespace, no codec, no tags."""
        return RawKeys(self.parts)

    def key(self, *parts: object, **named: object) -> str:
        """Return the store key for these parameters under this cache's namespace."""
        return make_key(self.namespace, *parts, **named)

    # -- dog-pile-safe building, tags, locks ----------------------------------------------------

    def get_or_build(
        self,
        key: Key,
        build: Callable[[], T],
        *,
        ttl: float | None = None,
        stale_ttl: float | None = None,
        tags: TagsArg = None,
        wait: float | None = None,
        lock_timeout: int | None = None,
        refresh: str | None = None,
        early_refresh: float | bool | None = None,
        stale_wait: float | None = None,
    ) -> T:
        """Return the cached value of ``key``, built by ``build()`` at most once across callers.

        Fresh entries are returned as they are. A stale entry is rebuilt by one
        caller while every other caller gets the stale value at once (or waits
        up to ``stale_wait`` seconds for the new one); a missing one is built by
        one caller while the others wait up to ``wait`` seconds. Bumping any of
        ``tags`` (``invalidate``), or of the tags of any cached value read while
        building, makes the entry stale.
        """
        options = self._options.resolve(
            ttl, stale_ttl, wait, lock_timeout, refresh, early_refresh, stale_wait
        )
        store_key = self._store_key(key)
        parts = self.parts
        looked = parts.near is not None and not self.counts.call_watchers and parts.may_store()
        if looked:
            value = self.builder.near_value(store_key, tags, options)
            if value is not NO_VALUE:  # a near hit: no generator, no round trip
                self.counts.flush_if_due()
                return value  # type: ignore[no-any-return]
        names = tag_list(tags)
        steps = self.builder.get_or_build_steps(store_key, build, names, options, looked)
        return self._run("get_or_build", key, steps, names)

    async def aget_or_build(
        self,
        key: Key,
        build: Callable[[], Awaitable[T]],
        *,
        ttl: float | None = None,
        stale_ttl: float | None = None,
        tags: TagsArg = None,
        wait: float | None = None,
        lock_timeout: int | None = None,
        refresh: str | None = None,
        early_refresh: float | bool | None = None,
        stale_wait: float | None = None,
    ) -> T:
        """Await ``get_or_build`` with a coroutine builder: the same algorithm, driven by awaits,
        so nested cached coroutines never starve a thread pool (see docs/how-to/async.md)."""
        options = self._options.resolve(
            ttl, stale_ttl, wait, lock_timeout, refresh, early_refresh, stale_wait
        )
        store_key = self._store_key(key)
        parts = self.parts
        looked = parts.near is not None and not self.counts.call_watchers and parts.may_store()
        if looked:
            value = self.builder.near_value(store_key, tags, options)
            if value is not NO_VALUE:  # a near hit awaits nothing, unless a flush is due
                await self.counts.aflush_if_due()
                return value  # type: ignore[no-any-return]
        names = tag_list(tags)
        steps = self.builder.get_or_build_steps(store_key, build, names, options, looked)
        return await self._arun("aget_or_build", key, steps, names)

    def get_or_build_steps(
        self, key: Key, build: Callable[[], Any], options: BuildOptions, tags: TagsArg = None
    ) -> Steps[Any]:
        """``get_or_build`` as steps (see :mod:`mcache.sansio.steps`), with ``options`` from
        :meth:`call_options`: for an adapter that offers one operation to both drivers."""
        return self.builder.get_or_build_steps(self._store_key(key), build, tag_list(tags), options)

    def cached(
        self,
        ttl: float | None = None,
        *,
        tags: TagsArg | Callable[..., TagsArg] = None,
        key_prefix: str | None = None,
        **options: Any,
    ) -> Callable[[Callable[..., T]], Memoized]:
        """Decorate a function (or coroutine function) to cache its results by argument.

        The key is the function's qualified name plus its bound arguments (so
        ``f(1)`` and ``f(x=1)`` share an entry); ``tags`` may be a callable of the
        same arguments. The wrapper has ``.invalidate(*args, **kwargs)`` and
        ``.uncached``.
        """
        return memoize(self, ttl, tags, key_prefix, options)

    def refresh(self, target: Key | Memoized, *args: Any, **kwargs: Any) -> Any:
        """Rebuild now, out of turn, whatever the entry's state; return the new value.

        ``cache.refresh(cached_function, *args, **kwargs)`` for a ``@cache.cached``
        function (or its ``.refresh(*args)``), ``cache.refresh(key, build, ttl=…,
        tags=…)`` for a ``get_or_build`` entry. One caller at a time holds the
        key's lock, as for any rebuild; the entry is written against its lease.
        """
        if isinstance(target, Memoized):
            return target.refresh(*args, **kwargs)
        if len(args) != 1 or not callable(args[0]):
            raise TypeError("refresh(key, build, **options) takes the key's builder")
        tags = tag_list(kwargs.pop("tags", None))
        return self.builder.rebuilds.force(
            self._store_key(target), args[0], tags, self.call_options(**kwargs)
        )

    def call_options(self, **options: Any) -> BuildOptions:
        """Return a call's ``get_or_build`` options (``ttl``, ``wait``, …), checked."""
        return self._options.resolve(**call_option_names(options))

    def lock(self, name: str, timeout: int | None = None, wait: float = 0.0) -> Lock:
        """Return the distributed lock ``name``; use ``with cache.lock("x", wait=5): …``.

        Held in a ``with`` block, it is renewed until the block ends, however long
        that takes; a process that dies in the block frees it within ``timeout``.
        """
        key = make_key(self.namespace, "lock", name)
        parts = self.parts
        return parts.new_lock(key, timeout or self.defaults.lock_timeout, wait, parts.renewer)

    # -- counters, built on the cache's parts: its store, namespace and fail-open policy --

    def counter(self, name: str, ttl: int = 0) -> Counter:
        """Return the atomic counter ``name``."""
        return Counter(self.parts, name, ttl)

    def view_counter(
        self, name: str, initial: Callable[[Any], int] | None = None, ttl: int = 0
    ) -> ViewCounter:
        """Return view counts per object, seeded by ``initial(ident)`` from the database.

        One instance per name and cache, so whatever asked for it, ``flush`` (and the
        process's exit) records everything it counted.
        """
        with self._registry_lock:
            counter = self._view_counters.get(name)
            if counter is None:
                counter = self._view_counters[name] = ViewCounter(self.parts, name, initial, ttl)
                atexit.register(counter.push)
            elif initial is not None:
                counter.initial = initial
            return counter

    def online_counter(
        self,
        name: str,
        window: int = 300,
        slots: int = 6,
        unique: str = "auto",
        noise: float = 0.0,
    ) -> OnlineCounter:
        """Return the count of visitors seen in the last ``window`` seconds (``noise=0.05``:
        each read blurred by up to 5%, so a page does not give the exact number away)."""
        return OnlineCounter(self.parts, name, window, slots, unique, noise)

    def visitor_counter(self, name: str, period: int = 3600, noise: float = 0.0) -> VisitorCounter:
        """Return visits per ``period`` (current and previous period; ``noise`` as for
        :meth:`online_counter`)."""
        return VisitorCounter(self.parts, name, period, noise)

    # -- reports --------------------------------------------------------------------------------

    def observe(self, observer: Observer) -> None:
        """Tell ``observer`` this cache's events, builds and calls from now on (once)."""
        if observer not in self.counts.observers:
            self.counts.observers.append(observer)
            if observer.watches_calls:
                self.counts.call_watchers.append(observer)
            observer.attached(self.counts)

    def stats(self, flush: bool = True) -> dict[str, Any]:
        """Return every process's counters (hits, stale, builds, …, hit_ratio) and server stats.

        ``flush``: add this process's counts first; a stats command, which counted
        nothing, passes False rather than write to the store.
        """
        if flush:
            self.counts.flush()
        totals = functools.partial(self.counts.totals, pending=flush)
        counters = self.parts.store_call("stats", totals, self.counts.local())
        sessions = self.parts.store_call(
            "stats", functools.partial(self.counts.apart, SESSIONS), {}
        )
        report = {"cache": counters, "servers": self.server_stats()}
        if sessions and not self.counts.family and any(sessions[name] for name in COUNTERS):
            report["sessions"] = sessions  # the session store's own reads, counted apart
        return report

    def server_stats(self) -> dict[str, Any]:
        """Return each server's own statistics; one that is down says ``"dead": 1``.

        A store that answers nothing at all (its only server down) is listed
        under its own name as down, so a report never shows an empty pool.
        """
        unreachable: dict[str, Any] = {}
        servers = self.parts.store_call("stats", self.store.stats, unreachable)
        if servers is unreachable:
            return {repr(self.store): {"error": "unreachable", "dead": 1}}
        return servers
