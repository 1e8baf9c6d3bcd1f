"""One page under several caches: /mcache/ with @cached_view, /near/ with it on a cache with
a near cache (/redis-near/ on Redis, whose near tier hears invalidations pushed), /django/
with Django's cache_page; /plain/ the same HTML with no cache and no query (the trivial
uncached view); /async/... the same as ``async def`` views."""

import os

from asgiref.sync import sync_to_async
from django.db import connection
from django.http import HttpResponse
from django.urls import path
from django.views.decorators.cache import cache_page

from django_mcache.views import cached_view

ROWS = "".join(f"<li>row {i}: {'lorem ipsum ' * 4}</li>" for i in range(60))


def page(request):
    """A page worth caching: a query and ~3 KB of HTML."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_content_type")
        (count,) = cursor.fetchone()
    return HttpResponse(f"<html><body><h1>{count} types</h1><ul>{ROWS}</ul></body></html>")


def plain(request):
    """The trivial uncached view: the same HTML, no query."""
    return HttpResponse(f"<html><body><h1>0 types</h1><ul>{ROWS}</ul></body></html>")


async def async_page(request):
    """The page as an ``async def`` view (its query in a thread, as Django runs it)."""
    return await sync_to_async(page)(request)


async def async_plain(request):
    return plain(request)


def worker_header(get_response):
    """Name the gunicorn worker in every response (X-Worker), cached or not."""
    pid = str(os.getpid())

    def middleware(request):
        response = get_response(request)
        response["X-Worker"] = pid
        return response

    return middleware


urlpatterns = [
    path("mcache/", cached_view(ttl=300, tags=["page"])(page)),
    path("near/", cached_view(ttl=300, tags=["page"], cache="near")(page)),
    path("redis-near/", cached_view(ttl=300, tags=["page"], cache="redis_near")(page)),
    path("django/", cache_page(300, cache="django")(page)),
    path("plain/", plain),
    path("async/mcache/", cached_view(ttl=300, tags=["page"])(async_page)),
    path("async/near/", cached_view(ttl=300, tags=["page"], cache="near")(async_page)),
    path("async/redis-near/", cached_view(ttl=300, tags=["page"], cache="redis_near")(async_page)),
    path("async/plain/", async_plain),
]
