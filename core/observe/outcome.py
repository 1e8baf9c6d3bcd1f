"""What a cached view tells its visitor about the page: HIT, MISS, STALE or BYPASS, and why.

Both adapters answer with the same headers, ``X-Cache`` (or the view's own name) and
``X-Cache-Reason`` for a page not stored (one of :data:`REASONS`), so a site whose hit
ratio is low can read why in the browser, or in the ``mcache.views`` DEBUG log, at most
once a minute per view and reason (see docs/how-to/cache-a-page.md). ``Cache-Status``
says the same in the terms of RFC 9211, which CDNs and browsers' tools read.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Final, TypeVar

from mcache.logs import FailureLog

__all__ = [
    "BYPASS",
    "REASONS",
    "STORE_FAILED",
    "UNCACHED",
    "aasked",
    "asked",
    "cache_status",
    "log_bypass",
    "outcome_headers",
    "reason_header",
]

BYPASS: Final = "BYPASS"

REASONS: Final[dict[str, str]] = {
    "method": "not a GET or HEAD request",
    "authorization": "the request carries an Authorization header",
    "signed-in": "a signed-in visitor, and the view is not keyed per_user",
    "session": "the view wrote the session, or read it for a visitor who has one",
    "csrf": "the page holds this visitor's CSRF token",
    "messages": "the view read or queued flash messages",
    "status": "the response's status is not 200",
    "streaming": "a streamed response",
    "set-cookie": "the response sets a cookie",
    "private": "Cache-Control: private, no-cache, no-store or max-age=0",
    "vary": "Vary: * or a Vary header the page's key does not cover",
    "head": "a HEAD request with no page stored yet (HEAD never stores one)",
    "disabled": "the cache's TIMEOUT is 0 and the view gives no ttl",
    "unless": "the view's unless= callable returned true",
    "foreign": "the page's key held a value that is no page, twice (another client's?)",
    "store-down": "the cache could not be read (X-Cache: MISS; nothing stored)",
    "too-large": "the page is larger than the store takes (its item limit): served, not stored",
    "hole": "a hole this process cannot fill (its template changed?), or one in a header",
}
"""Every reason an adapter may give, with what it means."""

STORE_FAILED: ContextVar[str] = ContextVar("mcache_store_failed", default="")
"""Set when a store call failed in the current context and the cache carried on without
it: ``"store-down"`` (the store could not be reached), else ``"too-large"`` (a value over
its item limit, not stored). Adapters set it to "" before ``get_or_build`` and read it
after (see the page path, :func:`mcache.web.page.serve_steps`)."""

T = TypeVar("T")


def asked(call: Callable[[], T]) -> tuple[T, bool]:
    """Return what ``call`` (a cache call) answered, and whether it found its store down:
    the cache answers a down store as a miss would, and this tells the two apart (a session
    store then asks it nothing more for the request)."""
    reported = STORE_FAILED.set("")
    try:
        answer = call()
        return answer, STORE_FAILED.get() == "store-down"
    finally:
        STORE_FAILED.reset(reported)


async def aasked(call: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
    """:func:`asked`, for a call to await."""
    reported = STORE_FAILED.set("")
    try:
        answer = await call()
        return answer, STORE_FAILED.get() == "store-down"
    finally:
        STORE_FAILED.reset(reported)


UNCACHED: ContextVar[str] = ContextVar("mcache_uncached", default="")
"""The reason (the ``reason`` of :class:`mcache.errors.Uncacheable`) of the value ``get_or_build``
last handed back to the current context without storing it. Adapters set it to ""
before the call and read it after, as :data:`STORE_FAILED`."""

_views_log = logging.getLogger("mcache.views")
_bypasses = FailureLog(_views_log, interval=60.0, level=logging.DEBUG)


def log_bypass(view: str, reason: str, method: str, path: str) -> None:
    """Log at DEBUG that ``view`` did not cache a page, at most once a minute per reason."""
    if _views_log.isEnabledFor(logging.DEBUG):
        _bypasses.log(
            f"{view}:{reason}",
            "page of %s not cached (%s: %s), e.g. %s %s",
            view,
            reason,
            REASONS.get(reason, reason),
            method,
            path,
        )


def reason_header(header: str) -> str:
    """Return the name of the header that carries the reason next to ``header``."""
    return f"{header}-Reason"


def cache_status(state: str, reason: str) -> str:
    """Return the ``Cache-Status`` member (RFC 9211) of a page answered ``state``, ``reason``.

    A hit is ``hit``; a stale page served while it is rebuilt is ``fwd=stale``; a page
    built for this request is ``fwd=uri-miss``, ``stored`` unless a ``reason`` says why
    not; a page not cached at all is ``fwd=bypass`` with its reason as ``detail``.
    """
    if state == "HIT":
        return "mcache; hit"
    if state == "STALE":
        return "mcache; fwd=stale"
    if state == "MISS":
        return f"mcache; fwd=uri-miss; {f'detail={reason}' if reason else 'stored'}"
    return f"mcache; fwd=bypass; detail={reason}"


def outcome_headers(header: str | None, state: str, reason: str) -> list[tuple[str, str]]:
    """Return the headers that tell how a page was answered: ``header`` (``X-Cache``) with
    ``state``, its reason if any, and ``Cache-Status``; none when ``header`` is None."""
    if not header:
        return []
    headers = [(header, state), ("Cache-Status", cache_status(state, reason))]
    if reason:
        headers.append((reason_header(header), reason))
    return headers
