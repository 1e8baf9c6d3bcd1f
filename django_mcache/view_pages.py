"""Rendering a cached view's page: what may be cached, whose page it is, what is stored.

The rules :func:`~django_mcache.views.cached_view` applies around a render
(the request's and the response's, Django's cache middleware's and the
stricter ones a shared cache needs), the key a page is stored under and the
snapshot stored; :mod:`.page_responses` makes the response again from it.
"""

from __future__ import annotations

import contextlib
import copy
import re
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.urls import get_script_prefix, get_urlconf, set_script_prefix, set_urlconf
from django.utils import translation
from django.utils.cache import (
    get_max_age,
    has_vary_header,
    patch_cache_control,
    patch_response_headers,
)
from django.utils.functional import LazyObject, SimpleLazyObject, empty

from mcache.errors import Uncacheable
from mcache.sansio.steps import Steps
from mcache.web.holes import (
    HoleCollector,
    check_uncompressed,
    collecting,
    fill_holes,
    holes_in_headers,
)
from mcache.web.page import PageBuild, cookie_values
from mcache.web.surrogates import KeysTooLong, page_surrogate

from .holes import fill_hole, known_hole
from .view_options import kept_query

if TYPE_CHECKING:
    from .view_options import ViewOptions

__all__ = [
    "Render",
    "Snapshot",
    "View",
    "anyones_reason",
    "noting_tags",
    "page_key",
    "session_untouched",
    "signed_in",
    "user_read_before",
]

View = Callable[..., Any]
PRIVATE_DIRECTIVES = frozenset({"private", "no-cache", "no-store"})
_CSRF_FLAGS = ("CSRF_COOKIE_NEEDS_UPDATE", "CSRF_COOKIE_USED")
"""What ``get_token`` marks on a request (Django 4.1 and later use the first)."""
_LIST_ITEMS = re.compile(r"\s*,\s*")
"""How ``Cache-Control`` and ``Vary`` separate their items (Django 6.1 dropped its own)."""


# -- what may be cached ------------------------------------------------------------------------


def _has_session_cookie(request: HttpRequest) -> bool:
    return settings.SESSION_COOKIE_NAME in request.COOKIES


def anyones_reason(request: HttpRequest) -> str | None:
    """Return why the request is not a GET or HEAD without credentials, or None."""
    if request.method not in ("GET", "HEAD"):
        return "method"
    if "HTTP_AUTHORIZATION" in request.META:
        return "authorization"  # credentials: the answer is this caller's
    return None


def signed_in(request: HttpRequest) -> bool:
    """Return whether the request has a signed-in user, however it was authenticated."""
    with session_untouched(request):
        user = getattr(request, "user", None)
        return user is not None and bool(user.is_authenticated)


def user_read_before(request: HttpRequest) -> bool:
    """Return whether something before the view looked at the user: read the session,
    evaluated ``request.user`` (or awaited ``request.auser()``), or set a user itself."""
    session = getattr(request, "session", None)
    if (session is not None and session.accessed) or hasattr(request, "_acached_user"):
        return True
    user = request.__dict__.get("user")
    if isinstance(user, LazyObject):
        return user._wrapped is not empty  # type: ignore[attr-defined]
    return user is not None


@contextlib.contextmanager
def session_untouched(request: HttpRequest) -> Iterator[None]:
    """Put the session's ``accessed`` flag back after the block: looking at the user
    loads the session, and that look is ours, not the view's."""
    session = getattr(request, "session", None)
    accessed = getattr(session, "accessed", False)
    try:
        yield
    finally:
        if session is not None:
            session.accessed = accessed


def _refusal(response: HttpResponseBase, options: ViewOptions, cookie_keyed: bool) -> str | None:
    """Apply the cache middleware's rules, and refuse any response that sets a cookie;
    return why the response may not be stored, or None. ``cookie_keyed``: the page's key
    covers the cookies it may depend on (its user, or the cookies a site declared)."""
    if response.streaming:
        return "streaming"
    if response.status_code != 200:
        return "status"
    if response.cookies:
        return "set-cookie"
    directives = {
        d.split("=", 1)[0].strip().lower()
        for d in _LIST_ITEMS.split(response.get("Cache-Control", ""))
        if d.strip()
    }
    if directives & PRIVATE_DIRECTIVES or get_max_age(response) == 0:
        return "private"
    if has_vary_header(response, "*"):
        return "vary"
    allowed = set(options.vary) | ({"cookie"} if cookie_keyed else set())
    varied = {h.strip().lower() for h in _LIST_ITEMS.split(response.get("Vary", "")) if h.strip()}
    return None if varied <= allowed else "vary"  # another Vary would serve the wrong variant


