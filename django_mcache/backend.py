"""``MCacheBackend``: mcache as a Django cache in ``settings.CACHES``.

Django's keys (``KEY_PREFIX``, ``VERSION``, ``KEY_FUNCTION``) then go through
mcache's key hashing, so any key is memcached-safe; everything else is the core
:class:`mcache.Cache`, whose ``get_or_build`` makes ``get_or_set`` dog-pile safe.

Django builds one backend per thread and alias, but the core cache behind it
is one per process and configuration, so threads share their connection pools
and single-flight calls; a forked worker starts with its own.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.exceptions import ImproperlyConfigured

from mcache import Cache, Lock
from mcache.errors import ConfigError
from mcache.features.counters import Counter, ViewCounter
from mcache.features.visitors import OnlineCounter
from mcache.sansio.steps import (
    CallBuilder,
    Steps,
    aperform,
    arun_steps,
    perform,
    run_steps,
    settled,
)

from .config import PageDefaults, cache_from_settings, page_defaults, secret_key

__all__ = ["MCacheBackend"]

T = TypeVar("T")
_MISSING = object()
_shared: dict[tuple[str, str], Cache] = {}
_shared_lock = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_shared.clear)  # a child must not reuse the parent's sockets


def _core_cache(location: str, params: Mapping[str, Any]) -> Cache:
    """Return this process's core cache for a ``CACHES`` entry and the replica-lag
    settings (:func:`~django_mcache.aliases.replication_lag`), building it once."""
    read_settings = [  # beside the entry, what cache_from_settings reads
        getattr(settings, name, None) for name in ("MCACHE_REPLICATION_LAG", "DATABASE_ROUTERS")
    ]
    entry = repr(sorted((str(k), repr(v)) for k, v in params.items()))
    signature = (str(location), entry, repr(read_settings), _secret_fingerprint())
    with _shared_lock:
        cache = _shared.get(signature)
        if cache is None:
            try:
                cache = cache_from_settings(location, params)
            except ConfigError as error:
                return _Misconfigured(error)  # type: ignore[return-value]
            alias = _alias_of(location, params)
            if alias is not None:  # how a task worker finds it: see core_cache_of
                cache.locator = f"django_mcache.backend:core_cache_of:{alias}"
                cache.counts.origin.label = alias  # its name in metrics
            _shared[signature] = cache
    return cache


def _secret_fingerprint() -> str:
    """Tell ``SECRET_KEY``s (and ``SECRET_KEY_FALLBACKS``) apart, as a cache built under
    others signs with other keys, without keeping the secrets in a dictionary key."""
    fallbacks = getattr(settings, "SECRET_KEY_FALLBACKS", ())
    return hashlib.sha256(repr((secret_key(), list(fallbacks))).encode()).hexdigest()


def _counted(key: Any, value: int | None) -> int:
    """Return an incremented value; Django's ``ValueError`` for a key that is missing."""
    if value is None:
        raise ValueError(f"Key '{key}' not found")
    return value


def _alias_of(location: str, params: Mapping[str, Any]) -> str | None:
    """Return the ``CACHES`` alias configured with this LOCATION and these params."""
    for alias, entry in getattr(settings, "CACHES", {}).items():
        rest = {k: v for k, v in entry.items() if k not in ("BACKEND", "LOCATION")}
        if entry.get("LOCATION", "") == location and rest == dict(params):
            return str(alias)
    return None


def core_cache_of(alias: str) -> Cache:
    """Return the core cache of ``CACHES[alias]``: what a queue worker rebuilds into."""
    from django.core.cache import caches

    return caches[alias].mcache  # type: ignore[attr-defined,no-any-return]


class _Misconfigured:
    """Stands in for the core cache of a bad configuration: any use raises the reason.

    Django instantiates every cache while running its own checks, so the backend
    must not raise then; :mod:`django_mcache.checks` reports the reason instead.
    """

    def __init__(self, error: ConfigError) -> None:
        self._message = f"mcache cache: {error}"

    def __getattr__(self, name: str) -> Any:
        raise ImproperlyConfigured(self._message)


