"""Whole-response caching for Flask views through ``get_or_build``.

A response that belongs to one visitor (a cookie set, a session changed, ``private``,
``Authorization``…) is never stored, unlike Flask-Caching's, and the key covers the query
string too: docs/how-to/cache-a-page.md lists every case, :data:`mcache.observe.outcome.REASONS`
names them.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import io
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from flask import Response, current_app, make_response, request
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.http import http_date
from werkzeug.wrappers import Response as BaseResponse

from mcache import Cache
from mcache.errors import Uncacheable
from mcache.features.memoize import refuse_instances_of
from mcache.model.dependencies import carried
from mcache.observe.outcome import BYPASS, log_bypass, outcome_headers
from mcache.sansio.steps import CallBuilder, one, perform, run_steps
from mcache.web.holes import (
    HoleCollector,
    check_uncompressed,
    collecting,
    fill_holes,
    holes_in_headers,
)
from mcache.web.page import (
    PageBuild,
    PageSettings,
    age,
    cdn_cache_control,
    cookie_values,
    serve_steps,
    shared_windows,
)
from mcache.web.query import DEFAULT_QUERY, QueryRule
from mcache.web.surrogates import KeysTooLong, page_surrogate

from .edge_pages import tell_the_edge
from .holes import (
    HoleContext,
    SharedRender,
    fill_hole,
    held_session,
    known_hole,
    session_read_before_view,
)
from .view_order import remember

__all__ = ["ViewSettings", "cached_view", "refused_response"]

Snapshot = tuple[int, list, bytes, list, float, bool]
"""What is stored: status, headers, body, holes, when it was built (see mcache.web.page),
and whether its render read the session (then every answer says ``Vary: Cookie``, and a
page shared with signed-in visitors read it outside its holes)."""
TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str] | None


@dataclass(frozen=True)
class ViewSettings(PageSettings):
    """What ``MCache.cached_view`` was given, checked once at decoration."""

    dependencies: tuple[str, ...] = ()
    per_user: Callable[[], Any] | None = None
    unless: Callable[[], Any] | None = None
    key: Callable[..., Any] | None = None
    hole_context: HoleContext | None = None

    def page_options(self, view_args: dict[str, Any]) -> dict[str, Any]:
        tags = self.tags(**view_args) if callable(self.tags) else self.tags
        if not self.dependencies:
            return self.options(tags, ())
        from .sqlalchemy import watched_tags

        return self.options(tags, watched_tags(self.dependencies, "mcache.cached_view"))

    def significant_cookies(self) -> tuple[str, ...] | None:
        """Return the cookies a page's key covers: the view's, else ``MCACHE_PAGE_COOKIES``."""
        if self.cookies is not None:
            return self.cookies
        return current_app.extensions.get("mcache.page_cookies")  # type: ignore[no-any-return]

    def query_rule(self) -> QueryRule:
        """Return the query parameters a page's key keeps: ``query``, else
        ``MCACHE_PAGE_QUERY``, else all but the analytics ones."""
        if self.query is not None:
            return self.query
        return current_app.extensions.get("mcache.page_query") or DEFAULT_QUERY

    def sends_cdn(self) -> bool:
        """Return whether a shared page tells caches in front its windows (``cdn``, else
        ``MCACHE_PAGE_CDN``)."""
        if self.per_user is not None:
            return False
        return (
            self.cdn if self.cdn is not None else current_app.config.get("MCACHE_PAGE_CDN", False)
        )


def cached_view(
    core: Callable[[], Cache], settings: ViewSettings, check_routes: Callable[[], None]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Return the decorator ``MCache.cached_view`` hands out (see there).

    ``check_routes()`` runs once the view is wrapped: the view may already be
    routed, uncached (see :mod:`flask_mcache.view_order`).
    """
    header = settings.header

    def decorate(async_or_sync_view: Callable[..., Any]) -> Callable[..., Any]:
        name = f"{async_or_sync_view.__module__}.{async_or_sync_view.__qualname__}"

        def view(**view_args: Any) -> Any:
            # An ``async def`` view runs as Flask runs it (``ensure_sync``: on a loop
            # of its own), so the wrapper stays sync and a hit never starts a loop.
            return current_app.ensure_sync(async_or_sync_view)(**view_args)

        def bypassed(response: Response, reason: str) -> Response:
            log_bypass(name, reason, request.method, request.path)
            return _marked(response, BYPASS, reason, header)

        @functools.wraps(async_or_sync_view)
        def wrapper(**view_args: Any) -> Any:
            reason = _bypass_reason(settings)
            if reason is not None:
                return bypassed(make_response(view(**view_args)), reason)
            key = _key(name, settings, view_args)
            app = current_app._get_current_object()  # type: ignore[attr-defined]
            # The options, once resolved: the render names their tags to the cache in
            # front, the edge reads them too, and a callable ``tags`` runs once per request.
            resolved: dict[str, Any] = {}
            # A background refresh: the request is over, so the view runs in a context of
            # its own, in an empty set of context variables (the copy the refresher carries
            # still holds the ended request's contexts), without the visitor's cookies or
            # credentials; its teardown runs. The build it is part of is carried over, so
            # its fragments' tags reach it.
            detached = functools.partial(
                _render_detached, app, request.environ, view, view_args, settings, resolved
            )
            build = PageBuild(
                functools.partial(_render, view, view_args, settings, resolved),
                lambda: contextvars.Context().run(carried(detached)),
            )
            options = one(CallBuilder(functools.partial(_noted, resolved, settings, view_args)))
            head = request.method == "HEAD"
            steps = serve_steps(
                core(), key, head, options, build, 1, Response, _refusal_of(settings)
            )
            served = run_steps(steps, perform)
            if served.page is not None:
                if not served.reason:
                    tags = resolved.get("tags")
                    tell_the_edge(core(), key, served.page, served.state, settings, tags)  # type: ignore[arg-type]
                return _restore(served.page, served.state, settings, served.reason)  # type: ignore[arg-type]
            own = served.response
            response = own if own is not None else make_response(view(**view_args))
            return bypassed(response, served.reason)

        remember(async_or_sync_view)
        check_routes()
        return wrapper

    return decorate


