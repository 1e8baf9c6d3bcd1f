"""What ``@cached_view`` was given, checked once, and what it derives per request.

Kept apart from the decorator so the page rules (:mod:`django_mcache.view_pages`)
read the options without importing the decorator that calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

from mcache import Cache

from .aliases import cache_alias
from .tags import Dependencies

__all__ = ["TagsSpec", "ViewOptions"]

TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str] | None


class ViewOptions:
    """The decorator's arguments, checked once."""

    __slots__ = (
        "cache",
        "depends_on",
        "header",
        "key_prefix",
        "per_user",
        "refresh",
        "stale_ttl",
        "stale_wait",
        "tags",
        "ttl",
        "vary",
    )

    def __init__(
        self,
        ttl: float | None,
        stale_ttl: float | None,
        tags: TagsSpec,
        depends_on: Dependencies,
        vary: tuple[str, ...],
        per_user: bool,
        cache: str | None,
        key_prefix: str | None,
        refresh: str | None,
        header: str | None,
        stale_wait: float | None,
    ) -> None:
        self.ttl, self.stale_ttl, self.tags, self.depends_on = ttl, stale_ttl, tags, depends_on
        self.vary = tuple(sorted({h.lower() for h in vary}))
        self.per_user, self.cache, self.key_prefix = per_user, cache, key_prefix
        self.refresh, self.header, self.stale_wait = refresh, header, stale_wait

    def backend(self) -> Any:
        """Return the Django cache pages go to (``cache``, else ``MCACHE_CACHE``)."""
        return caches[cache_alias(self.cache)]

    def caches_nothing(self, backend: Any) -> bool:
        """Return whether pages must not be cached: no ttl given and the cache's TIMEOUT is 0.

        Django's rule (a ``TIMEOUT`` of 0 or less stores nothing) is how sites turn
        caching off in development; ``cache_page`` without a timeout follows it too.
        """
        if self.ttl is not None:
            return False
        timeout = backend.default_timeout
        return timeout is not None and timeout <= 0

    def core(self, backend: Any = None) -> Cache:
        """Return the core cache of ``backend`` (by default the one pages go to)."""
        core = getattr(backend if backend is not None else self.backend(), "mcache", None)
        if not isinstance(core, Cache):
            alias = cache_alias(self.cache)
            raise ImproperlyConfigured(
                f"cached_view(cache={alias!r}) needs an mcache cache: set"
                f" CACHES[{alias!r}]['BACKEND'] = 'django_mcache.backend.MCacheBackend'"
            )
        return core

    def tag_list(self, request: HttpRequest, args: tuple, kwargs: dict) -> list[str]:
        tags = self.tags(request, *args, **kwargs) if callable(self.tags) else self.tags
        return self._with_models(tags)

    def _with_models(self, tags: Iterable[str] | str | None) -> list[str]:
        names = [tags] if isinstance(tags, str) else list(tags or ())
        return list(dict.fromkeys([*names, *self.depends_on.tags()]))

    def build_options(self, request: HttpRequest, args: tuple, kwargs: dict) -> dict[str, Any]:
        return self._options(self.tag_list(request, args, kwargs))

    async def abuild_options(
        self, request: HttpRequest, args: tuple, kwargs: dict
    ) -> dict[str, Any]:
        """:meth:`build_options` with ``tags`` a coroutine function (awaited) or no callable."""
        tags = await self.tags(request, *args, **kwargs) if callable(self.tags) else self.tags
        return self._options(self._with_models(tags))

    def _options(self, tags: list[str]) -> dict[str, Any]:
        return {
            "ttl": self.ttl,
            "stale_ttl": self.stale_ttl,
            "tags": tags,
            "refresh": self.refresh,
            "stale_wait": self.stale_wait,
        }
