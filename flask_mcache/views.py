"""Whole-response caching for Flask views through ``get_or_build``.

Never cached (the view runs, its response is not stored): methods other than
GET and HEAD, requests with ``Authorization``, responses that are not 200, are
streamed, set a cookie, carry ``Cache-Control: private``, ``no-cache``,
``no-store`` or ``max-age=0``, ``Vary: *`` or a ``Vary`` the key does not
cover, and views that changed the session. Flask saves the session and adds
``Vary: Cookie`` after the view, outside this decorator, so the session is
watched directly: a page whose view read it is shared only with visitors who
have no session cookie. Flask-Caching, the anchor, stores ``Set-Cookie``
responses and keys on the path alone; this does neither.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from flask import Response, current_app, make_response, request, session
from werkzeug.http import http_date

from mcache import Cache
from mcache.build import STALE_SERVED
from mcache.errors import Uncacheable

__all__ = ["cached_view"]

Snapshot = tuple[int, list, bytes, bool]
TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str] | None


def cached_view(
    core: Callable[[], Cache],
    ttl: float | None,
    stale_ttl: float | None,
    tags: TagsSpec,
    vary_on_headers: Sequence[str],
    per_user: Callable[[], Any] | None,
    refresh: str | None,
    header: str | None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Return the decorator ``MCache.cached_view`` hands out (see there)."""
    vary = tuple(sorted({h.lower() for h in vary_on_headers}))

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        name = f"{view.__module__}.{view.__qualname__}"

        @functools.wraps(view)
        def wrapper(**view_args: Any) -> Any:
            if request.method not in ("GET", "HEAD") or "Authorization" in request.headers:
                return view(**view_args)
            cache = core()
            key = _key(name, vary, per_user)
            cookie = current_app.config.get("SESSION_COOKIE_NAME", "session")
            has_session_cookie = cookie in request.cookies
            if request.method == "HEAD":
                found = cache.get(key, None)
                if not _servable(found, has_session_cookie):
                    return view(**view_args)
                return _restore(found, "HIT", header, ttl)
            built: list[bool] = []
            thread = threading.get_ident()

            def build() -> Snapshot:
                if threading.get_ident() == thread:
                    built.append(True)
                accessed = getattr(session, "accessed", False)
                session.accessed = False  # type: ignore[attr-defined]
                response = make_response(view(**view_args))
                reads_session = bool(getattr(session, "accessed", False))
                session.accessed = accessed or reads_session  # type: ignore[attr-defined]
                if getattr(session, "modified", False) or not _cacheable(response, vary):
                    raise Uncacheable(response)
                if reads_session and has_session_cookie:
                    raise Uncacheable(response)
                return (response.status_code, list(response.headers.items()),
                        response.get_data(), reads_session)  # fmt: skip

            view_tags = tags(**view_args) if callable(tags) else tags
            token = STALE_SERVED.set(False)
            try:
                result = cache.get_or_build(
                    key, build, ttl=ttl, stale_ttl=stale_ttl, tags=view_tags, refresh=refresh
                )
                stale = STALE_SERVED.get()
            finally:
                STALE_SERVED.reset(token)
            if isinstance(result, Response):
                return result  # this request's own response, never stored
            if not _servable(result, has_session_cookie):
                return view(**view_args)
            state = "STALE" if stale else "MISS" if built else "HIT"
            return _restore(result, state, header, ttl)

        return wrapper

    return decorate


def _key(name: str, vary: tuple[str, ...], per_user: Callable[[], Any] | None) -> tuple:
    query = tuple((k, tuple(v)) for k, v in sorted(request.args.lists()))
    headers = tuple(request.headers.get(h) for h in vary)
    user = per_user() if per_user is not None else None
    return ("view", name, request.scheme, request.host, request.path, query, headers, user)


def _cacheable(response: Response, vary: tuple[str, ...]) -> bool:
    if response.status_code != 200 or response.is_streamed or "Set-Cookie" in response.headers:
        return False
    control = response.cache_control
    if control.private or control.no_cache or control.no_store or control.max_age == 0:
        return False
    varied = {v.strip().lower() for v in response.headers.get("Vary", "").split(",") if v.strip()}
    return "*" not in varied and varied <= set(vary)


def _servable(snapshot: Any, has_session_cookie: bool) -> bool:
    if type(snapshot) is not tuple or len(snapshot) != 4:
        return False
    return not (snapshot[3] and has_session_cookie)


def _restore(snapshot: Snapshot, state: str, header: str | None, ttl: float | None) -> Response:
    status, headers, body, reads_session = snapshot
    response = Response(body, status=status)
    response.headers.clear()
    for name, value in headers:
        response.headers.add(name, value)
    if ttl and "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = f"max-age={int(ttl)}"
    if reads_session:
        response.vary.add("Cookie")
    if state == "STALE":
        response.headers["Cache-Control"] = "max-age=0"
        response.headers["Expires"] = http_date()
    if header:
        response.headers[header] = state
    return response
