"""``@cached_view``: whole responses through ``get_or_build``, dog-pile safe, with tags.

What Django's cache middleware refuses to cache, this refuses too (rules below,
checked with ``django.utils.cache``'s helpers), and it is stricter where a
shared cache could leak one visitor's page to another: a request with
``Authorization`` or from a signed-in user (unless ``per_user=True``) is never
cached, and neither is a response that sets a cookie.

A hit is one store round trip (entry and tag versions together); a stale page
is served with ``X-Cache: STALE`` while one request re-renders it (after the
response, on the refresher, with ``refresh="background"``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils import translation

from mcache import Cache
from mcache.model.jobs import in_process
from mcache.observe.outcome import BYPASS, log_bypass
from mcache.web.page import PAGES_STAY, PageRead, aget_page, get_page

from .config import cache_alias, check_alias
from .tags import Dependencies, DependsOn
from .view_pages import (
    Render,
    Snapshot,
    View,
    anyones_reason,
    bypass_reason,
    marked,
    page_key,
    restore,
    session_untouched,
    signed_in,
    snapshot_of,
)

__all__ = ["cached_view"]

TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str] | None


def cached_view(
    ttl: float | View | None = None,
    *,
    stale_ttl: float | None = None,
    tags: TagsSpec = None,
    depends_on: DependsOn = (),
    vary_on_headers: Sequence[str] = (),
    per_user: bool = False,
    cache: str | None = None,
    key_prefix: str | None = None,
    refresh: str | None = None,
    header: str | None = "X-Cache",
    stale_wait: float | None = None,
) -> Callable[[View], View]:
    """Cache a view's whole response; use ``method_decorator`` for class-based views.

    The key covers the view, scheme, host, path, the sorted query string, the
    values of ``vary_on_headers`` (an absent header differs from an empty one),
    the language, and the user's id when ``per_user`` (GET and HEAD share it).
    ``tags`` (names, or a callable of ``request, *args, **kwargs``) and
    ``depends_on`` (models, rows, querysets or ``"app_label.Model"`` strings:
    see :class:`~django_mcache.tags.Dependencies`) make the page stale when
    ``cache.invalidate`` bumps one of them, as a save or delete does.
    ``header`` names the HIT/MISS/STALE response header (``None``: no header).
    ``ttl`` is how long a page is fresh, in seconds (``None``: the cache's
    ``TIMEOUT``); as with ``cache_page``, 0 or less does not cache it at all.
    ``stale_wait`` is how long a request that finds the page stale, while
    another request rebuilds it, waits for the new page before taking the
    stale one (default: the cache's ``stale_wait``, 0).

    Written bare, ``@cached_view`` is ``@cached_view()``. An unknown ``cache``
    alias fails here, when the view module is imported, not at the first request.
    """
    if callable(ttl) and not isinstance(ttl, int | float):
        return cached_view()(ttl)  # @cached_view without parentheses
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
        raise TypeError(
            f"cached_view: ttl must be a number of seconds or None, got {ttl!r};"
            " write @cached_view(300) or @cached_view()"
        )
    dependencies = Dependencies(depends_on, "cached_view")
    if cache is not None:
        check_alias(cache, "cached_view(cache=...)")
    if ttl is not None and ttl <= 0:
        return lambda view: view  # Django's rule: a timeout of 0 caches nothing
    options = ViewOptions(
        ttl,
        stale_ttl,
        tags,
        dependencies,
        tuple(vary_on_headers),
        per_user,
        cache,
        key_prefix,
        refresh,
        header,
        stale_wait,
    )

    def decorate(view: View) -> View:
        qualname = getattr(view, "__qualname__", type(view).__qualname__)  # a Feed instance, say
        name = key_prefix or f"{view.__module__}.{qualname}"
        if asyncio.iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                return await _aserve(options, name, view, request, args, kwargs)

            return async_wrapper

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            return _serve(options, name, view, request, args, kwargs)

        return wrapper

    return decorate


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


# -- serving -----------------------------------------------------------------------------------


def _serve(
    options: ViewOptions, name: str, view: View, request: HttpRequest, args: tuple, kwargs: dict
) -> Any:
    backend = options.backend()
    reason = "disabled" if options.caches_nothing(backend) else bypass_reason(request, options)
    if reason is not None:
        return _bypassed(view(request, *args, **kwargs), reason, name, request, options)
    core = options.core(backend)
    user = request.user if options.per_user and signed_in(request) else None
    key = page_key(name, request, options, user)
    render = Render(request, options)
    if request.method == "HEAD":  # served from the GET entry, never stored from a HEAD
        found = snapshot_of(core.peek(key, None))
        if found is None or not render.serves(found):
            reason = "head" if found is None else "session"
            return _bypassed(view(request, *args, **kwargs), reason, name, request, options)
        return restore(found, "HIT", options)

    def build() -> Snapshot:
        return render.build(view, args, kwargs)

    build_options = options.build_options(request, args, kwargs)
    local = in_process(build, PAGES_STAY)
    read = get_page(core, key, local, 1, HttpResponseBase, **build_options)
    if isinstance(read.result, HttpResponseBase):  # this request's own, uncacheable response
        return _bypassed(read.result, read.refused, name, request, options)
    if read.page is None or not render.serves(read.page):
        reason = "session" if read.page is not None else "foreign"
        return _bypassed(view(request, *args, **kwargs), reason, name, request, options)
    return _restored(read, render, options)


def _restored(read: PageRead, render: Render, options: ViewOptions) -> Any:
    """The page, marked STALE when the stale page was served (its rebuild may have
    started), MISS when built (``store-down`` when the store failed), else HIT."""
    if read.store_down and render.built:
        return restore(read.page, "MISS", options, "store-down")  # type: ignore[arg-type]
    state = "STALE" if read.stale else "MISS" if render.built else "HIT"
    return restore(read.page, state, options)  # type: ignore[arg-type]


def _bypassed(
    response: Any, reason: str, name: str, request: HttpRequest, options: ViewOptions
) -> Any:
    """Return the view's own response marked BYPASS with ``reason`` (logged at DEBUG)."""
    log_bypass(name, reason, request.method or "", request.path)
    return marked(response, BYPASS, reason, options)


async def _aserve(
    options: ViewOptions, name: str, view: View, request: HttpRequest, args: tuple, kwargs: dict
) -> Any:
    """:func:`_serve` for an ``async def`` view: a hit runs on the event loop alone.

    Nothing on the way to a hit hops to a thread: the user comes from
    ``request.auser()`` (no I/O without a session cookie), the page from the
    store's async twin. A render (a miss) hands its session and CSRF checks to a
    thread, as Django runs sync code from async views.
    """
    backend = options.backend()
    reason = "disabled" if options.caches_nothing(backend) else anyones_reason(request)
    user = None if reason is not None else await _asigned_in_user(request)
    if user is not None and not options.per_user:
        reason = "signed-in"
    if reason is not None:
        return _bypassed(await view(request, *args, **kwargs), reason, name, request, options)
    core = options.core(backend)
    key = page_key(name, request, options, user)
    render = Render(request, options, user is not None)
    if request.method == "HEAD":
        found = snapshot_of(await core.apeek(key, None))
        if found is None or not render.serves(found):
            reason = "head" if found is None else "session"
            response = await view(request, *args, **kwargs)
            return _bypassed(response, reason, name, request, options)
        return restore(found, "HIT", options)

    async def build() -> Snapshot:
        if threading.get_ident() != render.thread:  # a background refresh on a refresher
            with translation.override(render.language):
                response = await view(request, *args, **kwargs)
                return await sync_to_async(render.after)(response, False)
        render.built = True
        render.before()
        response = await view(request, *args, **kwargs)
        return await sync_to_async(render.after)(response)

    if callable(options.tags) and not inspect.iscoroutinefunction(options.tags):
        build_options = await sync_to_async(options.build_options)(request, args, kwargs)
    else:
        build_options = await options.abuild_options(request, args, kwargs)
    local = in_process(build, PAGES_STAY)
    read = await aget_page(core, key, local, 1, HttpResponseBase, **build_options)
    if isinstance(read.result, HttpResponseBase):
        return _bypassed(read.result, read.refused, name, request, options)
    if read.page is None or not render.serves(read.page):
        reason = "session" if read.page is not None else "foreign"
        response = await view(request, *args, **kwargs)
        return _bypassed(response, reason, name, request, options)
    return _restored(read, render, options)


async def _asigned_in_user(request: HttpRequest) -> Any:
    """Return the signed-in user, or None, as :func:`.view_pages.signed_in` decides,
    without a thread where Django provides ``request.auser()``.

    Without a session cookie Django finds the anonymous user with no I/O; with
    one, loading the session is Django's own (async) database read.
    """
    auser = getattr(request, "auser", None)
    if auser is None:
        if getattr(request, "user", None) is None or not await sync_to_async(signed_in)(request):
            return None
        return request.user
    with session_untouched(request):
        user = await auser()
    return user if user.is_authenticated else None
