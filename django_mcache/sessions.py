"""``SESSION_ENGINE = "django_mcache.sessions"``: sessions on mcache that outlive its servers.

A session is the one thing in a cache that must not be lost (losing it signs its
visitor out), and a cache server can die. So where Django's own sessions app is
installed (``django.contrib.sessions``, with its table), every session is written
through to the database, as Django's ``cached_db`` engine does, and read from the
cache: with every cache server down a visitor still signs in and stays signed in,
and a server that comes back empty loses nothing. Without the app, sessions live in
the cache alone (``manage.py check`` warns, ``django_mcache.W004``): while its servers
are down a visitor cannot stay signed in, but never gets an error page.

Either way a store found down is asked once per request, not again (Django's cache
engine would try 10,000 session keys, each ``add`` failing, then answer 500), and on a
memcached pool each session is written to ``MCACHE_SESSION_REPLICAS`` servers (2) and
read from the first that has it. Session reads are counted apart from the cache's
(``stats()``' ``sessions`` line), out of its hit ratio. See docs/how-to/sessions.md.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.contrib.sessions.backends.base import CreateError, SessionBase, UpdateError
from django.contrib.sessions.backends.cache import SessionStore as CacheStore
from django.contrib.sessions.backends.cached_db import SessionStore as CachedDBStore
from django.contrib.sessions.backends.db import SessionStore as DBStore
from django.core.exceptions import ImproperlyConfigured

from mcache.observe.outcome import aasked, asked
from mcache.observe.stats import SESSIONS
from mcache.stores.url import memcached_replicas

from .aliases import BACKEND
from .backend import MCacheBackend

if TYPE_CHECKING:
    SessionStore = CachedDBStore

__all__ = [
    "KEY_PREFIX",
    "CacheOnlyStore",
    "OncePerRequest",
    "SessionStore",
    "WriteThroughStore",
    "session_cache",
    "writes_through",
]

KEY_PREFIX = "django_mcache.sessions."
"""The prefix of a session's cache key (either store's: a site that installs Django's
sessions app keeps its visitors' sessions, now also written to the database)."""


def writes_through() -> bool:
    """Return whether sessions are written through to the database: Django's sessions app,
    whose table holds them, is installed."""
    return apps.is_installed("django.contrib.sessions")


def __getattr__(name: str) -> Any:
    """``SessionStore``, the class Django's session middleware asks this engine for: the
    database-backed one where Django's sessions app is installed, else the cache alone."""
    if name == "SessionStore":
        return WriteThroughStore if writes_through() else CacheOnlyStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def session_cache() -> MCacheBackend:
    """Return this process's session cache: the alias's, with replicas on a memcached pool,
    its reads counted apart as sessions."""
    alias = getattr(settings, "SESSION_CACHE_ALIAS", "default")
    replicas = int(getattr(settings, "MCACHE_SESSION_REPLICAS", 2))
    return _build(alias, replicas, repr(settings.CACHES.get(alias)))


@functools.lru_cache(maxsize=16)
def _build(alias: str, replicas: int, entry: str) -> MCacheBackend:
    """Build the session cache (``entry``: the alias's settings, so a changed one is rebuilt;
    a forked worker's backend builds its own core cache, see ``MCacheBackend.mcache``)."""
    params = settings.CACHES.get(alias)
    if params is None or params.get("BACKEND") != BACKEND:
        raise ImproperlyConfigured(
            f"django_mcache.sessions needs SESSION_CACHE_ALIAS ({alias!r}) to name a cache"
            f" whose BACKEND is {BACKEND}"
        )
    location = params.get("LOCATION", "")
    options = {**(params.get("OPTIONS") or {}), "counted_as": SESSIONS}
    copies = memcached_replicas(location, replicas)
    if copies is not None and copies > 1:
        options["replicas"] = copies
    return MCacheBackend(location, {**params, "OPTIONS": options})


