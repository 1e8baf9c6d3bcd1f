"""What ``@cached_view`` tells an edge (:mod:`mcache.edge`) around the application.

A page answered from the cache or stored for this request, that every anonymous
visitor may be given (no holes, not per user), is recorded with how its key is made
from a request. Not when ``LocaleMiddleware`` chooses each request's language: the
key holds the language, and the edge answers before any middleware decides it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http.cookie import parse_cookie

from mcache import Cache
from mcache.edge.record import CHANNEL, PageRecord, leave_record

from .view_pages import Render

__all__ = ["tell_the_edge"]

LOCALE_MIDDLEWARE = "django.middleware.locale.LocaleMiddleware"


def tell_the_edge(
    render: Render, core: Cache, key: tuple[Any, ...], page: tuple, state: str
) -> None:
    """Record ``page``, served to ``render``'s request, for an edge listening (if one is)."""
    request, options = render.request, render.options
    channel = getattr(request, "scope", None)  # ASGI; under WSGI, META is the environ
    if channel is None:
        channel = request.META
    if CHANNEL not in channel or state not in ("HIT", "MISS") or page[3] or options.per_user:
        return
    if LOCALE_MIDDLEWARE in settings.MIDDLEWARE:
        return
    ssl_header = settings.SECURE_PROXY_SSL_HEADER
    record = PageRecord(
        cache=core,
        key=key,
        page=page,
        prefix=key[:6],
        vary_environ=tuple("HTTP_" + h.upper().replace("-", "_") for h in options.vary),
        middle=key[7:9],
        cookies=render.cookies,
        private_cookies=frozenset({settings.SESSION_COOKIE_NAME}),
        parse_cookies=parse_cookie,
        header=options.header,
        tags=render.tags if request.method == "GET" else None,  # a HEAD resolves no options
        signature_environ=(ssl_header[0],) if ssl_header else (),
    )
    leave_record(channel, record)
