"""A small Django site served over ASGI, for the uvicorn test and the ASGI benchmark.

One module is the whole project (settings, views, URLs, the ASGI app), so a
server process needs only ``uvicorn tests.asgi_site:application`` (or ``:edge``, the
same behind mcache's edge). The cache
comes from the environment:

* ``MCACHE_URL`` — the store of the ``mcache`` cache (``@cached_view`` pages);
* ``DJANGO_CACHE_BACKEND`` / ``DJANGO_CACHE_LOCATION`` — Django's own backend
  (``cache_page`` pages), for the benchmark's comparison; local memory if unset.

``/plain/<n>/`` is the same page with no cache and no render time (the
ceiling a cache can approach). ``/renders/`` answers how many times this
process rendered a page, so a test can count builds from outside.
"""

from __future__ import annotations

import asyncio
import os

import django
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.cache import cache_page

renders: list[str] = []


def configure() -> None:
    """Configure Django for this module (once per process)."""
    if settings.configured:
        return
    django_backend = os.environ.get(
        "DJANGO_CACHE_BACKEND", "django.core.cache.backends.locmem.LocMemCache"
    )
    settings.configure(
        DEBUG=False,
        SECRET_KEY="asgi-site-tests-only",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_mcache"],
        MIDDLEWARE=[],
        DATABASES={},
        CACHES={
            "default": {
                "BACKEND": "django_mcache.backend.MCacheBackend",
                "LOCATION": os.environ.get("MCACHE_URL", "memory://"),
            },
            "django": {
                "BACKEND": django_backend,
                "LOCATION": os.environ.get("DJANGO_CACHE_LOCATION", ""),
            },
        },
    )
    django.setup()


def page_body(n: int) -> bytes:
    """A page of about 2 KB, as a small rendered template would be."""
    return (f"<h1>page {n}</h1>" + "<p>cached content</p>" * 100).encode()


async def render(request: HttpRequest, n: int) -> HttpResponse:
    renders.append(request.path)
    await asyncio.sleep(float(os.environ.get("ASGI_SITE_RENDER_SECONDS", "0.05")))
    return HttpResponse(page_body(n))


async def plain(request: HttpRequest, n: int) -> HttpResponse:
    """The page with no cache and no render time: what Django and uvicorn serve at best."""
    return HttpResponse(page_body(n))


async def count_renders(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"renders": len(renders)})


configure()
from django_mcache.views import cached_view  # noqa: E402  (after settings, as Django requires)
from mcache.edge import ASGIEdge  # noqa: E402

mcache_page = cached_view(ttl=300, tags=["pages"])(render)
django_page = cache_page(300, cache="django")(render)

urlpatterns = [
    path("mcache/<int:n>/", mcache_page),
    path("django/<int:n>/", django_page),
    path("plain/<int:n>/", plain),
    path("renders/", count_renders),
]

application = get_asgi_application()
edge = ASGIEdge(application, "default")  # the same site behind mcache's edge
