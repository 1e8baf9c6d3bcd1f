"""What Flask's ``cached_view`` tells an edge (:mod:`mcache.edge`) around the application.

A page answered from the cache or stored for this request, that every anonymous visitor
may be given (no holes, no ``per_user``, no ``unless``, keyed by its address), is recorded
with how its key is made from a request. A visitor with the session cookie, or Flask-Login's
remember cookie, is always left to the application.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import current_app, request
from werkzeug.http import parse_cookie

from mcache import Cache
from mcache.edge.record import CHANNEL, PageRecord, leave_record

__all__ = ["tell_the_edge"]


def tell_the_edge(
    core: Cache,
    key: tuple[Any, ...],
    page: tuple,
    state: str,
    settings: Any,
    tags: list[str] | None,
) -> None:
    """Record ``page`` for an edge listening on this request (if one is)."""
    environ = request.environ
    if CHANNEL not in environ or state not in ("HIT", "MISS") or page[3]:
        return
    if settings.per_user is not None or settings.unless is not None or settings.key is not None:
        return
    app = current_app
    private = {
        app.session_interface.get_cookie_name(app),
        app.config.get("REMEMBER_COOKIE_NAME", "remember_token"),
    }
    record = PageRecord(
        cache=core,
        key=key,
        page=page,
        prefix=key[:7],
        vary_environ=tuple(_environ_name(h) for h in settings.vary),
        middle=(None,),
        cookies=settings.significant_cookies(),
        private_cookies=frozenset(private),
        parse_cookies=_cookies,
        header=settings.header,
        tags=tags,
    )
    leave_record(environ, record)


def _environ_name(header: str) -> str:
    """Return where werkzeug's request headers find ``header`` in the environ."""
    name = header.upper().replace("-", "_")
    return name if name in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{name}"


def _cookies(header: str) -> Mapping[str, str]:
    return parse_cookie(header)
