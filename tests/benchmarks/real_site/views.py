"""The blog's views, decorated as the configuration (``settings.SITE``) says, and the
render counter every configuration shares.

A render is counted where it happens, in the view, with a raw ``incr`` on the
benchmark's memcached: the one way to count that works the same for mcache (hit,
miss, stale, bypass) and for ``cache_page`` (which says nothing of hits), so hit
ratio = 1 − renders ÷ requests for all three.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.cache import cache_page
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.vary import vary_on_cookie
from pymemcache.client.base import PooledClient

from django_mcache.views import cached_view

from .models import Post

TTL = 60
SITE: str = settings.SITE
RENDERS = f"real_site:renders:{SITE}"
"""The memcached counter of this configuration's renders (the benchmark reads it)."""
BODY = "".join(f"<p>Paragraph {i}: {'lorem ipsum dolor sit amet ' * 12}</p>" for i in range(8))


@functools.cache
def _counter() -> PooledClient:
    """One pool per worker process: gthread's threads share it safely."""
    host, port = settings.CACHES["django"]["LOCATION"].rsplit(":", 1)
    return PooledClient((host, int(port)), no_delay=True, max_pool_size=8)


def _rendered() -> None:
    """Count a render; with a reply, so the count is in before the response goes out."""
    _counter().incr(RENDERS, 1, noreply=False)


def cached(
    view: Callable[..., Any], name: str, form: bool = False, ttl: int = TTL
) -> Callable[..., Any]:
    """Return ``view`` cached as this configuration caches pages.

    ``cache_page`` is used as Django's documentation says for such pages: with
    ``vary_on_cookie`` (the greeting reads the session, and SessionMiddleware's own
    ``Vary: Cookie`` comes too late for a view decorator) and, on a page with a
    form, ``csrf_protect`` inside it (else the token is stored without its cookie
    and served to everyone). Without them it would be faster and wrong: one
    visitor's greeting and CSRF token shown to the next.

    The two mcache configurations share a memcached and the views' names, so each
    has a ``key_prefix`` of its own: neither serves a page the other built.
    """
    if SITE == "holes":
        return cached_view(ttl, hole_context={}, cookies=[], key_prefix=f"holes.{name}")(view)
    if SITE == "plain":
        return cached_view(ttl, key_prefix=f"plain.{name}")(view)
    return cache_page(ttl, cache="django")(vary_on_cookie(csrf_protect(view) if form else view))


def _post_list(request: HttpRequest) -> HttpResponse:
    """The 20 newest posts, each with its comment count: a query and a template."""
    _rendered()
    posts = Post.objects.annotate(comment_count=Count("comments")).order_by("-id")[:20]
    return render(request, "list.html", {"posts": posts})


def _post_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One post, its comments with their authors, and the comment form, whose CSRF
    token is the visitor's own: two queries and a template."""
    _rendered()
    post = get_object_or_404(Post, pk=pk)
    comments = post.comments.select_related("author").order_by("id")
    return render(request, "detail.html", {"post": post, "comments": comments})


def _token_page(request: HttpRequest) -> HttpResponse:
    """A form page with no greeting: its one hole is the CSRF token."""
    return render(request, "form_page.html", {"body": BODY, "with_token": True})


def _hole_page(request: HttpRequest) -> HttpResponse:
    """The same page with one ``{% nocache %}`` hole, a welcome line, and no token: the
    cost of a hole itself, without Django's work for a CSRF token."""
    return render(request, "form_page.html", {"body": BODY, "with_hole": True})


def _plain_page(request: HttpRequest) -> HttpResponse:
    """The same page without the token: no hole at all, a plain hit."""
    return render(request, "form_page.html", {"body": BODY, "with_token": False})


post_list = cached(_post_list, "post_list")
post_detail = cached(_post_detail, "post_detail", form=True)
# The hole-cost pages (served by the holes configuration): the same page and decorator,
# with its only hole the CSRF token, with a {% nocache %} hole, and with none; kept an
# hour, so every request is a hit.
token_page = cached(_token_page, "token_page", ttl=3600)
hole_page = cached(_hole_page, "hole_page", ttl=3600)
plain_page = cached(_plain_page, "plain_page", ttl=3600)


def ping(request: HttpRequest) -> HttpResponse:
    """An uncached, uncounted page: gunicorn is up, and which worker answered."""
    return HttpResponse("pong")


def worker_header(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[..., Any]:
    """Name the gunicorn worker in every response (X-Worker), cached or not."""
    pid = str(os.getpid())

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        response["X-Worker"] = pid
        return response

    return middleware
