"""The response a stored page answers with: its headers, its holes filled, and what it
tells the visitor's browser and the caches in front (see :mod:`.view_pages`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.http import http_date

from mcache.observe.outcome import outcome_headers
from mcache.web.page import age, cdn_cache_control, shared_windows

if TYPE_CHECKING:
    from .view_options import ViewOptions
    from .view_pages import Render, Snapshot

__all__ = ["marked", "restore"]


def marked(response: Any, state: str, reason: str, options: ViewOptions) -> Any:
    """Return ``response`` with the ``X-Cache`` header (``options.header``), its reason and
    ``Cache-Status``."""
    if isinstance(response, HttpResponseBase):
        for name, value in outcome_headers(options.header, state, reason):
            response[name] = value
    return response


def restore(snapshot: Snapshot, state: str, render: Render, reason: str = "") -> HttpResponse:
    """Return the response a stored page answers with, its holes filled for this request."""
    status, headers, content, holes, _, reads_session = snapshot
    options = render.options
    response = HttpResponse(render.fill(content, holes), status=status)
    for name, value in headers:
        response[name] = value
    if holes and response.has_header("Content-Length"):  # filled: another length
        response["Content-Length"] = str(len(response.content))
    if reads_session or holes or render.cookies:  # its cookies, or SessionMiddleware's rule
        patch_vary_headers(response, ["Cookie"])
    if state == "STALE":
        response["Cache-Control"] = "max-age=0"
        response["Expires"] = http_date()
    elif render.cdn and not (holes or reads_session or render.cookies or _private(response)):
        _tell_caches_in_front(response, snapshot, options)  # a page every visitor shares
    if (options.per_user or holes) and not _private(response):
        patch_cache_control(response, private=True)  # a proxy must not share it
    return marked(response, state, reason, options)  # type: ignore[no-any-return]


def _private(response: HttpResponse) -> bool:
    """Return whether the page says ``private``: stored so (its keys did not fit a
    header, or it has holes), or made so by this answer."""
    return "private" in response.get("Cache-Control", "")


def _tell_caches_in_front(response: HttpResponse, snapshot: Snapshot, options: ViewOptions) -> None:
    """Give a shared page the entry's windows in ``Cache-Control`` and ``CDN-Cache-Control``,
    and its ``Age``, so a CDN keeps it exactly as long as mcache does."""
    windows = shared_windows(
        options.core().call_options(ttl=options.ttl, stale_ttl=options.stale_ttl)
    )
    if windows is None:
        return
    patch_cache_control(response, **{name.replace("-", "_"): v for name, v in windows.items()})
    response["CDN-Cache-Control"] = cdn_cache_control(windows)
    response["Age"] = age(snapshot)
