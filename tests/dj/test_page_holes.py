"""Pages real sites can cache, in Django: holes, significant cookies and CDN windows.

Real CSRF, session and auth middleware through Django's test client: each visitor
has a client of its own (its own cookies), and a page's renders are counted.
"""

from __future__ import annotations

import re
from copy import deepcopy

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import caches
from django.template import Template, TemplateSyntaxError, engines
from django.test import Client, override_settings

from django_mcache import holes as django_holes
from mcache.errors import ConfigError
from mcache.web import holes as core_holes
from tests.dj import holes_site
from tests.dj.test_views import bypassed, wait_for

pytestmark = pytest.mark.django_db
PROCESSORS = [
    "django.template.context_processors.request",
    "django.contrib.auth.context_processors.auth",
    "django_mcache.holes.holes",
]


def _templates() -> list[dict]:
    engine = deepcopy(settings.TEMPLATES[0])
    engine["OPTIONS"]["context_processors"] = PROCESSORS
    return [engine]


@pytest.fixture(autouse=True)
def holes_site_settings():
    with override_settings(ROOT_URLCONF="tests.dj.holes_site", TEMPLATES=_templates()):
        caches["default"].clear()
        holes_site.renders.clear()
        yield
        finish_background_rebuilds()


def finish_background_rebuilds() -> None:
    """A background rebuild still rendering when the settings change back would build
    Django's template engines from the wrong TEMPLATES and keep them for later tests."""
    assert caches["default"].mcache.refresher.wait_idle(10), "a rebuild never finished"


def rendered(name: str) -> int:
    return holes_site.renders.count(name)


def visitor(user: User | None = None, *, raise_errors: bool = True) -> Client:
    client = Client(enforce_csrf_checks=True, raise_request_exception=raise_errors)
    if user is not None:
        client.force_login(user)
    return client


def token_in(body: bytes) -> str:
    found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert found is not None, body
    return found[1].decode()


# -- the CSRF token as a hole ------------------------------------------------------------------


def test_a_form_page_is_built_once_and_each_visitor_posts_with_their_own_token() -> None:
    visitors = [visitor() for _ in range(3)]
    pages = [each.get("/form/") for each in visitors]
    assert [page["X-Cache"] for page in pages] == ["MISS", "HIT", "HIT"]
    assert rendered("comment_form") == 1
    tokens = [token_in(page.content) for page in pages]
    cookies = [each.cookies[settings.CSRF_COOKIE_NAME].value for each in visitors]
    assert len(set(tokens)) == 3 and len(set(cookies)) == 3, "each visitor has a token of their own"
    assert all(b"__mcache_hole_" not in page.content for page in pages)
    for each, token in zip(visitors, tokens, strict=True):
        posted = each.post("/form/", {"csrfmiddlewaretoken": token, "text": "hi"})
        assert posted.status_code == 200 and posted.content == b"posted hi"
    # another visitor's token fails CSRF checking: the tokens really are each visitor's own
    stolen = visitors[0].post("/form/", {"csrfmiddlewaretoken": "x" * 64, "text": "hi"})
    assert stolen.status_code == 403


def test_a_returning_visitor_gets_a_token_masked_anew_on_every_hit_and_each_posts() -> None:
    """A visitor with a CSRF cookie gets its token from ``csrf_token`` (one read of the
    OS's random source, not ``get_token``'s 32): Django's format, a new mask each hit,
    the cookie sent again as ``get_token`` would, and only this visitor's cookie passes."""
    returning, other = visitor(), visitor()
    returning.get("/form/"), other.get("/form/")
    secret = returning.cookies[settings.CSRF_COOKIE_NAME].value
    pages = [returning.get("/form/") for _ in range(3)]
    assert [page["X-Cache"] for page in pages] == ["HIT"] * 3
    tokens = [token_in(page.content) for page in pages]
    assert len(set(tokens)) == 3, "a fresh mask on every response (BREACH)"
    assert all(len(token) == 64 and token.isascii() and token.isalnum() for token in tokens)
    assert all(page.cookies[settings.CSRF_COOKIE_NAME].value == secret for page in pages)
    for token in tokens:
        posted = returning.post("/form/", {"csrfmiddlewaretoken": token, "text": "hi"})
        assert posted.status_code == 200 and posted.content == b"posted hi"
    refused = other.post("/form/", {"csrfmiddlewaretoken": tokens[0], "text": "hi"})
    assert refused.status_code == 403


