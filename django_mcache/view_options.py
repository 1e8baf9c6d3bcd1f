"""What ``@cached_view`` was given, checked once, and what it derives per request.

Kept apart from the decorator so the page rules (:mod:`django_mcache.view_pages`)
read the options without importing the decorator that calls them.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, QueryDict

from mcache import Cache
from mcache.sansio.steps import BlockingOrAwaited, Steps
from mcache.web.page import PageSettings
from mcache.web.query import DEFAULT_QUERY, QueryRule

from .aliases import cache_alias
from .holes import HoleContext
from .tags import Dependencies

__all__ = ["TagsSpec", "ViewOptions", "kept_query"]

TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str] | None


@dataclass(frozen=True)
class ViewOptions(PageSettings):
    """The decorator's arguments, checked once."""

    depends_on: Dependencies | None = None
    per_user: bool = False
    cache: str | None = None
    key_prefix: str | None = None
    hole_context: HoleContext | None = None
    """Given (even empty): everything per-visitor sits in holes, so signed-in visitors
    share the page; the names holes may read besides the context processors'."""

    def significant_cookies(self, backend: Any) -> tuple[str, ...] | None:
        """Return the cookies a page's key covers: the view's, else its cache's ``page_cookies``."""
        return self.cookies if self.cookies is not None else getattr(backend, "page_cookies", None)

    def query_rule(self, backend: Any) -> QueryRule:
        """Return the query parameters a page's key keeps: the view's ``query``, else its
        cache's ``page_query``, else all but the analytics ones."""
        if self.query is not None:
            return self.query
        return getattr(backend, "page_query", None) or DEFAULT_QUERY

    def sends_cdn(self, backend: Any) -> bool:
        """Return whether pages tell caches in front their windows: the view's ``cdn``, else
        its cache's ``page_cdn``."""
        return self.cdn if self.cdn is not None else bool(getattr(backend, "page_cdn", False))

    def backend(self) -> Any:
        """Return the Django cache pages go to (``cache``, else ``MCACHE_CACHE``)."""
        return caches[cache_alias(self.cache)]

    def caches_nothing(self, backend: Any) -> bool:
        """Return whether pages must not be cached: no ttl given and the cache's TIMEOUT is 0.

        Django's rule (a ``TIMEOUT`` of 0 or less stores nothing) is how sites turn
        caching off in development; ``cache_page`` without a timeout follows it too.
        """
        timeout = backend.default_timeout
        return self.ttl is None and timeout is not None and timeout <= 0

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

    def options_steps(self, request: HttpRequest, args: tuple, kwargs: dict) -> Steps[dict]:
        """The page's ``get_or_build`` options. A ``tags`` callable is called with the
        view's arguments: awaited if a coroutine function, in a thread if a sync one under
        the async driver (it may query the database)."""
        tags = self.tags
        if callable(tags):
            call = partial(tags, request, *args, **kwargs)
            awaited = call if inspect.iscoroutinefunction(tags) else sync_to_async(call)
            tags = yield BlockingOrAwaited(call, awaited)
        return self.options(tags, self.depends_on.tags())  # type: ignore[union-attr]


@contextlib.contextmanager
def kept_query(request: HttpRequest, rule: QueryRule) -> Iterator[None]:
    """Show the view, while it renders a page to store, only the query parameters its key
    keeps (``request.GET``, and ``QUERY_STRING`` for ``get_full_path``); put them back after."""
    if not request.META.get("QUERY_STRING") or not rule.drops_any(request.GET):
        yield
        return
    whole, raw = request.GET, request.META["QUERY_STRING"]
    shown = rule.query_string(whole.lists())
    request.GET, request.META["QUERY_STRING"] = QueryDict(shown), shown
    try:
        yield
    finally:
        request.GET, request.META["QUERY_STRING"] = whole, raw
