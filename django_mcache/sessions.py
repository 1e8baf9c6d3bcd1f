"""``SESSION_ENGINE = "django_mcache.sessions"``: sessions on mcache, replicated.

A lost session logs its user out, so on a memcached pool each session is
written to ``MCACHE_SESSION_REPLICAS`` servers (default 2) and read from the
first that has it: any one server may die. See docs/how-to/sessions.md.
"""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.backends.cache import SessionStore as CacheSessionStore
from django.core.exceptions import ImproperlyConfigured

from mcache.stores.url import memcached_replicas

from .aliases import BACKEND
from .backend import MCacheBackend

__all__ = ["SessionStore"]


def session_cache() -> MCacheBackend:
    """Return this process's session cache: the alias's, with replicas on a memcached pool."""
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
    options = dict(params.get("OPTIONS") or {})
    copies = memcached_replicas(location, replicas)
    if copies is not None and copies > 1:
        options["replicas"] = copies
    return MCacheBackend(location, {**params, "OPTIONS": options})


class SessionStore(CacheSessionStore):
    """Django's cache session store on a replicated mcache store."""

    cache_key_prefix = "django_mcache.sessions."

    def __init__(self, session_key: str | None = None) -> None:
        self._cache: Any = session_cache()
        SessionBase.__init__(self, session_key)
