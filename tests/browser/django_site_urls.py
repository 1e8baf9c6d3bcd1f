"""The URLs of :mod:`.django_site`: the admin, one cached page, and the admin's CSS."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.staticfiles.views import serve
from django.http import HttpRequest, HttpResponse
from django.urls import path, re_path

from django_mcache.views import cached_view


@cached_view(60, tags=["news"], stale_ttl=0)
def news(request: HttpRequest) -> HttpResponse:
    return HttpResponse("<h1>News</h1>")


urlpatterns = [
    path("admin/", admin.site.urls),
    path("news/", news),
    re_path(
        r"^static/(?P<path>.*)$", serve, {"insecure": True}
    ),  # the admin's CSS, for the screenshots
]