class Render:
    """One request's render of the view, watching what it did to the session and CSRF cookie.

    Session and CSRF middleware act after the view returns, outside this
    decorator, so their cookies never show on the response seen here. A view
    that asked for a CSRF token, or changed the session, answered this visitor
    alone; one that read the session is only shared with visitors who have no
    session (for them its content cannot depend on one).
    """

    def __init__(self, request: HttpRequest, options: ViewOptions, user: Any, backend: Any) -> None:
        self.request, self.options = request, options
        self.user, self.signed_in = user, user is not None
        self.cookies = options.significant_cookies(backend)
        self.query = options.query_rule(backend)
        self.cdn = options.sends_cdn(backend) and not options.per_user
        self.surrogate: str | None = getattr(backend, "page_surrogate", None)
        self.tags: list[str] = []
        """The page's own tags, once :func:`noting_tags` has seen its options."""
        self.session = getattr(request, "session", None)
        self._csrf_flags = {k: request.META[k] for k in _CSRF_FLAGS if k in request.META}
        self._accessed = False
        self.user_read = False
        # A refresher thread sees none of the request's thread-bound state (asgiref
        # hides it from other threads), so what a render depends on is carried over.
        self.language = translation.get_language()
        self._script_prefix = get_script_prefix()
        self._urlconf = get_urlconf()

    def build(self, view: View, args: tuple, kwargs: dict, on_loop: bool) -> PageBuild:
        """The page's build: in the request's thread, or (a background refresh) in a
        refresher's; an ``async def`` view's (``on_loop``) hands its checks, which may
        touch the session's database, to a thread."""
        call = partial(view, self.request, *args, **kwargs)
        if on_loop:
            later = partial(self._detached_call, view, args, kwargs, True)
            return PageBuild(partial(self._arender, call), later)
        return PageBuild(
            partial(self._render, call), partial(self._detached_call, view, args, kwargs, False)
        )

    def _detached_call(self, view: View, args: tuple, kwargs: dict, on_loop: bool) -> Any:
        """Re-render in a refresher's thread over a copy of the request: the request's own
        thread goes on with it (filling the stale page's holes asks for a CSRF token, which
        flags the request), and neither may see the other's marks."""
        render = copy.copy(self)
        render.request = copy.copy(self.request)
        meta = {k: v for k, v in self.request.META.items() if k not in _CSRF_FLAGS}
        render.request.META = {
            **meta,
            **self._csrf_flags,
        }  # as they were before this request's fill
        render.user_read = False
        call = partial(view, render.request, *args, **kwargs)
        return render._arerender(call) if on_loop else render._rerender(call)

    def _render(self, call: Callable[[], Any]) -> Snapshot:
        self.before()
        with self._watched() as holes:
            return self.after(call(), holes)

    def _rerender(self, call: Callable[[], Any]) -> Snapshot:
        close_old_connections()  # a refresher thread keeps no request cycle of its own
        set_script_prefix(self._script_prefix)
        set_urlconf(self._urlconf)
        try:
            with translation.override(self.language), self._watched() as holes:
                return self.after(call(), holes, watch_session=False)
        finally:
            set_urlconf(None)
            close_old_connections()

    async def _arender(self, call: Callable[[], Any]) -> Snapshot:
        self.before()
        with self._watched() as holes:
            return await sync_to_async(self.after)(await call(), holes)

    async def _arerender(self, call: Callable[[], Any]) -> Snapshot:
        with translation.override(self.language), self._watched() as holes:
            return await sync_to_async(self.after)(await call(), holes, False)

    @contextlib.contextmanager
    def _watched(self) -> Iterator[HoleCollector]:
        """Collect the render's holes, the view seeing only the query parameters the key
        keeps; on a page shared with signed-in visitors (a view with ``hole_context``), note
        whether anything outside a hole read the user."""
        collector = HoleCollector()
        with collecting(collector), kept_query(self.request, self.query):
            if self.options.hole_context is None or not hasattr(self.request, "user"):
                yield collector
                return
            from django.contrib.auth.models import AnonymousUser  # the request has a user

            request, saved = self.request, dict(self.request.__dict__)
            user = self.user if self.user is not None else AnonymousUser()  # known already

            def read() -> Any:
                self.user_read = True
                return user

            async def aread() -> Any:
                return read()

            request.user = SimpleLazyObject(read)
            if "auser" in saved:
                request.auser = aread
            try:
                yield collector
            finally:
                for name in ("user", "auser"):
                    if name in saved:
                        setattr(request, name, saved[name])

    def before(self) -> None:
        if self.session is not None:
            self._accessed = self.session.accessed
            self.session.accessed = False

    def after(self, response: Any, holes: HoleCollector, watch_session: bool = True) -> Snapshot:
        response = _render(response)
        # On a re-render (``watch_session`` False) the request's own reading counts.
        reads_session = self.session is not None and self.session.accessed
        if self.session is not None and watch_session:
            self.session.accessed = self._accessed or reads_session
        reads_session = reads_session or self.user_read  # the user comes from the session
        if holes.recipes:
            check_uncompressed(response.items())
        reason = self._refusal(response, reads_session)
        if reason is None and holes.recipes and holes_in_headers(response.items(), holes):
            reason = "hole"  # a header's value: only a body is filled from the store
        if reason is not None:
            if holes.recipes:
                with collecting(None):  # a hole's own tokens and holes are this visitor's
                    _fill_response(response, holes.stored(), self.fill)
            raise Uncacheable(response, reason)
        if not (holes.recipes or self.options.per_user):  # not sent private: may be kept in front
            self._tell_its_keys(response)
        return _snapshot(response, self.options, holes.stored(), reads_session)

    def _tell_its_keys(self, response: HttpResponseBase) -> None:
        """Name the page's surrogate keys for the cache in front (stored with the page);
        a page with too many to name is sent private, as a purge could miss it."""
        try:
            header = page_surrogate(self.options.core(), self.surrogate, self.tags)
        except KeysTooLong:
            patch_cache_control(response, private=True)
            return
        if header is not None:
            response[header[0]] = header[1]

    def fill(self, body: bytes, holes: list[str]) -> bytes:
        """Return ``body`` with its ``holes`` filled for this request."""
        fill = partial(fill_hole, self.request, self.options.hole_context or {})
        return fill_holes(body, holes, fill)

    def _refusal(self, response: Any, reads_session: bool) -> str | None:
        if self.user_read and self.signed_in and not self._keyed_by_user():
            return "signed-in"  # outside a hole: the page is this visitor's
        if self.session is not None and self.session.modified:
            return "session"
        if self.request.META.get("CSRF_COOKIE_NEEDS_UPDATE"):
            return "csrf"  # the page holds this visitor's CSRF token
        if _messages_used(self.request):
            return "messages"  # flash messages are this visitor's (and a cookie)
        keyed_by_user = self._keyed_by_user()
        if reads_session and _has_session_cookie(self.request) and not keyed_by_user:
            return "session"
        return _refusal(response, self.options, keyed_by_user or self.cookies is not None)

    def _keyed_by_user(self) -> bool:
        return self.options.per_user and self.signed_in

    def refusal(self, snapshot: Any) -> str | None:
        """Return why a stored page may not answer this request, or None."""
        if snapshot[5] and not self._keyed_by_user():  # it read the session or the user
            if self.signed_in:
                return "signed-in"
            if _has_session_cookie(self.request):
                return "session"
        if not all(known_hole(recipe) for recipe in snapshot[3][1:]):
            return "hole"
        return None


