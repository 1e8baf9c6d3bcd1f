"""Attacks on holes, hole_context and CDN windows (Django): ways one visitor's data could
reach another's response, or a placeholder go out unfilled, each one shut. Real
middleware, real test client, templates from a locmem loader (named, so holes can be
found again).

The module is its own URLconf.
"""

from __future__ import annotations

from copy import deepcopy

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import caches
from django.http import HttpResponse
from django.shortcuts import render
from django.template import TemplateSyntaxError
from django.test import override_settings
from django.urls import path
from django.views.decorators.gzip import gzip_page

from django_mcache.views import cached_view
from tests.dj.test_page_holes import finish_background_rebuilds, visitor

pytestmark = pytest.mark.django_db

TEMPLATES_SRC = {
    # the shared part reads the user (so a signed-in visitor is bypassed), and a hole
    # holds a login/logout form with its CSRF token
    "review/long_form.html": (  # long enough for gzip_page to compress it
        '<form method="post">{% csrf_token %}</form><p>' + "a comment form " * 30 + "</p>"
    ),
    "review/leaky_form.html": (
        "{% load mcache %}Signed in as {{ user.username }}"
        '{% nocache %}<form method="post">{% csrf_token %}</form>{% endnocache %}'
    ),
    # the same, with a nested hole
    "review/leaky_nested.html": (
        "{% load mcache %}Signed in as {{ user.username }}"
        "{% nocache %}[{% nocache %}{{ user.username }}{% endnocache %}]{% endnocache %}"
    ),
    # a cached fragment holding a form, in a cached page
    "review/fragment_form.html": (
        "{% load mcache %}<h1>page</h1>"
        '{% cachedblock 60 "review-sidebar-form" %}'
        '<form method="post">{% csrf_token %}</form>'
        "{% endcachedblock %}"
    ),
    # a site-wide header with a sign-in form in a hole, on a page that is not a 200
    "review/not_found.html": (
        "{% load mcache %}<header>{% nocache %}{% if not user.is_authenticated %}"
        '<form method="post" action="/login/">{% csrf_token %}</form>{% endif %}'
        "{% endnocache %}</header><p>No such post</p>"
    ),
    "review/greeting.html": (
        "{% load mcache %}<header>{% nocache %}{% if user.is_authenticated %}Hello, "
        "{{ user.username }}{% else %}Sign in{% endif %}{% endnocache %}</header>"
    ),
    "review/anon_reader.html": (
        "{% if user.is_authenticated %}Hello, {{ user.username }}{% else %}Sign in{% endif %}"
    ),
}

PROCESSORS = [
    "django.template.context_processors.request",
    "django.contrib.auth.context_processors.auth",
    "django.contrib.messages.context_processors.messages",
    "django_mcache.holes.holes",
]


def _templates() -> list[dict]:
    engine = deepcopy(settings.TEMPLATES[0])
    engine["APP_DIRS"] = False
    engine["OPTIONS"]["context_processors"] = PROCESSORS
    engine["OPTIONS"]["loaders"] = [
        ("django.template.loaders.locmem.Loader", TEMPLATES_SRC),
        "django.template.loaders.app_directories.Loader",
    ]
    return [engine]


