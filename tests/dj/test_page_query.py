"""Query parameters that do not matter: ``cached_view(query=…)`` and the site's rule, in
both adapters, on a real memcached.

A campaign link is the same page: ``/?utm_source=x`` and ``/?utm_source=y`` are one
entry (the analytics parameters are dropped by default); a view keeps only the
parameters it names, or drops the ones it names; repeated parameters keep their order;
and the view renders seeing only what its key keeps, so no visitor's dropped parameter
can reach the page everyone else is served.
"""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import path
from flask import Flask, request

from django_mcache.views import cached_view
from flask_mcache import MCache
from mcache.errors import ConfigError
from mcache.web.query import QueryRule, query_rule

pytestmark = pytest.mark.django_db
renders: list[str] = []


def _echo(kind: str, request_) -> HttpResponse:
    renders.append(kind)
    return HttpResponse(f"{kind} {request_.GET.urlencode()} {request_.get_full_path()}")


@cached_view(ttl=60)
def default_rule(request):
    return _echo("default", request)


@cached_view(ttl=60, query=["page"])
def only_page(request):
    return _echo("only", request)


@cached_view(ttl=60, query={"exclude": ["ref", "session_*"]})
def but_ref(request):
    return _echo("but", request)


@cached_view(ttl=60, query={"exclude": []})
def every(request):
    return _echo("every", request)


urlpatterns = [
    path("default/", default_rule),
    path("only/", only_page),
    path("but/", but_ref),
    path("every/", every),
]


def django_settings(url: str, **options: object) -> dict:
    return {
        "CACHES": {
            "default": {
                "BACKEND": "django_mcache.backend.MCacheBackend",
                "LOCATION": url,
                "KEY_PREFIX": "query",
                "OPTIONS": options,
            }
        },
        "ROOT_URLCONF": __name__,
    }


def flask_app(url: str, **config: object) -> Flask:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="query", MCACHE_URL=url, MCACHE_NAMESPACE="flquery", **config)
    mcache = MCache(app)

    def echo(kind: str) -> str:
        renders.append(kind)
        return f"{kind} {request.query_string.decode()} {request.full_path}"

    for route, options in (
        ("default", {}),
        ("only", {"query": ["page"]}),
        ("but", {"query": {"exclude": ["ref", "session_*"]}}),
        ("every", {"query": {"exclude": []}}),
    ):
        app.add_url_rule(
            f"/{route}/",
            route,
            mcache.cached_view(ttl=60, **options)(lambda kind=route: echo(kind)),
        )
    return app


@pytest.fixture
def fetch(request: pytest.FixtureRequest, memcached_url: str):
    """GET a path on the Django or the Flask site; return (X-Cache, body)."""
    renders.clear()
    if request.param == "django":
        with override_settings(**django_settings(memcached_url)):
            from django.core.cache import caches

            caches["default"].clear()
            client = Client()
            yield lambda url: (lambda r: (r["X-Cache"], r.content.decode()))(client.get(url))
        return
    client = flask_app(memcached_url).test_client()
    yield lambda url: (lambda r: (r.headers["X-Cache"], r.text))(client.get(url))


BOTH = pytest.mark.parametrize("fetch", ["django", "flask"], indirect=True)


@BOTH
def test_campaign_links_share_one_entry(fetch) -> None:
    first = fetch("/default/?utm_source=x&gclid=1&p=2")
    second = fetch("/default/?utm_source=y&utm_medium=mail&fbclid=3&p=2&_ga=4&mc_cid=5")
    third = fetch("/default/?p=2")
    assert [first[0], second[0], third[0]] == ["MISS", "HIT", "HIT"]
    assert renders == ["default"]
    assert "utm" not in first[1] and "gclid" not in first[1], "the view never saw them"
    assert "p=2" in first[1]
    assert fetch("/default/?p=3")[0] == "MISS", "a parameter that matters still counts"


@BOTH
def test_an_allowlist_keeps_only_its_parameters(fetch) -> None:
    assert fetch("/only/?page=2&sort=name")[0] == "MISS"
    hit = fetch("/only/?sort=price&page=2")
    assert hit[0] == "HIT" and "sort" not in hit[1]
    assert fetch("/only/?page=3")[0] == "MISS"
    assert renders == ["only", "only"]


@BOTH
def test_a_denylist_drops_its_parameters_and_prefixes(fetch) -> None:
    assert fetch("/but/?ref=a&session_id=1&q=x")[0] == "MISS"
    assert fetch("/but/?q=x&ref=b&session_tab=2")[0] == "HIT"
    assert fetch("/but/?q=x&utm_source=z")[0] == "MISS", "a view's own rule replaces the site's"


@BOTH
def test_repeated_parameters_keep_their_order(fetch) -> None:
    assert fetch("/every/?tag=a&tag=b")[0] == "MISS"
    assert fetch("/every/?tag=a&tag=b")[0] == "HIT"
    assert fetch("/every/?tag=b&tag=a")[0] == "MISS", "?tag=b&tag=a is another query"
    assert fetch("/every/?x=1&tag=a&tag=b")[0] == "MISS"
    assert fetch("/every/?tag=a&x=1&tag=b")[0] == "HIT", "names sorted, each one's values kept"


@BOTH
def test_a_dropped_parameter_never_reaches_the_shared_page(fetch) -> None:
    """Cache poisoning through an unkeyed input: a visitor's utm_source would be in the
    page every later visitor gets, if the view could read it."""
    evil = fetch("/default/?utm_source=%3Cscript%3E")
    assert "script" not in evil[1] and "utm_source" not in evil[1]
    assert fetch("/default/")[1] == evil[1]


def test_the_site_rule_and_bad_rules(memcached_url: str) -> None:
    renders.clear()
    with override_settings(**django_settings(memcached_url, page_query=["page"])):
        from django.core.cache import caches

        caches["default"].clear()
        client = Client()
        assert client.get("/default/?page=1&sort=a")["X-Cache"] == "MISS"
        assert client.get("/default/?page=1&sort=b")["X-Cache"] == "HIT"
    app = flask_app(memcached_url, MCACHE_PAGE_QUERY=["page"])
    flask = app.test_client()
    assert flask.get("/default/?page=1&sort=a").headers["X-Cache"] == "MISS"
    assert flask.get("/default/?page=1&sort=b").headers["X-Cache"] == "HIT"
    with pytest.raises(ConfigError, match=r"MCACHE_PAGE_QUERY must be a list.*'utm_\*'"):
        flask_app(memcached_url, MCACHE_PAGE_QUERY={"only": ["page"]})
    with pytest.raises(TypeError, match=r"cached_view\(query=\.\.\.\) must be a list"):
        cached_view(query="page")
    assert query_rule(["a", "b*"], "x") == QueryRule(include=("a", "b*"))
    assert QueryRule(exclude=("utm_*",)).key([("utm_id", ["1"]), ("a", ["2", "1"])]) == (
        ("a", ("2", "1")),
    )
