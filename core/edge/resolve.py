"""Which cache an edge answers from: an mcache ``Cache``, or a Django cache's alias."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcache.cache import Cache
from mcache.errors import ConfigError

__all__ = ["cache_resolver"]


def cache_resolver(cache: str | Cache | None, who: str) -> Callable[[], Cache | None]:
    """Return how to find the edge's cache when it learns a page (None: any cache).

    An alias is checked now, so a wrong one fails at start-up, and looked up again at
    each lesson: Django keeps a cache per thread, rebuilt in each forked worker.
    """
    if cache is None or isinstance(cache, Cache):
        return lambda: cache
    if not isinstance(cache, str):
        raise ConfigError(
            f"{who}(cache=...) takes a Django cache alias or an mcache Cache, got {cache!r}"
        )
    _django_core(cache, who)
    return lambda: _django_core(cache, who)


def _django_core(alias: str, who: str) -> Cache:
    from django.conf import settings
    from django.core.cache import InvalidCacheBackendError, caches

    try:
        backend: Any = caches[alias]
    except InvalidCacheBackendError:
        raise ConfigError(
            f"{who}(cache={alias!r}): no such cache in CACHES;"
            f" name one of {sorted(settings.CACHES)}"
        ) from None
    core = getattr(backend, "mcache", None)
    if not isinstance(core, Cache):
        raise ConfigError(
            f"{who}(cache={alias!r}) needs an mcache cache: set CACHES[{alias!r}]['BACKEND']"
            " = 'django_mcache.backend.MCacheBackend'"
        )
    return core