class DisplayNameMiddleware:
    """A common pattern: middleware that derives per-user data before the view runs
    (a profile, a display name, a basket, a tenant...)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == "/display-name/":
            user = request.user
            request.display_name = user.username if user.is_authenticated else "guest"
        return self.get_response(request)


MIDDLEWARE = [*settings.MIDDLEWARE, f"{__name__}.DisplayNameMiddleware"]


@pytest.fixture(autouse=True)
def review_settings():
    with override_settings(ROOT_URLCONF=__name__, TEMPLATES=_templates(), MIDDLEWARE=MIDDLEWARE):
        caches["default"].clear()
        yield
        finish_background_rebuilds()


# -- views ---------------------------------------------------------------------------------------


@cached_view(ttl=60, hole_context={})
def leaky_form(request):
    return render(request, "review/leaky_form.html")


@cached_view(ttl=60, hole_context={})
def leaky_nested(request):
    return render(request, "review/leaky_nested.html")


@cached_view(ttl=60, hole_context={})
async def async_leaky_form(request):
    return render(request, "review/leaky_form.html")


@cached_view(ttl=60, hole_context={})
def not_found(request):
    return render(request, "review/not_found.html", status=404)


@cached_view(ttl=60)
def fragment_form(request):
    if request.method == "POST":
        return HttpResponse("posted")
    return render(request, "review/fragment_form.html")


@cached_view(ttl=60)
def sized_form(request):
    response = render(request, "review/long_form.html")
    response["Content-Length"] = str(len(response.content))  # as a view or middleware may
    return response


@cached_view(ttl=60, vary_on_headers=["Accept-Encoding"])
@gzip_page
def gzipped_form(request):
    return render(request, "review/long_form.html")


@cached_view(ttl=60, hole_context={})
def display_name(request):
    return HttpResponse(f"<p>Hi {request.display_name}</p>")


@cached_view(ttl=60, stale_ttl=600, tags=["review-stale"], refresh="background", hole_context={})
def stale_greeting(request):
    return render(request, "review/greeting.html")


@cached_view(ttl=60, stale_ttl=600, cdn=True, hole_context={})
def cdn_anon_reader(request):
    return render(request, "review/anon_reader.html")


urlpatterns = [
    path("leaky-form/", leaky_form),
    path("leaky-nested/", leaky_nested),
    path("async-leaky-form/", async_leaky_form),
    path("not-found/", not_found),
    path("fragment-form/", fragment_form),
    path("sized-form/", sized_form),
    path("gzipped-form/", gzipped_form),
    path("display-name/", display_name),
    path("stale-greeting/", stale_greeting),
    path("cdn-anon-reader/", cdn_anon_reader),
]


# -- 1. a refused build's holes, filled for its visitor ----------------------------------------


@pytest.mark.parametrize("url", ["/leaky-form/", "/leaky-nested/", "/async-leaky-form/"])
def test_a_bypassed_build_fills_its_holes_without_leaving_placeholders(url: str) -> None:
    """The page reads the user outside a hole, so a signed-in visitor is bypassed, and
    the bypassed page's holes are filled outside the render's collector: a
    {% csrf_token %} or a nested {% nocache %} inside a hole renders for the visitor,
    instead of becoming a placeholder of its own that nothing fills."""
    alice = User.objects.create_user("alice")
    page = visitor(alice, raise_errors=False).get(url)
    assert page.status_code == 200, "a bypassed page must not be a 500"
    assert page["X-Cache"] == "BYPASS" and b"__mcache_hole_" not in page.content


def test_a_non_200_page_with_a_csrf_token_in_a_hole_is_not_a_500_for_everyone() -> None:
    """Any refused build (status, set-cookie, private, messages, session...) fills its
    holes the same way: a site-wide header hole with a sign-in form on a 404 page."""
    page = visitor(raise_errors=False).get("/not-found/")
    assert page.status_code == 404, f"got {page.status_code}"


# -- 2. {% csrf_token %} in a {% cachedblock %}: refused ---------------------------------------


def test_a_csrf_token_inside_a_cached_fragment_is_refused_never_shared() -> None:
    """Stored on its own, a fragment holding a token would hand the builder's token
    (valid with the builder's cookie: what a CSRF attack needs) to every visitor."""
    with pytest.raises(TemplateSyntaxError, match=r"csrf_token.*cannot sit inside"):
        visitor().get("/fragment-form/")


# -- 3. the user read before the view ----------------------------------------------------------


def test_user_data_a_middleware_derived_never_reaches_another_visitors_page() -> None:
    """hole_context lets signed-in visitors share the page, and request.user is watched
    during the view; a middleware that read the user before it (request.display_name, a
    profile, a basket, a tenant) may have left alice's data where no hole reaches, so a
    signed-in visitor whose user was read before the view shares nothing."""
    alice = User.objects.create_user("alice")
    first = visitor(alice).get("/display-name/")
    assert b"Hi alice" in first.content
    anonymous = visitor().get("/display-name/")
    assert b"alice" not in anonymous.content, (
        f"anonymous visitor got alice's page ({anonymous['X-Cache']})"
    )


# -- 4. a stale page filled for one visitor stays private --------------------------------------


def test_a_stale_page_with_filled_holes_stays_private() -> None:
    alice = User.objects.create_user("alice")
    visitor().get("/stale-greeting/")
    caches["default"].invalidate("review-stale")
    stale = visitor(alice).get("/stale-greeting/")
    assert stale["X-Cache"] == "STALE" and b"Hello, alice" in stale.content
    assert "private" in stale["Cache-Control"], (
        f"alice's filled page goes out as {stale['Cache-Control']!r}"
    )


# -- 5. no CDN windows on a page mcache keeps from session holders -----------------------------


def test_a_page_mcache_keeps_from_session_holders_gets_no_cdn_windows() -> None:
    """Built for an anonymous visitor, the page read the user, so mcache serves it only
    to visitors without a session cookie; a CDN keyed on the URL (most ignore Vary:
    Cookie) would serve it to everyone, so it gets no CDN windows."""
    page = visitor().get("/cdn-anon-reader/")
    assert page["X-Cache"] == "MISS" and "Cookie" in page["Vary"]
    assert not page.has_header("CDN-Cache-Control"), page["CDN-Cache-Control"]
    assert "s-maxage" not in page["Cache-Control"]


# -- 6. lengths and encodings of filled pages ---------------------------------------------------


def test_a_filled_page_says_its_own_length() -> None:
    pages = [visitor().get("/sized-form/"), visitor().get("/sized-form/")]
    assert [page["X-Cache"] for page in pages] == ["MISS", "HIT"]
    for page in pages:
        assert page["Content-Length"] == str(len(page.content))


def test_a_compressed_page_with_holes_fails_rather_than_go_out_unfilled() -> None:
    from mcache.web.holes import LeftoverHole

    with pytest.raises(LeftoverHole, match="compressed"):
        visitor().get("/gzipped-form/", HTTP_ACCEPT_ENCODING="gzip")