# -- keys and snapshots ------------------------------------------------------------------------

Snapshot = tuple[int, list, bytes, list, float, bool]
"""What is stored: status, headers, body, holes, when it was built, and whether the view
read the session (or, outside a hole, the user)."""


def page_key(name: str, request: HttpRequest, render: Render, user: Any) -> tuple[Any, ...]:
    """Return a page's key; ``user`` is the signed-in user a ``per_user`` page is keyed by."""
    options = render.options
    query = (
        render.query.key(request.GET.lists())
        if "GET" in request.__dict__ or request.META.get("QUERY_STRING")
        else ()  # no query, and none set on the request: no QueryDict to parse
    )
    headers = tuple(request.META.get("HTTP_" + h.upper().replace("-", "_")) for h in options.vary)
    language = translation.get_language() if settings.USE_I18N else None
    user_id = user.pk if options.per_user and user is not None else None
    where = (request.scheme, request.get_host(), request.path)
    cookies = cookie_values(render.cookies, request.COOKIES)
    return ("view", name, *where, query, headers, language, user_id, cookies)


def noting_tags(options: Steps[dict[str, Any]], render: Render) -> Steps[dict[str, Any]]:
    """Resolve a page's ``get_or_build`` options, noting its tags on ``render`` (its build
    names them to the cache in front)."""
    resolved = yield from options
    render.tags = list(resolved.get("tags") or ())
    return resolved


def _snapshot(
    response: HttpResponseBase, options: ViewOptions, holes: list[str], reads_session: bool
) -> Snapshot:
    """Return what is stored (a rendered response's parts, never the object)."""
    if options.ttl is not None:
        patch_response_headers(response, int(options.ttl))
    if holes:  # every answer of it is one visitor's: said once here, not on every hit
        patch_cache_control(response, private=True)
    body = options.core().codec.storable_bytes(response.content)  # JSON keeps no bytes
    return (response.status_code, list(response.items()), body, holes, time.time(), reads_session)


def _fill_response(
    response: HttpResponseBase, holes: list[str], fill: Callable[[bytes, list[str]], bytes]
) -> None:
    """Fill the holes of a response that is not stored, in its headers and its body."""
    for name, value in list(response.items()):
        if holes_in_headers([(name, value)], holes):
            response[name] = fill(value.encode(), holes).decode()
    if not response.streaming:
        response.content = fill(response.content, holes)
        if response.has_header("Content-Length"):
            response["Content-Length"] = str(len(response.content))


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