class MCacheBackend(BaseCache):
    """A Django cache backend on mcache: memcached, Redis, memory or another Django cache."""

    def __init__(self, location: str, params: dict[str, Any]) -> None:
        options = params.get("OPTIONS")
        # BaseCache reads OPTIONS as a dict; a wrong type is reported by the check instead.
        super().__init__(
            params if options is None or isinstance(options, Mapping) else {**params, "OPTIONS": {}}
        )
        self._location, self._params = location, params
        self._mcache = _core_cache(location, params)
        self._pid = os.getpid()
        try:
            pages = page_defaults(params.get("OPTIONS") or {})
        except (ConfigError, AttributeError):  # reported by the core cache, as any bad option
            pages = PageDefaults()
        self.page_cookies, self.page_cdn, self.page_surrogate, self.page_query = pages

    @property
    def mcache(self) -> Cache:
        """The process's core cache; a worker forked after first use builds its own."""
        if self._pid != os.getpid():
            self._mcache = _core_cache(self._location, self._params)
            self._pid = os.getpid()
        return self._mcache

    # -- Django keys and timeouts -----------------------------------------------------------

    def validate_key(self, key: str) -> None:
        """Accept any key: mcache hashes it into a memcached-safe one."""

    def _key(self, key: Any, version: int | None) -> str:
        return self.make_and_validate_key(key, version=version)

    def _ttl(self, timeout: Any) -> float:
        """Return the core TTL for a Django timeout: 0 keeps forever (``None``), -1 is expired."""
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return 0
        return -1 if timeout <= 0 else timeout

    # -- the BaseCache API ----------------------------------------------------------------------
    #
    # Each ``a``-prefixed method awaits the core's own (on the store's async twin,
    # see mcache.plain_operations) instead of Django's default, the sync method in a thread.

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        """Return the cached value, or ``default``."""
        return self.mcache.get(self._key(key, version), default)

    async def aget(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        """Await :meth:`get`."""
        return await self.mcache.aget(self._key(key, version), default)

    def set(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        """Cache ``value``; a failure is logged by mcache, never raised."""
        self.mcache.set(self._key(key, version), value, self._ttl(timeout))

    async def aset(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> None:
        """Await :meth:`set`."""
        await self.mcache.aset(self._key(key, version), value, self._ttl(timeout))

    def add(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """Cache ``value`` unless the key holds one; return whether this call stored it."""
        return self.mcache.add(self._key(key, version), value, self._ttl(timeout))

    async def aadd(
        self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """Await :meth:`add`."""
        return await self.mcache.aadd(self._key(key, version), value, self._ttl(timeout))

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        """Give the key a new timeout; return whether it existed."""
        return self.mcache.touch(self._key(key, version), self._ttl(timeout))

    async def atouch(
        self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        """Await :meth:`touch`."""
        return await self.mcache.atouch(self._key(key, version), self._ttl(timeout))

    def delete(self, key: Any, version: int | None = None) -> bool:
        """Remove the key; return whether it existed."""
        return self.mcache.delete(self._key(key, version))

    async def adelete(self, key: Any, version: int | None = None) -> bool:
        """Await :meth:`delete`."""
        return await self.mcache.adelete(self._key(key, version))

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        """Return the values of the keys found, in one round trip per server."""
        by_cache_key = {self._key(key, version): key for key in keys}
        found = self.mcache.get_many(list(by_cache_key))
        return {by_cache_key[cache_key]: value for cache_key, value in found.items()}

    async def aget_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        """Await :meth:`get_many`."""
        by_cache_key = {self._key(key, version): key for key in keys}
        found = await self.mcache.aget_many(list(by_cache_key))
        return {by_cache_key[cache_key]: value for cache_key, value in found.items()}

    def set_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        """Cache several values; return the keys that could not be stored."""
        by_cache_key = {self._key(key, version): key for key in data}
        items = {cache_key: data[key] for cache_key, key in by_cache_key.items()}
        failed = self.mcache.set_many(items, self._ttl(timeout))
        return [by_cache_key[cache_key] for cache_key in failed]  # type: ignore[index]

    async def aset_many(
        self, data: Mapping[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> list[Any]:
        """Await :meth:`set_many`."""
        by_cache_key = {self._key(key, version): key for key in data}
        items = {cache_key: data[key] for cache_key, key in by_cache_key.items()}
        failed = await self.mcache.aset_many(items, self._ttl(timeout))
        return [by_cache_key[cache_key] for cache_key in failed]  # type: ignore[index]

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        """Remove several keys."""
        self.mcache.delete_many([self._key(key, version) for key in keys])

    async def adelete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        """Await :meth:`delete_many`."""
        await self.mcache.adelete_many([self._key(key, version) for key in keys])

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """Add ``delta`` atomically; ``ValueError`` when the key is missing."""
        return _counted(key, self.mcache.incr(self._key(key, version), delta))

    async def aincr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        """Await :meth:`incr`."""
        return _counted(key, await self.mcache.aincr(self._key(key, version), delta))

    def clear(self) -> None:
        """Flush the whole store, as Django's memcached and Redis backends do."""
        self.mcache.clear()

    async def aclear(self) -> None:
        """Await :meth:`clear`."""
        await self.mcache.aclear()

    def get_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> Any:
        """Return the cached value or compute and cache it, once across callers (dog-pile safe).

        While a value is being computed, other callers wait for it (up to the
        ``wait`` option) instead of computing it too; an expired value is kept
        ``stale_ttl`` longer and served while one caller recomputes it.
        """
        value = run_steps(self._get_or_set_steps(key, default, timeout, version), perform)
        self.mcache.counts.flush_if_due()
        return value

    async def aget_or_set(
        self, key: Any, default: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None
    ) -> Any:
        """Await :meth:`get_or_set` (dog-pile safe as well).

        ``default`` may be a coroutine function, which is awaited; a plain
        callable runs on the event loop, as Django's own ``aget_or_set`` runs it.
        """
        steps = self._get_or_set_steps(key, default, timeout, version)
        value = await arun_steps(steps, aperform)
        await self.mcache.counts.aflush_if_due()
        return value

    def _get_or_set_steps(
        self, key: Any, default: Any, timeout: Any, version: int | None
    ) -> Steps[Any]:
        core = self.mcache
        build = default if callable(default) else (lambda: default)
        ttl = self._ttl(timeout)
        cache_key = self._key(key, version)
        if ttl < 0:  # timeout=0: a value already there is returned, a new one never stored
            found = yield from core.get_steps(cache_key, _MISSING)
            return (yield CallBuilder(build)) if found is _MISSING else found
        built: list[Any] = []

        async def counted_async() -> Any:
            built.append(value := await settled(build()))
            return value

        def counted() -> Any:
            built.append(value := build())
            return value

        builder = counted_async if inspect.iscoroutinefunction(build) else counted
        options = core.call_options(ttl=ttl)
        value = yield from core.get_or_build_steps(cache_key, builder, options)
        if built and type(value) is int:
            yield from core.unwrap_steps(cache_key, ttl)  # a plain number: incr/decr count it
        return value

    # -- mcache's extras -------------------------------------------------------------------------

    def get_or_build(
        self,
        key: Any,
        build: Callable[[], T],
        *,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        **options: Any,
    ) -> T:
        """Dog-pile-safe read with tags and stale serving; options as ``Cache.get_or_build``."""
        ttl = self._ttl(timeout)
        if ttl < 0:
            return build()
        return self.mcache.get_or_build(self._key(key, version), build, ttl=ttl, **options)

    async def aget_or_build(
        self,
        key: Any,
        build: Callable[[], Awaitable[T]],
        *,
        timeout: Any = DEFAULT_TIMEOUT,
        version: int | None = None,
        **options: Any,
    ) -> T:
        """Await a dog-pile-safe read whose builder is a coroutine function."""
        ttl = self._ttl(timeout)
        if ttl < 0:
            return await build()
        return await self.mcache.aget_or_build(self._key(key, version), build, ttl=ttl, **options)

    def invalidate(self, *tags: str) -> dict[str, int]:
        """Bump ``tags``: every entry carrying one of them is stale from now on."""
        return self.mcache.invalidate(*tags)

    async def ainvalidate(self, *tags: str) -> dict[str, int]:
        """:meth:`invalidate` from async code, on the store's async twin."""
        return await self.mcache.ainvalidate(*tags)

    def lock(self, name: str, timeout: int | None = None, wait: float = 0.0) -> Lock:
        """Return the distributed lock ``name`` (a context manager)."""
        return self.mcache.lock(name, timeout, wait)

    def counter(self, name: str, ttl: int = 0) -> Counter:
        """Return the atomic counter ``name``."""
        return self.mcache.counter(name, ttl)

    def view_counter(
        self, name: str, initial: Callable[[Any], int] | None = None, ttl: int = 0
    ) -> ViewCounter:
        """Return the view counter ``name``, seeded per object by ``initial`` (e.g. from the DB)."""
        return self.mcache.view_counter(name, initial, ttl)

    def online_counter(
        self,
        name: str = "site",
        window: int = 300,
        slots: int = 6,
        unique: str = "auto",
        noise: float = 0.0,
    ) -> OnlineCounter:
        """Return the online counter ``name``: distinct visitors over a sliding ``window``
        (``noise``: its counts blurred by that fraction, see `mcache.Cache.online_counter`)."""
        return self.mcache.online_counter(name, window, slots, unique, noise)

    def stats(self) -> dict[str, Any]:
        """Return mcache's cluster-wide counters and per-server statistics."""
        return self.mcache.stats()
