"""A small Django site with django-debug-toolbar and mcache's panel, for the panel test.

One module is the whole project, served by a real uvicorn process (one worker:
the toolbar keeps what it recorded in the serving process's memory). The
store comes from ``MCACHE_URL``. ``/shop/`` reads a ``@cached`` function
with tags, a fragment through ``get_or_build`` and a plain ``get``; it runs
the same calls on every request, so the first request builds and the next hits.
"""

from __future__ import annotations

import os

import django
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.http import HttpRequest, HttpResponse
from django.urls import path


def configure() -> None:
    """Configure Django for this module (once per process)."""
    if settings.configured:
        return
    settings.configure(
        DEBUG=True,
        SECRET_KEY="toolbar-site-tests-only",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        INTERNAL_IPS=["127.0.0.1"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.staticfiles",
            "debug_toolbar",
            "django_mcache",
        ],
        MIDDLEWARE=["debug_toolbar.middleware.DebugToolbarMiddleware"],
        TEMPLATES=[
            {"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}
        ],
        STATIC_URL="/static/",
        DATABASES={},
        DEBUG_TOOLBAR_PANELS=[
            "debug_toolbar.panels.timer.TimerPanel",
            "django_mcache.panels.MCachePanel",
        ],
        DEBUG_TOOLBAR_CONFIG={"IS_RUNNING_TESTS": False},
        CACHES={
            "default": {
                "BACKEND": "django_mcache.backend.MCacheBackend",
                "LOCATION": os.environ.get("MCACHE_URL", "memory://"),
                "OPTIONS": {"namespace": "toolbar"},
            }
        },
    )
    django.setup()


configure()
from debug_toolbar.toolbar import debug_toolbar_urls  # noqa: E402  (after settings)
from django.contrib.staticfiles.urls import staticfiles_urlpatterns  # noqa: E402
from django.core.cache import cache  # noqa: E402

core = cache.mcache  # type: ignore[attr-defined]


@core.cached(ttl=300, tags=["products"])
def top_products(limit: int) -> list[str]:
    return [f"product {n}" for n in range(limit)]


def shop(request: HttpRequest) -> HttpResponse:
    products = top_products(3)
    sidebar = core.get_or_build(("block", "sidebar"), lambda: "<aside>offers</aside>", ttl=60)
    visits = cache.get("shop-visits", 0)
    cache.set("shop-visits", visits + 1)
    items = "".join(f"<li>{p}</li>" for p in products)
    return HttpResponse(f"<html><body><h1>Shop</h1><ul>{items}</ul>{sidebar}</body></html>")


urlpatterns = [path("shop/", shop), *debug_toolbar_urls(), *staticfiles_urlpatterns()]
application = get_asgi_application()
