"""``@cached_view``: whole responses through ``get_or_build``, dog-pile safe, with tags.

It refuses what Django's cache middleware refuses, and more where a shared
cache could leak one visitor's page to another (a signed-in user, a cookie set):
the rules are in docs/how-to/cache-a-page.md, applied by :mod:`.view_pages`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from mcache.observe.outcome import BYPASS, log_bypass
from mcache.sansio.steps import (
    BlockingOrAwaited,
    CallBuilder,
    Steps,
    aperform,
    arun_steps,
    perform,
    run_steps,
)
from mcache.web.page import check_hole_context, check_view_ttl, cookie_names, serve_steps
from mcache.web.query import QuerySpec, query_rule

from .aliases import check_alias
from .edge_pages import tell_the_edge
from .holes import HoleContext
from .page_responses import marked, restore
from .tags import Dependencies, DependsOn
from .view_options import TagsSpec, ViewOptions
from .view_pages import (
    Render,
    View,
    anyones_reason,
    noting_tags,
    page_key,
    session_untouched,
    signed_in,
    user_read_before,
)

__all__ = ["cached_view"]


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
    cookies: Sequence[str] | None = None,
    cdn: bool | None = None,
    query: QuerySpec = None,
    hole_context: HoleContext | None = None,
) -> Callable[[View], View]:
    """Cache a view's whole response; use ``method_decorator`` for class-based views.

    The key covers the view, scheme, host, path, sorted query string, the values
    of ``vary_on_headers`` (an absent header differs from an empty one), the
    language, and the user's id when ``per_user`` (GET and HEAD share it).
    ``tags`` (names, or a callable of ``request, *args, **kwargs``) and
    ``depends_on`` (:class:`~django_mcache.tags.Dependencies`) make the page stale
    when one of them is bumped, as a save or delete does. ``ttl``: seconds a page
    is fresh (``None``: the cache's ``TIMEOUT``; 0 or less, as with ``cache_page``:
    not cached). ``stale_wait``: how long a request finding the page stale while
    another rebuilds it waits for the new one (default: the cache's, 0).
    ``header`` names the HIT/MISS/STALE response header, sent with ``Cache-Status``
    (``None``: neither).

    ``cookies``: the cookies the page depends on (default: the cache's
    ``OPTIONS["page_cookies"]``); their values join the key, others are ignored, and a
    ``Vary: Cookie`` response is then stored. ``cdn``: send the entry's windows to caches
    in front (``s-maxage``, ``stale-while-revalidate``, ``stale-if-error``,
    ``CDN-Cache-Control``; default: ``OPTIONS["page_cdn"]``). ``query``: the query
    parameters the key keeps, a list (``["page"]``) or ``{"exclude": [...]}`` (default:
    ``OPTIONS["page_query"]``, else all but the analytics ones, see
    :mod:`mcache.web.query`); the view sees only those. ``hole_context``
    (``{name: f(request)}``, even ``{}``): everything per-visitor on the page sits in
    ``{% nocache %}`` holes, which may read these names besides the context
    processors'; signed-in visitors then share the page (see docs/how-to/holes.md).

    Written bare, ``@cached_view`` is ``@cached_view()``. An unknown ``cache``
    alias fails here, when the view module is imported, not at the first request.
    """
    if callable(ttl) and not isinstance(ttl, int | float):
        return cached_view()(ttl)  # @cached_view without parentheses
    check_view_ttl(ttl, "cached_view")
    check_hole_context(hole_context, "cached_view")
    dependencies = Dependencies(depends_on, "cached_view")
    if cache is not None:
        check_alias(cache, "cached_view(cache=...)")
    if ttl is not None and ttl <= 0:
        return lambda view: view  # Django's rule: a timeout of 0 caches nothing
    options = ViewOptions(
        ttl,
        stale_ttl,
        tags,
        tuple(sorted({h.lower() for h in vary_on_headers})),
        refresh,
        header,
        stale_wait,
        cookie_names(cookies, "cached_view(cookies=...)"),
        cdn,
        query_rule(query, "cached_view(query=...)"),
        dependencies,
        per_user,
        cache,
        key_prefix,
        hole_context,
    )

    def decorate(view: View) -> View:
        qualname = getattr(view, "__qualname__", type(view).__qualname__)  # a Feed instance, say
        name = key_prefix or f"{view.__module__}.{qualname}"
        if asyncio.iscoroutinefunction(view):

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
                steps = _serve_steps(options, name, view, request, args, kwargs, True)
                return await arun_steps(steps, aperform)

            return async_wrapper

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            steps = _serve_steps(options, name, view, request, args, kwargs, False)
            return run_steps(steps, perform)

        return wrapper

    return decorate


# -- serving: one path, as steps the sync view's wrapper calls and the async one awaits ---------


def _serve_steps(
    options: ViewOptions,
    name: str,
    view: View,
    request: HttpRequest,
    args: tuple,
    kwargs: dict,
    on_loop: bool,
) -> Steps[Any]:
    """Serve one request: bypassed, from the store, or rendered and stored.

    ``on_loop``: an ``async def`` view, on the event loop, whose hit hops to no
    thread (the user from ``request.auser()``, the page from the store's async
    twin); only a render hands its session and CSRF checks to a thread.
    """
    the_view = CallBuilder(partial(view, request, *args, **kwargs))
    backend = options.backend()
    reason = "disabled" if options.caches_nothing(backend) else anyones_reason(request)
    user = None
    if reason is None:
        # Looked at before the view (by a middleware), the user may be in what it left on
        # the request, where no hole reaches: then a signed-in visitor shares nothing.
        shared = options.hole_context is not None and not user_read_before(request)
        user = yield BlockingOrAwaited(
            partial(_signed_in_user, request), partial(_asigned_in_user, request)
        )
        if user is not None and not options.per_user and not shared:
            reason = "signed-in"
    if reason is not None:
        return _bypassed((yield the_view), reason, name, request, options)
    core = options.core(backend)
    render = Render(request, options, user, backend)
    key = page_key(name, request, render, user)
    build_options = noting_tags(options.options_steps(request, args, kwargs), render)
    build = render.build(view, args, kwargs, on_loop)
    served = yield from serve_steps(
        core,
        key,
        request.method == "HEAD",
        build_options,
        build,
        1,
        HttpResponseBase,
        render.refusal,
    )
    if served.page is not None:
        if not served.reason:
            tell_the_edge(render, core, key, served.page, served.state)  # type: ignore[arg-type]
        restored = partial(restore, served.page, served.state, render, served.reason)
        if not served.page[3]:  # type: ignore[index]
            return restored()
        # Holes render templates that may query (the user, hole_context): not on the loop.
        return (yield BlockingOrAwaited(restored, partial(_in_a_thread, restored)))
    response = served.response if served.response is not None else (yield the_view)
    return _bypassed(response, served.reason, name, request, options)


def _bypassed(
    response: Any, reason: str, name: str, request: HttpRequest, options: ViewOptions
) -> Any:
    """Return the view's own response marked BYPASS with ``reason`` (logged at DEBUG)."""
    log_bypass(name, reason, request.method or "", request.path)
    return marked(response, BYPASS, reason, options)


async def _in_a_thread(call: Callable[[], Any]) -> Any:
    """Await ``call()`` in a worker thread (made only when awaited: the sync driver's hits
    never pay for an async wrapper they do not use)."""
    return await sync_to_async(call)()


def _signed_in_user(request: HttpRequest) -> Any:
    """Return the signed-in user, or None (see :func:`.view_pages.signed_in`)."""
    return request.user if signed_in(request) else None


async def _asigned_in_user(request: HttpRequest) -> Any:
    """Return the signed-in user, or None, as :func:`.view_pages.signed_in` decides,
    without a thread where Django provides ``request.auser()`` (its own async read)."""
    auser = getattr(request, "auser", None)
    if auser is None:  # Django 4.2, or no auth middleware (then no user at all: no thread)
        has_user = getattr(request, "user", None) is not None
        return await sync_to_async(_signed_in_user)(request) if has_user else None
    with session_untouched(request):
        user = await auser()
    return user if user.is_authenticated else None
