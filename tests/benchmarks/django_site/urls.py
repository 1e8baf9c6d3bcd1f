"""Three URLs, one page: /mcache/ with @cached_view, /near/ with it on a cache with a near
cache, /django/ with Django's cache_page."""

import os

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
    path("django/", cache_page(300, cache="django")(page)),
]