refused_response = refuse_instances_of(BaseResponse, "@mcache.cached_view")
"""A result ``@mcache.cached`` must not memoize: a Flask (werkzeug) response."""


def _noted(resolved: dict[str, Any], settings: ViewSettings, view_args: dict) -> dict[str, Any]:
    """Resolve the page's options into ``resolved`` (where the edge finds its tags)."""
    resolved.update(settings.page_options(view_args))
    return resolved


def _bypass_reason(settings: ViewSettings) -> str | None:
    """Return why this request's page may neither come from nor go to the cache, or None.

    What a view did with Flask's cookie session cannot be told reliably from outside
    it (before Flask 3.1 many reads leave no trace), so a visitor who has one is only
    served, and only stored, pages keyed by ``per_user``.
    """
    if request.method not in ("GET", "HEAD"):
        return "method"
    if "Authorization" in request.headers:
        return "authorization"
    if settings.unless is not None and settings.unless():
        return "unless"
    if settings.per_user is not None:
        return None
    if settings.hole_context is not None and not session_read_before_view():
        return None
    return "session" if _has_session_cookie() else None


def _has_session_cookie() -> bool:
    return current_app.session_interface.get_cookie_name(current_app) in request.cookies


def _refusal_of(settings: ViewSettings) -> Callable[[tuple], str | None]:
    def refusal(page: tuple) -> str | None:
        """Return why a stored page may not answer this request, or None."""
        if page[5] and settings.per_user is None and _has_session_cookie():
            return "session"
        return None if all(known_hole(recipe) for recipe in page[3][1:]) else "hole"

    return refusal


