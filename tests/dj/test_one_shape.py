"""One URL, one shape: a page's MISS, HIT and STALE responses carry the same ``Vary`` and
the same ``Cache-Control`` (a STALE one with its freshness at 0), in both adapters, for
every kind of page the tests know, on a real memcached.

A cache in front (a CDN, a browser) keys its variants by ``Vary``: a MISS that says
``Vary: Cookie`` and a HIT that does not are two variants of one URL to it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.http import HttpResponse
from django.template import RequestContext, Template
from django.test import Client, override_settings
from django.urls import path
from flask import Flask, make_response, render_template, session
from jinja2 import DictLoader

from django_mcache.views import cached_view
from flask_mcache import MCache

pytestmark = pytest.mark.django_db
PAGE = {"ttl": 60, "stale_ttl": 60, "tags": ["shape"], "refresh": "background"}
HOLE = "{% load mcache %}page{% nocache %} for {{ request.path }}{% endnocache %}"


def _plain(request):
    return HttpResponse("page")


def _reads_session(request):
    return HttpResponse(f"page {request.session.get('theme', 'plain')}")


def _varies(request):
    response = HttpResponse(f"page {request.headers.get('Accept-Language')}")
    response["Vary"] = "Accept-Language"
    return response


def _holes(request):
    return HttpResponse(Template(HOLE).render(RequestContext(request)))


DJANGO_KINDS: dict[str, tuple[Callable, dict]] = {
    "plain": (_plain, {}),
    "reads-session": (_reads_session, {}),
    "vary-header": (_varies, {"vary_on_headers": ["Accept-Language"]}),
    "cookies": (_plain, {"cookies": ["theme"]}),
    "cdn": (_plain, {"cdn": True}),
    "holes": (_holes, {"hole_context": {}}),
    "per-user": (_plain, {"per_user": True}),
}
urlpatterns = [
    path(f"{kind}/", cached_view(**PAGE, **options)(view), name=kind)
    for kind, (view, options) in DJANGO_KINDS.items()
]


def flask_app(url: str) -> Flask:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="shape", MCACHE_URL=url, MCACHE_NAMESPACE="flshape")
    mcache = MCache(app)
    app.jinja_env.loader = DictLoader({"holes.html": "page{% nocache %} for x{% endnocache %}"})

    def varies():
        response = make_response("page")
        response.vary.add("Accept-Language")
        return response

    kinds: dict[str, tuple[Callable, dict]] = {
        "plain": (lambda: "page", {}),
        "reads-session": (lambda: f"page {session.get('theme', 'plain')}", {}),
        "vary-header": (varies, {"vary_on_headers": ["Accept-Language"]}),
        "cookies": (lambda: "page", {"cookies": ["theme"]}),
        "cdn": (lambda: "page", {"cdn": True}),
        "holes": (lambda: render_template("holes.html"), {"hole_context": {}}),
        "per-user": (lambda: "page", {"per_user": lambda: "someone"}),
    }
    for kind, (view, options) in kinds.items():
        app.add_url_rule(f"/{kind}/", kind, mcache.cached_view(**PAGE, **options)(view))
    return app


FRESHNESS = ("max-age", "s-maxage", "stale-while-revalidate", "stale-if-error")


def directives(cache_control: str) -> dict[str, str]:
    parts = (part.strip().partition("=") for part in cache_control.split(",") if part.strip())
    return {name.lower(): value for name, _, value in parts}


def vary(headers) -> list[str]:
    return sorted(v.strip().lower() for v in headers.get("Vary", "").split(",") if v.strip())


def three(fetch: Callable[[], object], invalidate: Callable[[], None]) -> list:
    """The MISS, the HIT and (the page's tag bumped) the STALE response of one page."""
    responses = [fetch(), fetch()]
    invalidate()
    responses.append(fetch())
    return responses


def assert_one_shape(kind: str, responses: list) -> None:
    states = [r.headers["X-Cache"] for r in responses]
    assert states == ["MISS", "HIT", "STALE"], (kind, states)
    miss, hit, stale = (r.headers for r in responses)
    assert vary(miss) == vary(hit) == vary(stale), (kind, vary(miss), vary(hit), vary(stale))
    assert directives(miss.get("Cache-Control", "")) == directives(hit.get("Cache-Control", "")), (
        kind
    )
    shared = {k: v for k, v in directives(hit["Cache-Control"]).items() if k not in FRESHNESS}
    stale_directives = directives(stale["Cache-Control"])
    assert stale_directives.pop("max-age") == "0", kind
    assert {k: v for k, v in stale_directives.items() if k not in FRESHNESS} == shared, kind


@pytest.mark.parametrize("kind", sorted(DJANGO_KINDS))
def test_django_pages_have_one_shape(kind: str, memcached_url: str) -> None:
    settings = {
        "CACHES": {
            "default": {
                "BACKEND": "django_mcache.backend.MCacheBackend",
                "LOCATION": memcached_url,
                "KEY_PREFIX": "shape",
            }
        },
        "ROOT_URLCONF": __name__,
    }
    with override_settings(**settings):
        caches["default"].clear()
        client = Client()
        if kind == "per-user":
            client.force_login(User.objects.create(username="someone"))
        headers = {"HTTP_ACCEPT_LANGUAGE": "fr"}
        responses = three(
            lambda: client.get(f"/{kind}/", **headers),
            lambda: caches["default"].mcache.invalidate("shape"),
        )
    assert_one_shape(kind, responses)


@pytest.mark.parametrize("kind", sorted(DJANGO_KINDS))
def test_flask_pages_have_one_shape(kind: str, memcached_url: str) -> None:
    app = flask_app(memcached_url)
    client = app.test_client()
    responses = three(
        lambda: client.get(f"/{kind}/", headers={"Accept-Language": "fr"}),
        lambda: app.extensions["mcache"].invalidate("shape"),
    )
    assert_one_shape(kind, responses)
