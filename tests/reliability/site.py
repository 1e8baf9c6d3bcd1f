"""One small site twice, in Django and in Flask, for the reliability tests.

Its "database" is a dict, so any number of test-client threads can read it and
a test can change it; every real render is counted.
"""

from __future__ import annotations

import secrets
import threading
import time

from django.http import HttpResponse
from django.template import RequestContext, Template
from django.urls import path, re_path
from flask import Flask, render_template, session
from jinja2 import DictLoader

from django_mcache.views import cached_view
from flask_mcache import MCache

CATALOG = {"version": "v1", "fail": False, "sleep": 0.0, "size": 0}
renders: list[str] = []
_lock = threading.Lock()


def render_catalog(framework: str) -> str:
    """What the backend answers: slow, failing or huge (and incompressible) when told so."""
    with _lock:
        renders.append(framework)
    if CATALOG["sleep"]:
        time.sleep(CATALOG["sleep"])
    if CATALOG["fail"]:
        raise RuntimeError("the database is down")
    return f"catalog {CATALOG['version']}" + secrets.token_hex(CATALOG["size"] // 2)


@cached_view(ttl=1, stale_ttl=60, tags=["catalog"])
def django_catalog(request):
    return HttpResponse(render_catalog("django"))


@cached_view(ttl=300, stale_ttl=300, tags=["catalog"], key_prefix="catalog-long")
def django_catalog_long(request):
    return HttpResponse(render_catalog("django"))


@cached_view(ttl=60, tags=["catalog"])
def django_echo(request, rest):
    return HttpResponse(f"echo {request.path}?{request.META.get('QUERY_STRING', '')}")


@cached_view(ttl=60)
def django_private(request, kind):
    """A page one visitor must never get from another's visit, whatever the key says."""
    user = request.user.username if kind == "signed_in" else request.headers.get("X-User", "")
    response = HttpResponse(f"page of {user}")
    if kind == "set_cookie":
        response.set_cookie("theme", user)
    elif kind == "cc_private":
        response["Cache-Control"] = "private"
    elif kind == "cc_no_store":
        response["Cache-Control"] = "no-store"
    elif kind == "vary_cookie":
        response["Vary"] = "Cookie"
    return response


HOLES = {
    "in_hole": "{% load mcache %}page{% nocache %} of {{ user.username }}{% endnocache %}",
    "outside_hole": (
        "{% load mcache %}page of {{ request.user.username }}{% nocache %}{% endnocache %}"
    ),
}
"""Two pages shared with signed-in visitors: one keeps the name in a hole, one forgets to."""


@cached_view(ttl=60, hole_context={"user": lambda request: request.user})
def django_holes(request, kind):
    return HttpResponse(Template(HOLES[kind]).render(RequestContext(request)))


urlpatterns = [
    path("private/<str:kind>/", django_private),
    path("holes/<str:kind>/", django_holes),
    path("catalog/", django_catalog),
    path("catalog-long/", django_catalog_long),
    re_path(r"^echo/(?P<rest>.+)$", django_echo),
]


def flask_app(url: str, namespace: str = "fl", **config: object) -> Flask:
    """The same catalog in Flask on ``url``."""
    app = Flask(__name__)
    app.config.update(
        **{"SECRET_KEY": "reliability", "MCACHE_URL": url, "MCACHE_NAMESPACE": namespace, **config}
    )
    mcache = MCache(app)
    app.jinja_env.loader = DictLoader(
        {
            "in_hole": "page{% nocache %} of {{ who }}{% endnocache %}",
            "outside_hole": "page of {{ session.user }}{% nocache %}{% endnocache %}",
        }
    )

    @app.get("/holes/<kind>/")
    @mcache.cached_view(ttl=60, hole_context={"who": lambda: session.get("user", "")})
    def holes(kind):
        return render_template(kind)

    @app.get("/catalog/")
    @mcache.cached_view(ttl=1, stale_ttl=60, tags=["catalog"])
    def catalog():
        return render_catalog("flask")

    @app.get("/catalog-long/")
    @mcache.cached_view(ttl=300, stale_ttl=300, tags=["catalog"])
    def catalog_long():
        return render_catalog("flask")

    @app.get("/private/<kind>/")
    @mcache.cached_view(ttl=60)
    def private(kind):
        from flask import make_response, request, session

        user = session.get("user", "") if kind == "signed_in" else request.headers.get("X-User")
        response = make_response(f"page of {user}")
        if kind == "set_cookie":
            response.set_cookie("theme", user or "")
        elif kind == "cc_private":
            response.headers["Cache-Control"] = "private"
        elif kind == "cc_no_store":
            response.headers["Cache-Control"] = "no-store"
        elif kind == "vary_cookie":
            response.vary.add("Cookie")
        return response

    @app.get("/echo/<path:rest>")
    @mcache.cached_view(ttl=60)
    def echo(rest):
        from flask import request

        return f"echo {request.full_path.rstrip('?')}"

    return app