class OncePerRequest:
    """The session cache as one request's session sees it: once a call finds its store
    down, the rest of the request asks it nothing more and takes what a miss gives.

    The backend never raises for a store that is down (it logs, and answers as a miss
    would); this notes that it did, from what the core reports in the call's context.
    """

    def __init__(self, backend: MCacheBackend) -> None:
        self.backend = backend
        self.down = False

    def _asked(self, call: functools.partial[Any], fallback: Any) -> Any:
        if self.down:
            return fallback
        answer, self.down = asked(call)
        return fallback if self.down else answer

    async def _aasked(self, call: functools.partial[Any], fallback: Any) -> Any:
        if self.down:
            return fallback
        answer, self.down = await aasked(call)
        return fallback if self.down else answer

    def get(self, key: str, default: Any = None) -> Any:
        return self._asked(functools.partial(self.backend.get, key, default), default)

    async def aget(self, key: str, default: Any = None) -> Any:
        return await self._aasked(functools.partial(self.backend.aget, key, default), default)

    def set(self, key: str, value: Any, timeout: Any = None) -> None:
        self._asked(functools.partial(self.backend.set, key, value, timeout), None)

    async def aset(self, key: str, value: Any, timeout: Any = None) -> None:
        await self._aasked(functools.partial(self.backend.aset, key, value, timeout), None)

    def add(self, key: str, value: Any, timeout: Any = None) -> bool:
        return bool(self._asked(functools.partial(self.backend.add, key, value, timeout), False))

    async def aadd(self, key: str, value: Any, timeout: Any = None) -> bool:
        add = functools.partial(self.backend.aadd, key, value, timeout)
        return bool(await self._aasked(add, False))

    def delete(self, key: str) -> bool:
        return bool(self._asked(functools.partial(self.backend.delete, key), False))

    async def adelete(self, key: str) -> bool:
        return bool(await self._aasked(functools.partial(self.backend.adelete, key), False))

    def has_key(self, key: str) -> bool:
        return bool(self._asked(functools.partial(self.backend.has_key, key), False))

    async def ahas_key(self, key: str) -> bool:
        return bool(await self._aasked(functools.partial(self.backend.ahas_key, key), False))

    def __contains__(self, key: str) -> bool:
        return self.has_key(key)


class CacheOnlyStore(CacheStore):
    """Django's cache session engine on the session cache, with no error for a store that is
    down: the session is not kept (the visitor is not signed in on the next request)."""

    cache_key_prefix = KEY_PREFIX

    def __init__(self, session_key: str | None = None) -> None:
        self._cache: Any = OncePerRequest(session_cache())
        SessionBase.__init__(self, session_key)

    def save(self, must_create: bool = False) -> None:
        try:
            super().save(must_create)
        except (CreateError, UpdateError):
            if not self._cache.down:
                raise  # a key taken, or a session deleted meanwhile, as Django means them

    async def asave(self, must_create: bool = False) -> None:
        try:
            await super().asave(must_create)
        except (CreateError, UpdateError):
            if not self._cache.down:
                raise


class WriteThroughStore(CachedDBStore):
    """Django's ``cached_db`` engine on the session cache: the database holds every session,
    the cache answers reads (a store that is down: the database does)."""

    cache_key_prefix = KEY_PREFIX

    def __init__(self, session_key: str | None = None) -> None:
        self._cache: Any = OncePerRequest(session_cache())
        DBStore.__init__(self, session_key)

    def save(self, must_create: bool = False) -> None:
        try:
            super().save(must_create)
        except UpdateError:
            if must_create or self._cache.get(self.cache_key) is None:
                raise  # deleted meanwhile (signed out), as Django means it
            super().save(must_create=True)  # kept in the cache alone until now: its row

    async def asave(self, must_create: bool = False) -> None:
        try:
            await super().asave(must_create)
        except UpdateError:
            if must_create or await self._cache.aget(await self.acache_key()) is None:
                raise
            await super().asave(must_create=True)
