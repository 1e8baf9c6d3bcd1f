"""``OnlineVisitorsMiddleware``: distinct visitors over a sliding window, site-wide and per scope.

A visitor is their session key (read from the cookie: no session is loaded for
it), else an id in a signed cookie set once, derived from the address and user
agent so that a client keeping no cookie still counts once. Logging in changes
the session key, so that visitor may count twice within the window. Settings:
``MCACHE_ONLINE_WINDOW``, ``MCACHE_ONLINE_SLOTS``, ``MCACHE_ROBOTS``, and
``MCACHE_ONLINE_NOISE`` (the counts ``{% online_count %}`` shows, blurred by that fraction).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core import signing
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse

from mcache.features.counters import ROBOTS, is_robot

from .aliases import counters_alias

__all__ = ["OnlineVisitorsMiddleware", "count_online", "online_counter"]

COOKIE = "mcache_visitor"
SALT = "django_mcache.online"


def online_counter(scope: str = "site", using: str | None = None) -> Any:
    """Return the online counter of ``scope`` as the settings shape it, for counting and showing.

    The middleware and ``{% online_count %}`` must agree on its cache, window
    and slots: a counter read with another window has other keys.
    """
    slots = int(getattr(settings, "MCACHE_ONLINE_SLOTS", 6))
    noise = getattr(settings, "MCACHE_ONLINE_NOISE", 0.0)
    return caches[counters_alias(using)].online_counter(scope, _window(), slots, noise=noise)


def _window() -> int:
    return int(getattr(settings, "MCACHE_ONLINE_WINDOW", 300))


def _visitor(request: HttpRequest) -> tuple[str, bool]:
    """Return the visitor's id and whether the id cookie must be set."""
    session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if session_key:
        return "s:" + session_key, False
    try:
        return "c:" + request.get_signed_cookie(COOKIE, salt=SALT), False
    except (KeyError, signing.BadSignature):
        return "c:" + _derived_id(request), True


def _derived_id(request: HttpRequest) -> str:
    """Return an id from the address and user agent, keyed with SECRET_KEY, so that a
    client that keeps no cookies counts once, not once per request."""
    seen = f"{request.META.get('REMOTE_ADDR', '')}|{request.META.get('HTTP_USER_AGENT', '')}"
    key = settings.SECRET_KEY.encode()[:64]
    return hashlib.blake2b(seen.encode(), key=key, digest_size=12).hexdigest()


def count_online(request: HttpRequest, scope: str) -> None:
    """Count this request's visitor in ``scope`` as well (call it from a view)."""
    visitor = getattr(request, "mcache_visitor", None)
    if visitor is not None:
        online_counter(scope).hit(visitor)


class OnlineVisitorsMiddleware:
    """Counts every human visitor once per window in the "site" online counter.

    Sync and async capable: under ASGI with async views Django hands it the
    async chain and it awaits the counter on the store's async twin, so the
    count costs no thread hop per request.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        visitor, new_cookie = _seen(request)
        if visitor is not None:
            online_counter("site").hit(visitor)
        return _with_cookie(self.get_response(request), new_cookie)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        visitor, new_cookie = _seen(request)
        if visitor is not None:
            await online_counter("site").ahit(visitor)
        return _with_cookie(await self.get_response(request), new_cookie)


def _seen(request: HttpRequest) -> tuple[str | None, str | None]:
    """Return the visitor to count (None for a robot) and the id cookie to set, if any."""
    robots = getattr(settings, "MCACHE_ROBOTS", ROBOTS)
    if is_robot(request.META.get("HTTP_USER_AGENT", ""), robots):
        return None, None
    visitor, is_new = _visitor(request)
    request.mcache_visitor = visitor  # type: ignore[attr-defined]
    return visitor, visitor[2:] if is_new else None


def _with_cookie(response: HttpResponse, new_cookie: str | None) -> HttpResponse:
    if new_cookie is not None:
        response.set_signed_cookie(
            COOKIE,
            new_cookie,
            salt=SALT,
            max_age=_window() * 4,
            httponly=True,
            samesite="Lax",
            secure=settings.SESSION_COOKIE_SECURE,
        )
    return response
