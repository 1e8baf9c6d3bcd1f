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
import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.urls import get_script_prefix, get_urlconf, set_script_prefix, set_urlconf
from django.utils import translation
from django.utils.cache import (
    cc_delim_re,
    get_max_age,
    has_vary_header,
    patch_cache_control,
    patch_response_headers,
    patch_vary_headers,
)
from django.utils.http import http_date

from mcache import Cache
from mcache.errors import Uncacheable
from mcache.jobs import in_process
from mcache.page import PAGES_STAY, aget_page, as_page, get_page

from .config import cache_alias
from .tags import model_tag

__all__ = ["cached_view"]

View = Callable[..., Any]
TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str] | None
PRIVATE_DIRECTIVES = frozenset({"private", "no-cache", "no-store"})


def cached_view(
    ttl: float | None = None,
    *,
    stale_ttl: float | None = None,
    tags: TagsSpec = None,
    depends_on: Sequence[type] = (),
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
    ``depends_on`` models (their ``model_tag``) make the page stale when
    ``cache.invalidate`` bumps one of them. ``header`` names the HIT/MISS/STALE
    response header (``None``: no header). ``ttl`` is how long a page is fresh,
    in seconds (``None``: the cache's ``TIMEOUT``); as with ``cache_page``, 0 or
    less does not cache it at all. ``stale_wait`` is how long a request that
    finds the page stale, while another request rebuilds it, waits for the new
    page before taking the stale one (default: the cache's ``stale_wait``, 0).
    """
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
        raise TypeError(f"cached_view: ttl must be a number of seconds or None, got {ttl!r}")
    if ttl is not None and ttl <= 0:
        return lambda view: view  # Django's rule: a timeout of 0 caches nothing
    options = _ViewOptions(
        ttl,
        stale_ttl,
        tags,
        tuple(model_tag(m) for m in depends_on),
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


class _ViewOptions:
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
        depends_on: tuple[str, ...],
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
        return list(dict.fromkeys([*names, *self.depends_on]))

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


# -- what may be cached ------------------------------------------------------------------------


def _has_session_cookie(request: HttpRequest) -> bool:
    return settings.SESSION_COOKIE_NAME in request.COOKIES


def _request_is_cacheable(request: HttpRequest, options: _ViewOptions) -> bool:
    """Return whether a response to this request may come from, or go to, the shared cache."""
    return _anyones_request(request) and (options.per_user or not _signed_in(request))


def _anyones_request(request: HttpRequest) -> bool:
    """Return whether the request is a GET or HEAD without credentials (whoever sent it)."""
    if request.method not in ("GET", "HEAD"):
        return False
    return "HTTP_AUTHORIZATION" not in request.META  # credentials: the answer is this caller's


def _signed_in(request: HttpRequest) -> bool:
    """Return whether the request has a signed-in user, however it was authenticated."""
    with _session_untouched(request):
        user = getattr(request, "user", None)
        return user is not None and bool(user.is_authenticated)


@contextlib.contextmanager
def _session_untouched(request: HttpRequest) -> Iterator[None]:
    """Put the session's ``accessed`` flag back as it was after the block.

    Looking at the user loads the session; that look is ours, not the view's.
    """
    session = getattr(request, "session", None)
    accessed = getattr(session, "accessed", False)
    try:
        yield
    finally:
        if session is not None:
            session.accessed = accessed


def _response_is_cacheable(
    response: HttpResponseBase, options: _ViewOptions, keyed_by_user: bool
) -> bool:
    """Apply the cache middleware's rules, and refuse any response that sets a cookie."""
    if response.streaming or response.status_code != 200 or response.cookies:
        return False
    directives = {
        d.split("=", 1)[0].strip().lower()
        for d in cc_delim_re.split(response.get("Cache-Control", ""))
        if d.strip()
    }
    if directives & PRIVATE_DIRECTIVES or get_max_age(response) == 0:
        return False
    if has_vary_header(response, "*"):
        return False
    allowed = set(options.vary) | ({"cookie"} if keyed_by_user else set())
    varied = {h.strip().lower() for h in cc_delim_re.split(response.get("Vary", "")) if h.strip()}
    return varied <= allowed  # a Vary the key does not cover would serve the wrong variant


class _Render:
    """One request's render of the view, watching what it did to the session and CSRF cookie.

    Session and CSRF middleware act after the view returns, outside this
    decorator, so their cookies never show on the response seen here. A view
    that asked for a CSRF token, or changed the session, answered this visitor
    alone; one that read the session is only shared with visitors who have no
    session (for them its content cannot depend on one).
    """

    def __init__(
        self, request: HttpRequest, options: _ViewOptions, signed_in: bool | None = None
    ) -> None:
        self.request, self.options = request, options
        self.signed_in = signed_in  # None: asked when needed (an async view asks beforehand)
        self.built = False
        self.session = getattr(request, "session", None)
        self._accessed = False
        self._thread = threading.get_ident()
        # A refresher thread sees none of the request's thread-bound state (asgiref
        # hides it from other threads), so what a render depends on is carried over.
        self._language = translation.get_language()
        self._script_prefix = get_script_prefix()
        self._urlconf = get_urlconf()

    def build(self, view: View, args: tuple, kwargs: dict) -> Snapshot:
        """Render in the request's thread, or (a background refresh) in a refresher's."""
        if threading.get_ident() == self._thread:
            self.built = True
            self._before()
            return self._after(view(self.request, *args, **kwargs))
        close_old_connections()  # a refresher thread keeps no request cycle of its own
        set_script_prefix(self._script_prefix)
        set_urlconf(self._urlconf)
        try:
            with translation.override(self._language):
                return self._after(view(self.request, *args, **kwargs), watch_session=False)
        finally:
            set_urlconf(None)
            close_old_connections()

    def _before(self) -> None:
        if self.session is not None:
            self._accessed = self.session.accessed
            self.session.accessed = False

    def _after(self, response: Any, watch_session: bool = True) -> Snapshot:
        response = _render(response)
        reads_session = False
        if self.session is not None and watch_session:
            reads_session = self.session.accessed
            self.session.accessed = self._accessed or reads_session
        elif self.session is not None:
            reads_session = self.session.accessed  # a re-render: the request's own reading counts
        if self.session is not None and self.session.modified:
            raise Uncacheable(response)
        if self.request.META.get("CSRF_COOKIE_NEEDS_UPDATE"):
            raise Uncacheable(response)  # the page holds this visitor's CSRF token
        if _messages_used(self.request):
            raise Uncacheable(response)  # flash messages are this visitor's (and a cookie)
        keyed_by_user = self._keyed_by_user()
        if reads_session and _has_session_cookie(self.request) and not keyed_by_user:
            raise Uncacheable(response)
        if not _response_is_cacheable(response, self.options, keyed_by_user):
            raise Uncacheable(response)
        return _snapshot(response, self.options, reads_session)

    def _keyed_by_user(self) -> bool:
        if not self.options.per_user:
            return False
        return _signed_in(self.request) if self.signed_in is None else self.signed_in

    def serves(self, snapshot: Any) -> bool:
        """Return whether a stored page may answer this request without running the view."""
        if type(snapshot) is not tuple or len(snapshot) != 4:
            return False  # not a page this version stored: render instead
        return not (snapshot[3] and _has_session_cookie(self.request) and not self._keyed_by_user())


# -- keys and snapshots ------------------------------------------------------------------------

Snapshot = tuple[int, list, bytes, bool]
"""What is stored: status, headers, body, and whether the view read the session."""


def _key(name: str, request: HttpRequest, options: _ViewOptions, user: Any) -> tuple[Any, ...]:
    """Return a page's key; ``user`` is the signed-in user a ``per_user`` page is keyed by."""
    query = tuple((name, tuple(values)) for name, values in sorted(request.GET.lists()))
    headers = tuple(request.META.get("HTTP_" + h.upper().replace("-", "_")) for h in options.vary)
    language = translation.get_language() if settings.USE_I18N else None
    user_id = user.pk if options.per_user and user is not None else None
    where = (request.scheme, request.get_host(), request.path)
    return ("view", name, *where, query, headers, language, user_id)


def _page(found: Any) -> Snapshot | None:
    """Return ``found`` as a stored page, or None when it is none (see ``mcache.page``)."""
    return as_page(found, 1)  # type: ignore[return-value]


def _snapshot(response: HttpResponseBase, options: _ViewOptions, reads_session: bool) -> Snapshot:
    """Return what is stored (a rendered response's parts, never the object)."""
    if options.ttl is not None:
        patch_response_headers(response, int(options.ttl))
    body = options.core().codec.storable_bytes(response.content)  # JSON keeps no bytes
    return (response.status_code, list(response.items()), body, reads_session)


def _restore(snapshot: Snapshot, state: str, options: _ViewOptions) -> HttpResponse:
    status, headers, content, reads_session = snapshot
    response = HttpResponse(content, status=status)
    for name, value in headers:
        response[name] = value
    if reads_session:
        patch_vary_headers(response, ["Cookie"])  # as SessionMiddleware would have said
    if options.per_user:
        patch_cache_control(response, private=True)  # a proxy must not share it
    if state == "STALE":
        response["Cache-Control"] = "max-age=0"
        response["Expires"] = http_date()
    if options.header:
        response[options.header] = state
    return response


def _messages_used(request: HttpRequest) -> bool:
    """Return whether the view read or queued flash messages (contrib.messages)."""
    storage = getattr(request, "_messages", None)
    if storage is None:
        return False
    return bool(storage.used or storage.added_new or getattr(storage, "_queued_messages", None))


def _render(response: Any) -> Any:
    if hasattr(response, "render") and callable(response.render) and not response.is_rendered:
        response = response.render()  # a TemplateResponse: the bytes are what is cached
    return response


# -- serving -----------------------------------------------------------------------------------


def _serve(
    options: _ViewOptions, name: str, view: View, request: HttpRequest, args: tuple, kwargs: dict
) -> Any:
    backend = options.backend()
    if options.caches_nothing(backend) or not _request_is_cacheable(request, options):
        return view(request, *args, **kwargs)
    core = options.core(backend)
    user = request.user if options.per_user and _signed_in(request) else None
    key = _key(name, request, options, user)
    render = _Render(request, options)
    if request.method == "HEAD":  # served from the GET entry, never stored from a HEAD
        found = _page(core.get(key, None))
        if found is None or not render.serves(found):
            return view(request, *args, **kwargs)
        return _restore(found, "HIT", options)

    def build() -> Snapshot:
        return render.build(view, args, kwargs)

    build_options = options.build_options(request, args, kwargs)
    local = in_process(build, PAGES_STAY)
    result, page, stale = get_page(core, key, local, 1, HttpResponseBase, **build_options)
    if isinstance(result, HttpResponseBase):
        return result  # this request's own, uncacheable response
    if page is None or not render.serves(page):
        return view(request, *args, **kwargs)
    return _restore(page, _state(render, stale), options)


def _state(render: _Render, stale: bool) -> str:
    """STALE when the stale page was served (its rebuild may have started), MISS when built."""
    return "STALE" if stale else "MISS" if render.built else "HIT"


async def _aserve(
    options: _ViewOptions, name: str, view: View, request: HttpRequest, args: tuple, kwargs: dict
) -> Any:
    """:func:`_serve` for an ``async def`` view: a hit runs on the event loop alone.

    Nothing on the way to a hit hops to a thread: the user comes from
    ``request.auser()`` (no I/O without a session cookie), the page from the
    store's async twin. A render (a miss) hands its session and CSRF checks to a
    thread, as Django runs sync code from async views.
    """
    backend = options.backend()
    if options.caches_nothing(backend) or not _anyones_request(request):
        return await view(request, *args, **kwargs)
    user = await _asigned_in_user(request)
    if user is not None and not options.per_user:
        return await view(request, *args, **kwargs)
    core = options.core(backend)
    key = _key(name, request, options, user)
    render = _Render(request, options, user is not None)
    if request.method == "HEAD":
        found = _page(await core.aget(key, None))
        if found is None or not render.serves(found):
            return await view(request, *args, **kwargs)
        return _restore(found, "HIT", options)

    async def build() -> Snapshot:
        if threading.get_ident() != render._thread:  # a background refresh on a refresher
            with translation.override(render._language):
                response = await view(request, *args, **kwargs)
                return await sync_to_async(render._after)(response, False)
        render.built = True
        render._before()
        response = await view(request, *args, **kwargs)
        return await sync_to_async(render._after)(response)

    if callable(options.tags) and not inspect.iscoroutinefunction(options.tags):
        build_options = await sync_to_async(options.build_options)(request, args, kwargs)
    else:
        build_options = await options.abuild_options(request, args, kwargs)
    local = in_process(build, PAGES_STAY)
    result, page, stale = await aget_page(core, key, local, 1, HttpResponseBase, **build_options)
    if isinstance(result, HttpResponseBase):
        return result
    if page is None or not render.serves(page):
        return await view(request, *args, **kwargs)
    return _restore(page, _state(render, stale), options)


async def _asigned_in_user(request: HttpRequest) -> Any:
    """Return the signed-in user, or None, as :func:`_signed_in` decides, without a thread
    where Django provides ``request.auser()``.

    Without a session cookie Django finds the anonymous user with no I/O; with
    one, loading the session is Django's own (async) database read.
    """
    auser = getattr(request, "auser", None)
    if auser is None:
        if getattr(request, "user", None) is None or not await sync_to_async(_signed_in)(request):
            return None
        return request.user
    with _session_untouched(request):
        user = await auser()
    return user if user.is_authenticated else None