def test_csrf_token_leaves_a_visitor_without_a_valid_secret_to_get_token() -> None:
    """No secret, or one Django's middleware would not have accepted: ``get_token``
    itself answers (it makes a secret and the cookie, or masks what it is given as it
    always does), so the fast mask only ever covers a valid secret."""
    from django.http import HttpRequest
    from django.middleware.csrf import _unmask_cipher_token

    request = HttpRequest()
    token = django_holes.csrf_token(request)
    assert _unmask_cipher_token(token) == request.META["CSRF_COOKIE"]
    for odd in ("short", "a" * 31):
        request = HttpRequest()
        request.META["CSRF_COOKIE"] = odd
        assert len(django_holes.csrf_token(request)) == 32 + len(odd), "get_token's own mask"
    request = HttpRequest()
    request.META["CSRF_COOKIE"] = "a" * 31 + "Z"
    assert _unmask_cipher_token(django_holes.csrf_token(request)) == "a" * 31 + "Z"
    assert request.META["CSRF_COOKIE_NEEDS_UPDATE"] is True


def test_without_the_context_processor_a_form_page_is_still_bypassed() -> None:
    engine = _templates()
    engine[0]["OPTIONS"]["context_processors"] = PROCESSORS[:2]
    with override_settings(TEMPLATES=engine):
        first, second = visitor().get("/form/"), visitor().get("/form/")
    assert bypassed(first, "csrf") and bypassed(second, "csrf")
    assert token_in(first.content) != token_in(second.content)


def test_a_placeholder_a_filter_changed_fails_that_response_and_is_never_sent() -> None:
    client = visitor()
    client.raise_request_exception = False
    response = client.get("/mangled/")
    assert response.status_code == 500
    assert b"__MCACHE_HOLE_" not in response.content


# -- {% nocache %} holes and signed-in visitors --------------------------------------------------


def test_a_greeting_is_built_once_for_two_signed_in_users_and_an_anonymous_one() -> None:
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    anonymous, as_alice, as_bob = visitor(), visitor(alice), visitor(bob)
    pages = [as_alice.get("/greeting/"), as_bob.get("/greeting/"), anonymous.get("/greeting/")]
    assert [page["X-Cache"] for page in pages] == ["MISS", "HIT", "HIT"]
    assert rendered("greeting") == 1
    assert b"Hello, alice" in pages[0].content and b"bob" not in pages[0].content
    assert b"Hello, bob" in pages[1].content and b"alice" not in pages[1].content
    assert b"Sign in" in pages[2].content and b"Hello" not in pages[2].content
    assert all(b"Today's specials: soup" in page.content for page in pages)
    assert all("private" in page["Cache-Control"] for page in pages), "holes are per visitor"
    assert all("Cookie" in page["Vary"] for page in pages)


def test_an_async_view_shares_its_page_with_signed_in_visitors_too() -> None:
    alice = User.objects.create_user("alice")
    anonymous = visitor().get("/async-greeting/")
    mine = visitor(alice).get("/async-greeting/")
    assert (anonymous["X-Cache"], mine["X-Cache"]) == ("MISS", "HIT")
    assert b"Sign in" in anonymous.content and b"Hello, alice" in mine.content
    assert rendered("async_greeting") == 1


def test_a_background_refresh_keeps_the_token_a_hole() -> None:
    first = visitor().get("/refreshed-form/")
    caches["default"].invalidate("form")
    stale = visitor().get("/refreshed-form/")
    assert stale["X-Cache"] == "STALE" and token_in(stale.content) != token_in(first.content)
    wait_for(lambda: rendered("refreshed_form") == 2)
    wait_for(lambda: visitor().get("/refreshed-form/")["X-Cache"] == "HIT")
    fresh_visitor = visitor()
    fresh = fresh_visitor.get("/refreshed-form/")
    assert fresh["X-Cache"] == "HIT" and b"render 2" in fresh.content
    token = token_in(fresh.content)
    posted = fresh_visitor.post("/refreshed-form/", {"csrfmiddlewaretoken": token, "text": "x"})
    assert posted.status_code == 200, "the refreshed page's token is this visitor's own"


def test_a_refresh_is_stored_though_the_stale_response_asked_for_a_token_meanwhile() -> None:
    """Filling the stale page's CSRF hole marks the request (Django's get_token); the
    re-render, on another thread, must not take that mark for its own and refuse."""
    visitor().get("/late-form/")
    holes_site.late_render_may_go_on.clear()  # (the first response's holes set it)
    caches["default"].invalidate("late-form")
    stale = visitor().get("/late-form/")  # the re-render checks while its holes are filled
    assert stale["X-Cache"] == "STALE" and b"render 1" in stale.content
    holes_site.late_render_may_go_on.set()
    wait_for(lambda: visitor().get("/late-form/")["X-Cache"] == "HIT")
    assert rendered("late_form") == 2, "the first re-render was stored"


