"""``@cached``: memoize a function on a Django cache, with ``depends_on`` as ``cached_view``.

``caches["default"].mcache.cached(...)`` needs the cache at import time, before
settings may be ready, and names tags by hand. This decorator finds the cache
(``cache=``, else ``MCACHE_CACHE``) at each call, checks the alias and
``depends_on`` where it is written, and adds the tags a save or delete of
those models (or rows) bumps, so a cached function follows the ORM as pages do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.core.cache import caches
from django.http import HttpResponseBase

from mcache import Cache
from mcache.features.memoize import LateBound, refuse_instances_of, tags_with

from .aliases import cache_alias, check_alias
from .tags import Dependencies, DependsOn

__all__ = ["cached", "refused"]

T = TypeVar("T")
TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str | None] | None


def cached(
    ttl: float | Callable[..., Any] | None = None,
    *,
    tags: TagsSpec = None,
    depends_on: DependsOn = (),
    cache: str | None = None,
    key_prefix: str | None = None,
    stale_ttl: float | None = None,
    refresh: str | None = None,
    early_refresh: float | bool | None = None,
    stale_wait: float | None = None,
) -> Any:
    """Cache a function's results by its arguments (``.invalidate(*args)``, ``.uncached``).

    ``depends_on`` takes what ``cached_view``'s does (models, rows, querysets,
    ``"app_label.Model"`` strings); ``tags`` may be a callable of the
    function's arguments. Written bare, ``@cached`` is ``@cached()``.
    """
    if callable(ttl) and not isinstance(ttl, int | float):
        return cached()(ttl)  # written bare, without parentheses
    if cache is not None:
        check_alias(cache, "cached(cache=...)")
    dependencies = Dependencies(depends_on, "cached")
    given = {
        "stale_ttl": stale_ttl,
        "refresh": refresh,
        "early_refresh": early_refresh,
        "stale_wait": stale_wait,
    }
    options = {name: value for name, value in given.items() if value is not None}

    def current_cache() -> Cache:
        return caches[cache_alias(cache)].mcache  # type: ignore[no-any-return]

    all_tags = tags_with(tags, dependencies.tags)

    def decorate(function: Callable[..., T]) -> LateBound:
        return LateBound(function, current_cache, ttl, all_tags, key_prefix, options, refused)

    return decorate


refused = refuse_instances_of(HttpResponseBase, "django_mcache.views.cached_view")
"""A memoized function's result that must not be shared: a Django response."""