def _detached_environ(environ: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of the request's WSGI environ a background re-render can use alone."""
    copy = {k: v for k, v in environ.items() if k not in ("HTTP_COOKIE", "HTTP_AUTHORIZATION")}
    copy["wsgi.input"] = io.BytesIO(b"")
    copy["CONTENT_LENGTH"] = "0"
    return copy


def _render_detached(
    app: Any,
    environ: dict[str, Any],
    view: Callable[..., Any],
    view_args: dict,
    settings: ViewSettings,
    resolved: dict[str, Any],
) -> Snapshot:
    with app.request_context(_detached_environ(environ)):
        return _render(view, view_args, settings, resolved)


def _render(
    view: Callable[..., Any], view_args: dict, settings: ViewSettings, resolved: dict[str, Any]
) -> Snapshot:
    """Render the page to store, collecting its holes (see :mod:`flask_mcache.holes`);
    ``resolved``: the page's options, resolved before any build starts."""
    holes = HoleCollector()
    shared_render = SharedRender(settings.hole_context is not None)
    with collecting(holes), kept_query(settings), shared_render as shared:
        response = make_response(view(**view_args))
    if shared.wrote:
        # The view writes the session: rendered again with this visitor's, and not stored.
        raise Uncacheable(make_response(view(**view_args)), "session")
    if holes.recipes:
        check_uncompressed(response.headers.items())
    held = held_session()
    reason = "session" if getattr(held, "modified", False) else _refusal(response, settings)
    if reason is None and holes.recipes and holes_in_headers(response.headers.items(), holes):
        reason = "hole"  # a header's value: only a body is filled from the store
    if reason is not None:  # "session": e.g. a flash or a login, for which Flask sets a cookie
        if holes.recipes:
            _fill_response(response, holes.stored(), settings)
        raise Uncacheable(response, reason)
    if not (holes.recipes or settings.per_user):  # not sent private: may be kept in front
        _tell_its_keys(response, resolved["tags"])
    body = current_app.extensions["mcache"].codec.storable_bytes(response.get_data())
    headers = list(response.headers.items())
    # Read by the view (the shared render's own session), or by anything before it: then
    # every answer says Vary: Cookie, as Flask says on the answers that ran the view.
    reads_session = shared.read or bool(getattr(held, "accessed", False))
    return (response.status_code, headers, body, holes.stored(), time.time(), reads_session)


@contextlib.contextmanager
def kept_query(settings: ViewSettings) -> Iterator[None]:
    """Show the view, while it renders a page to store, only the query parameters its key
    keeps (``request.args``, and ``query_string`` for ``full_path``); put them back after.
    A view with a ``key`` function makes its own key, so it sees the whole query."""
    rule = settings.query_rule()
    if settings.key is not None or not request.query_string or not rule.drops_any(request.args):
        yield
        return
    whole, raw = request.args, request.query_string
    shown = rule.query_string(whole.lists())
    request.args = ImmutableMultiDict(parse_qsl(shown, keep_blank_values=True))
    request.query_string = shown.encode("ascii")
    try:
        yield
    finally:
        request.args, request.query_string = whole, raw


def _tell_its_keys(response: Response, tags: list[str]) -> None:
    """Name a shared page's surrogate keys for the cache in front (stored with the page);
    a page with too many to name is sent private, as a purge could miss it."""
    kind = current_app.extensions.get("mcache.page_surrogate")
    try:
        header = page_surrogate(current_app.extensions["mcache"], kind, tags)
    except KeysTooLong:
        response.cache_control.private = True
        return
    if header is not None:
        response.headers[header[0]] = header[1]


def _fill_response(response: Response, holes: list[str], settings: ViewSettings) -> None:
    """Fill the holes of a response that is not stored, in its headers and its body."""
    for name, value in list(response.headers.items()):
        if holes_in_headers([(name, value)], holes):
            response.headers[name] = _filled(value.encode(), holes, settings).decode()
    if not response.is_streamed:
        response.set_data(_filled(response.get_data(), holes, settings))


def _filled(body: bytes, holes: list[str], settings: ViewSettings) -> bytes:
    return fill_holes(body, holes, functools.partial(fill_hole, settings.hole_context or {}))


def _key(name: str, settings: ViewSettings, view_args: dict[str, Any]) -> tuple:
    """Return the page's key: the request's site, its path and query (or what the view's
    ``key`` function returns instead), the ``vary`` headers, and ``per_user()``."""
    if settings.key is None:
        query = settings.query_rule().key(request.args.lists())
        page: tuple = (request.root_path, request.path, query)
    else:
        page = ("key", settings.key(**view_args))
    headers = tuple(request.headers.get(h) for h in settings.vary)
    user = settings.per_user() if settings.per_user is not None else None
    cookies = cookie_values(settings.significant_cookies(), request.cookies)
    return ("view", name, request.scheme, request.host, *page, headers, user, cookies)


def _refusal(response: Response, settings: ViewSettings) -> str | None:
    """Return why ``response`` may not be stored (a reason of :mod:`mcache.observe.outcome`), or
    None."""
    if response.is_streamed:
        return "streaming"
    if response.status_code != 200:
        return "status"
    if "Set-Cookie" in response.headers:
        return "set-cookie"
    control = response.cache_control
    if control.private or control.no_cache or control.no_store or control.max_age == 0:
        return "private"
    varied = {v.strip().lower() for v in response.headers.get("Vary", "").split(",") if v.strip()}
    cookie_keyed = settings.per_user is not None or settings.significant_cookies() is not None
    allowed = {*settings.vary, *(("cookie",) if cookie_keyed else ())}
    return None if "*" not in varied and varied <= allowed else "vary"


def _marked(response: Response, state: str, reason: str, header: str | None) -> Response:
    """Return ``response`` with the ``X-Cache`` header (``header``), its reason if any, and
    ``Cache-Status``."""
    for name, value in outcome_headers(header, state, reason):
        response.headers[name] = value
    return response


def _restore(snapshot: Snapshot, state: str, settings: ViewSettings, reason: str = "") -> Response:
    status, headers, body, holes, _, reads_session = snapshot
    response = Response(status=status)
    response.headers.clear()
    for name, value in headers:
        response.headers.add(name, value)
    response.set_data(_filled(body, holes, settings))  # and its Content-Length
    if settings.ttl and "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = f"max-age={int(settings.ttl)}"
    cookie_keyed = settings.significant_cookies()
    if holes or reads_session or cookie_keyed:
        response.vary.add("Cookie")
    if state == "STALE":
        response.headers["Cache-Control"] = "max-age=0"
        response.headers["Expires"] = http_date()
    elif settings.sends_cdn() and not (
        holes or reads_session or cookie_keyed or response.cache_control.private
    ):
        _tell_caches_in_front(response, snapshot, settings)  # a page every visitor shares
    if holes or settings.per_user is not None:
        response.cache_control.private = True  # one visitor's: a proxy must not share it
    return _marked(response, state, reason, settings.header)


def _tell_caches_in_front(response: Response, snapshot: Snapshot, settings: ViewSettings) -> None:
    """Give a shared page the entry's windows in ``Cache-Control`` and ``CDN-Cache-Control``,
    and its ``Age``, so a CDN keeps it exactly as long as mcache does."""
    core = current_app.extensions["mcache"]
    windows = shared_windows(core.call_options(ttl=settings.ttl, stale_ttl=settings.stale_ttl))
    if windows is None:
        return
    for name, value in windows.items():
        response.cache_control[name] = str(value)
    response.headers["CDN-Cache-Control"] = cdn_cache_control(windows)
    response.headers["Age"] = age(snapshot)