def test_a_page_reading_the_user_outside_a_hole_is_bypassed_for_signed_in_visitors() -> None:
    alice = User.objects.create_user("alice")
    first = visitor(alice).get("/leaky/")
    assert bypassed(first, "signed-in") and b"Signed in as alice" in first.content
    assert b"Hello, alice" in first.content, "the bypassed page's holes are filled too"
    anonymous = visitor().get("/leaky/")
    assert anonymous["X-Cache"] == "MISS"
    again = visitor(alice).get("/leaky/")
    assert bypassed(again, "signed-in") and b"Signed in as alice" in again.content
    assert visitor().get("/leaky/")["X-Cache"] == "HIT"


def test_a_page_reading_the_session_outside_a_hole_is_bypassed_with_its_reason() -> None:
    alice = User.objects.create_user("alice")
    assert bypassed(visitor(alice).get("/reads-session/"), "session")


def test_a_hole_renders_with_the_context_the_view_declares() -> None:
    empty, full = visitor(), visitor()
    full.cookies["cart"] = "3"
    first, second = empty.get("/shop/"), full.get("/shop/")
    assert (first["X-Cache"], second["X-Cache"]) == ("MISS", "HIT")
    assert b"Cart: 0 items" in first.content and b"Cart: 3 items" in second.content
    assert rendered("shop") == 1


def test_a_failed_hole_fails_that_response_only_not_the_cached_page() -> None:
    failing = visitor()
    failing.cookies["fail"] = "1"
    failing.raise_request_exception = False
    assert failing.get("/shop/").status_code == 500
    after = visitor().get("/shop/")
    assert after.status_code == 200 and after["X-Cache"] == "HIT"
    assert b"Cart: 0 items" in after.content and rendered("shop") == 1


def test_a_process_that_never_parsed_the_template_fills_the_hole_by_loading_it() -> None:
    visitor().get("/greeting/")
    django_holes._NODES.clear()  # as in a process started since the page was stored
    for loader in engines["django"].engine.template_loaders:
        getattr(loader, "reset", lambda: None)()
    alice = User.objects.create_user("alice")
    page = visitor(alice).get("/greeting/")
    assert page["X-Cache"] == "HIT" and b"Hello, alice" in page.content


def test_a_hole_no_process_can_find_makes_the_page_unservable_not_half_filled() -> None:
    ann, bo = visitor(), visitor()
    ann.cookies["who"], bo.cookies["who"] = "ann", "bo"
    assert ann.get("/inline/").content == b"inline ann"
    known = dict(django_holes._NODES)
    django_holes._NODES.clear()  # a template from a string: no name to load it again by
    try:
        page = bo.get("/inline/")
    finally:
        django_holes._NODES.update(known)
    assert bypassed(page, "hole") and page.content == b"inline bo"
    assert bo.get("/inline/")["X-Cache"] == "HIT"


def test_nocache_inside_a_cached_fragment_is_refused_when_the_template_is_parsed() -> None:
    source = (
        "{% load mcache %}{% cachedblock 60 'side' %}{% nocache %}{{ user }}"
        "{% endnocache %}{% endcachedblock %}"
    )
    with pytest.raises(TemplateSyntaxError, match="cannot sit inside"):
        Template(source)


def test_outside_a_cached_page_nocache_renders_in_place() -> None:
    source = "{% load mcache %}a{% nocache %}{{ word }}{% endnocache %}c"
    from django.template import Context

    assert Template(source).render(Context({"word": "b"})) == "abc"
    assert core_holes.current_collector() is None


@pytest.mark.parametrize("serializer", ["pickle", "json", "msgpack"])
@pytest.mark.parametrize("store", ["memcached", "redis"])
def test_holes_come_back_from_every_store_and_serializer(
    request: pytest.FixtureRequest, store: str, serializer: str
) -> None:
    url = request.getfixturevalue(f"{store}_url")
    entry = {
        "BACKEND": settings.CACHES["default"]["BACKEND"],
        "LOCATION": url,
        "KEY_PREFIX": f"holes-{serializer}",
        "OPTIONS": {"serializer": serializer},
    }
    with override_settings(CACHES={"default": entry}):
        caches["default"].clear()
        alice = User.objects.create_user("alice")
        pages = [visitor().get("/greeting/"), visitor(alice).get("/greeting/")]
        forms = [visitor().get("/form/"), visitor().get("/form/")]
    assert [page["X-Cache"] for page in pages + forms] == ["MISS", "HIT", "MISS", "HIT"]
    assert b"Sign in" in pages[0].content and b"Hello, alice" in pages[1].content
    assert token_in(forms[0].content) != token_in(forms[1].content)


