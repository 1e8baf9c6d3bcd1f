"""@cached_view through Django's test client, SQLite and the real stores."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.http.response import HttpResponseBase
from django.test import Client, RequestFactory, override_settings
from django.utils import translation

from mcache.observe import outcome
from tests.dj import views
from tests.dj.blog.models import Post
from tests.memcached_reads import record_reads

BACKEND = "django_mcache.backend.MCacheBackend"
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    caches["default"].clear()
    views.renders.clear()
    yield


def rendered(name: str) -> int:
    return views.renders.count(name)


def test_hit_after_miss_costs_no_query(client: Client, django_assert_num_queries) -> None:
    Post.objects.create(title="hello")
    with django_assert_num_queries(1):
        first = client.get("/posts/")
    with django_assert_num_queries(0):
        second = client.get("/posts/")
    assert first.content == second.content == b"posts: hello q="
    assert first["X-Cache"] == "MISS" and second["X-Cache"] == "HIT"
    assert "max-age=60" in second["Cache-Control"]


def test_query_strings_are_sorted_into_one_entry_and_kept_apart(client: Client) -> None:
    assert client.get("/posts/?a=1&b=2")["X-Cache"] == "MISS"
    assert client.get("/posts/?b=2&a=1")["X-Cache"] == "HIT"
    assert client.get("/posts/?a=2&b=2")["X-Cache"] == "MISS"
    assert rendered("post_list") == 2


def test_declared_vary_headers_separate_entries(client: Client) -> None:
    fr = client.get("/lang/", HTTP_ACCEPT_LANGUAGE="fr")
    de = client.get("/lang/", HTTP_ACCEPT_LANGUAGE="de")
    again = client.get("/lang/", HTTP_ACCEPT_LANGUAGE="fr")
    absent = client.get("/lang/")
    empty = client.get("/lang/", HTTP_ACCEPT_LANGUAGE="")
    assert (fr.content, de.content, again.content) == (b"lang=fr", b"lang=de", b"lang=fr")
    assert again["X-Cache"] == "HIT"
    assert absent.content == b"lang=None" and empty.content == b"lang="
    assert rendered("by_language") == 4, "an absent header is not an empty one"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("/undeclared-vary/", "vary"),
        ("/vary-star/", "vary"),
        ("/cookie/?who=alice", "set-cookie"),
        ("/private/?who=alice", "private"),
        ("/no-store/", "private"),
        ("/no-cache/", "private"),
        ("/max-age-zero/", "private"),
        ("/missing/", "status"),
        ("/stream/", "streaming"),
    ],
)
def test_never_cached_responses(client: Client, url: str, reason: str) -> None:
    first, second = client.get(url), client.get(url)
    assert bypassed(first, reason) and bypassed(second, reason)
    assert len(views.renders) == 2, "rendered for every request"


def test_one_visitors_cookie_is_never_served_to_another(client: Client) -> None:
    alice = client.get("/cookie/?who=alice")
    bob = Client().get("/cookie/?who=alice")
    assert alice.cookies["visitor"].value == "alice"
    assert bob.cookies["visitor"].value == "alice"  # bob's own render, not alice's response
    assert rendered("sets_cookie") == 2


def test_a_bypass_is_logged_at_debug_once_per_view_and_reason(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    outcome._bypasses.reset()  # what earlier tests logged does not count against this one
    with caplog.at_level(logging.DEBUG, logger="mcache.views"):
        for _ in range(3):
            client.get("/stream/")
            client.get("/missing/")
    lines = [r.getMessage() for r in caplog.records if r.name == "mcache.views"]
    assert len(lines) == 2, lines
    assert "(streaming: a streamed response), e.g. GET /stream/" in lines[0]
    assert "(status: the response's status is not 200), e.g. GET /missing/" in lines[1]


def test_post_and_authorization_are_never_cached(client: Client) -> None:
    assert client.post("/cbv/").json() == {"posted": True}
    assert bypassed(client.post("/posts/"), "method")
    with_auth = client.get("/posts/", HTTP_AUTHORIZATION="Bearer secret")
    assert bypassed(with_auth, "authorization")
    assert client.get("/posts/")["X-Cache"] == "MISS", "the credentialed render was not stored"


def test_signed_in_users_bypass_unless_per_user() -> None:
    alice = User.objects.create_user("alice", password="pw")
    User.objects.create_user("bob", password="pw")
    anonymous = Client().get("/whoami/")
    signed_in = Client()
    signed_in.force_login(alice)
    page = signed_in.get("/whoami/")
    assert anonymous.content == b"user=anonymous" and page.content == b"user=alice"
    assert bypassed(page, "signed-in"), "a signed-in user's page never goes to the shared cache"
    assert Client().get("/whoami/")["X-Cache"] == "HIT"

    alice_client, bob_client = Client(), Client()
    alice_client.force_login(alice)
    bob_client.login(username="bob", password="pw")
    assert alice_client.get("/mine/").content == b"mine=alice"
    assert bob_client.get("/mine/").content == b"mine=bob"
    hit = alice_client.get("/mine/")
    assert hit.content == b"mine=alice" and hit["X-Cache"] == "HIT"


def test_tag_bump_and_model_tag_rebuild(client: Client) -> None:
    post = Post.objects.create(title="first")
    assert client.get(f"/posts/{post.pk}/").content == b"post first"
    Post.objects.filter(pk=post.pk).update(title="edited")
    assert client.get(f"/posts/{post.pk}/").content == b"post first", "cached"
    caches["default"].invalidate(f"post:{post.pk}")
    assert client.get(f"/posts/{post.pk}/").content == b"post edited"
    Post.objects.filter(pk=post.pk).update(title="again")
    caches["default"].invalidate("model:blog.post")  # what depends_on=[Post] registers
    response = client.get(f"/posts/{post.pk}/")
    assert response.content == b"post again" and response["X-Cache"] == "MISS"


def test_stale_page_is_served_while_one_request_rebuilds(client: Client) -> None:
    assert client.get("/slow/")["X-Cache"] == "MISS"
    caches["default"].invalidate("slow")  # stale now, still stored
    results: list = []
    threads = [
        threading.Thread(target=lambda: results.append(Client().get("/slow/"))) for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    states = sorted(r["X-Cache"] for r in results)
    assert states.count("MISS") == 1 and states.count("STALE") == 5, states
    assert rendered("slow") == 2
    assert client.get("/slow/")["X-Cache"] == "HIT"


def test_head_is_served_from_the_get_entry(client: Client) -> None:
    assert client.head("/posts/").status_code == 200
    assert rendered("post_list") == 1 and client.get("/posts/")["X-Cache"] == "MISS"
    assert client.head("/posts/")["X-Cache"] == "HIT"


def test_a_head_that_finds_no_page_is_no_miss(client: Client, async_client) -> None:
    """``curl -I`` on a page nobody stored answers nothing from the cache: no miss counted."""
    import asyncio

    core = caches["default"].mcache

    def counted() -> tuple[int, int]:
        counters = core.stats()["cache"]
        return counters["hits"], counters["misses"]

    before = counted()
    assert client.head("/posts/")["X-Cache"] == "BYPASS"
    assert asyncio.run(async_client.head("/async/"))["X-Cache"] == "BYPASS"
    assert counted() == before
    client.get("/posts/")
    assert counted() == (before[0], before[1] + 1)  # the GET's miss
    assert client.head("/posts/")["X-Cache"] == "HIT"
    assert counted() == (before[0] + 1, before[1] + 1)  # a HEAD answered from the cache


def test_async_and_class_based_views(client: Client, async_client) -> None:
    assert client.get("/cbv/")["X-Cache"] == "MISS"
    assert client.get("/cbv/").json() == {"view": "class based"}
    assert rendered("class_based") == 1

    import asyncio

    async def twice():
        return [await async_client.get("/async/"), await async_client.get("/async/")]

    first, second = asyncio.run(twice())
    assert (first["X-Cache"], second["X-Cache"]) == ("MISS", "HIT")
    assert second.content == b"async page"


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_hit_is_one_request_to_one_server(
    memcached_cluster_url: str, monkeypatch, protocol: str
) -> None:
    location = f"{memcached_cluster_url}?protocol={protocol}"
    default = {"BACKEND": BACKEND, "LOCATION": location}
    caches_setting = {"default": {**default, "OPTIONS": {"near_ttl": None}}}  # the wire
    with override_settings(CACHES=caches_setting):
        client = Client()
        assert client.get("/posts/")["X-Cache"] == "MISS"
        requests = record_reads(monkeypatch)
        assert client.get("/posts/")["X-Cache"] == "HIT"
        assert [keys for _, keys in requests] == [2], "the page and its tag's version, at once"


def test_a_page_holding_a_csrf_token_is_never_shared() -> None:
    alice, bob = Client(), Client()
    first = alice.get("/csrf/")
    second = bob.get("/csrf/")
    assert bypassed(first, "csrf") and bypassed(second, "csrf")
    assert first.cookies["csrftoken"].value != second.cookies["csrftoken"].value
    assert rendered("csrf_form") == 2, "each visitor's form carries their own token"


def test_a_page_that_reads_the_session_is_shared_only_by_visitors_without_one() -> None:
    assert Client().get("/cart/").content == b"cart=0"
    anonymous = Client().get("/cart/")
    assert anonymous.content == b"cart=0" and anonymous["X-Cache"] == "HIT"
    assert "Cookie" in anonymous["Vary"]
    shopper = Client()
    session = shopper.session
    session["cart"] = 3
    session.save()
    shopper.cookies["sessionid"] = session.session_key
    mine = shopper.get("/cart/")
    assert mine.content == b"cart=3" and bypassed(mine, "session")
    assert Client().get("/cart/").content == b"cart=0", "the shopper's page was not stored"


def test_a_view_that_changes_the_session_is_never_cached() -> None:
    first, second = Client().get("/remembers/"), Client().get("/remembers/")
    assert bypassed(first, "session") and bypassed(second, "session")
    assert "sessionid" in first.cookies
    assert rendered("remembers") == 2


def test_a_user_signed_in_without_a_session_is_not_shared() -> None:
    alice = User.objects.create_user("alice")
    request = RequestFactory().get("/whoami/")
    request.user = alice  # e.g. an API-key middleware: no session cookie at all
    page = views.whoami(request)
    assert page.content == b"user=alice" and bypassed(page, "signed-in")
    assert Client().get("/whoami/").content == b"user=anonymous"


def test_flash_messages_are_never_shared() -> None:
    alice = Client()
    first = alice.get("/flash/?say=secret-for-alice")
    assert b"secret-for-alice" in first.content and bypassed(first, "messages")
    other = Client().get("/flash/")
    assert b"secret-for-alice" not in other.content
    assert rendered("flash") == 2


def test_per_user_vary_cookie_is_not_shared_between_anonymous_visitors() -> None:
    dark = Client()
    dark.cookies["theme"] = "dark-alice"
    assert dark.get("/theme/").content == b"theme=dark-alice"
    assert Client().get("/theme/").content == b"theme=None"
    assert rendered("theme") == 2


def test_per_user_pages_are_private_for_proxies() -> None:
    alice = User.objects.create_user("alice", password="pw")
    client = Client()
    client.force_login(alice)
    client.get("/mine/")
    hit = client.get("/mine/")
    assert hit["X-Cache"] == "HIT" and "private" in hit["Cache-Control"]


def test_http_and_https_pages_are_kept_apart(client: Client) -> None:
    assert client.get("/posts/")["X-Cache"] == "MISS"
    assert client.get("/posts/", secure=True)["X-Cache"] == "MISS"
    assert client.get("/posts/", secure=True)["X-Cache"] == "HIT"


def wait_for(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_background_refresh_renders_in_the_requests_language(client: Client) -> None:
    with translation.override("fr"):
        assert client.get("/language/").content.startswith(b"language=fr")
        caches["default"].invalidate("language")
        stale = client.get("/language/")
        assert stale["X-Cache"] == "STALE"
        wait_for(lambda: rendered("language") == 2)
        wait_for(lambda: client.get("/language/")["X-Cache"] == "HIT")
        fresh = client.get("/language/")
    assert fresh.content.startswith(b"language=fr") and fresh.content != stale.content


def test_async_view_refreshes_in_the_background_under_wsgi(client: Client) -> None:
    first = client.get("/async-background/")
    caches["default"].invalidate("async-bg")
    assert first["Cache-Status"] == "mcache; fwd=uri-miss; stored"  # RFC 9211
    stale = client.get("/async-background/")
    assert stale["X-Cache"] == "STALE" and stale.content == first.content
    assert stale["Cache-Status"] == "mcache; fwd=stale"
    wait_for(lambda: rendered("async_background") == 2)
    wait_for(lambda: client.get("/async-background/").content != first.content)
    hit = client.get("/async-background/")
    assert (hit["X-Cache"], hit["Cache-Status"]) == ("HIT", "mcache; hit")
    assert rendered("async_background") == 2


def test_the_state_header_can_be_renamed_or_left_out(client: Client) -> None:
    client.get("/renamed-header/")
    renamed = client.get("/renamed-header/")
    assert renamed["X-Page-Cache"] == "HIT" and "X-Cache" not in renamed
    client.get("/no-header/")
    quiet = client.get("/no-header/")
    assert "X-Cache" not in quiet and quiet.content == b"quiet"
    assert rendered("no_header") == 1, "cached all the same"


def test_a_ttl_of_zero_caches_nothing_as_with_cache_page() -> None:
    from django.http import HttpResponse

    from django_mcache.views import cached_view

    calls = []

    @cached_view(0)
    def page(request):
        calls.append(request.path)
        return HttpResponse("fresh every time")

    request = RequestFactory().get("/zero/")
    responses = [page(request), page(request)]
    assert len(calls) == 2
    assert all("X-Cache" not in response for response in responses)
    with pytest.raises(TypeError, match="ttl must be a number of seconds"):
        cached_view("60")


def test_a_cache_timeout_of_zero_turns_page_caching_off() -> None:
    from django.http import HttpResponse

    from django_mcache.views import cached_view

    calls = []

    @cached_view()
    def page(request):
        calls.append(1)
        return HttpResponse("rendered")

    zero = {
        "default": {
            "BACKEND": "django_mcache.backend.MCacheBackend",
            "LOCATION": "memory://",
            "TIMEOUT": 0,
        }
    }
    with override_settings(CACHES=zero):
        request = RequestFactory().get("/zero-timeout/")
        assert all(bypassed(page(request), "disabled") for _ in range(2))
    assert len(calls) == 2


def bypassed(response: HttpResponseBase, reason: str) -> bool:
    """Return whether ``response`` says it was not cached, for ``reason`` (in ``X-Cache`` and
    in RFC 9211's ``Cache-Status``)."""
    return (response["X-Cache"], response["X-Cache-Reason"], response["Cache-Status"]) == (
        "BYPASS",
        reason,
        f"mcache; fwd=bypass; detail={reason}",
    )