# -- cookies that matter -------------------------------------------------------------------------


def test_requests_with_only_other_cookies_get_the_shared_page() -> None:
    plain, tracked, consenting = visitor(), visitor(), visitor()
    tracked.cookies["_ga"] = "GA1.2.3"
    consenting.cookies["consent"] = "yes"
    pages = [plain.get("/themed/"), tracked.get("/themed/"), consenting.get("/themed/")]
    assert [page["X-Cache"] for page in pages] == ["MISS", "HIT", "HIT"]
    assert all(page["Vary"] == "Cookie" for page in pages)
    dark = visitor()
    dark.cookies["theme"] = "dark"
    dark.cookies["_ga"] = "GA1.9.9"
    assert dark.get("/themed/").content == b"theme=dark"
    assert dark.get("/themed/")["X-Cache"] == "HIT"
    assert rendered("themed") == 2


def test_a_vary_cookie_page_without_declared_cookies_is_bypassed() -> None:
    assert bypassed(visitor().get("/site-themed/"), "vary")


def test_the_cache_options_declare_the_cookies_of_every_page() -> None:
    entry = deepcopy(settings.CACHES)
    entry["default"]["OPTIONS"] = {"page_cookies": ["theme"]}
    with override_settings(CACHES=entry):
        caches["default"].clear()
        tracked = visitor()
        tracked.cookies["_ga"] = "GA1.2.3"
        assert visitor().get("/site-themed/")["X-Cache"] == "MISS"
        assert tracked.get("/site-themed/")["X-Cache"] == "HIT"


@pytest.mark.parametrize("value", ["theme", [""], [3]])
def test_a_bad_page_cookies_option_names_the_setting(value: object) -> None:
    from django_mcache.config import cache_from_settings

    with pytest.raises(ConfigError, match=r"OPTIONS\['page_cookies'\] must be a list"):
        cache_from_settings("memory://", {"OPTIONS": {"page_cookies": value}})


def test_a_bad_cookies_argument_fails_at_decoration() -> None:
    from django_mcache.views import cached_view

    with pytest.raises(TypeError, match=r"cached_view\(cookies=...\) must be a list"):
        cached_view(60, cookies="theme")


@pytest.mark.parametrize("value", [["user"], {"cart": 3}, "user"])
def test_a_bad_hole_context_fails_at_decoration_saying_what_to_write(value: object) -> None:
    from django_mcache.views import cached_view

    with pytest.raises(TypeError, match="hole_context must be a dict of names to callables"):
        cached_view(60, hole_context=value)


# -- windows for caches in front ----------------------------------------------------------------


def test_cdn_headers_carry_the_entrys_ttl_and_stale_ttl() -> None:
    first, second = visitor().get("/edge/"), visitor().get("/edge/")
    for page in (first, second):
        control = {d.strip() for d in page["Cache-Control"].split(",")}
        assert {"max-age=60", "s-maxage=60", "stale-while-revalidate=600"} <= control
        assert "stale-if-error=600" in control
        assert page["CDN-Cache-Control"] == (
            "max-age=60, stale-while-revalidate=600, stale-if-error=600"
        )
        assert int(page["Age"]) >= 0
    caches["default"].invalidate("cdn")
    stale = visitor().get("/edge/")
    assert stale["X-Cache"] == "STALE" and stale["Cache-Control"] == "max-age=0"
    assert not stale.has_header("CDN-Cache-Control")


def test_pages_of_one_visitor_never_carry_cdn_headers() -> None:
    alice = User.objects.create_user("alice")
    page = visitor(alice).get("/edge-mine/")
    assert "private" in page["Cache-Control"] and not page.has_header("CDN-Cache-Control")


def test_the_cache_options_turn_cdn_headers_on_for_every_page() -> None:
    assert not visitor().get("/site-edge/").has_header("CDN-Cache-Control")
    entry = deepcopy(settings.CACHES)
    entry["default"]["OPTIONS"] = {"page_cdn": True, "stale_ttl": 90}
    with override_settings(CACHES=entry):
        caches["default"].clear()
        page = visitor().get("/site-edge/")
    assert page["CDN-Cache-Control"] == "max-age=30, stale-while-revalidate=90, stale-if-error=90"
