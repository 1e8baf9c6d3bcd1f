"""The edge in Django: a page ``@cached_view`` stored is answered by ``WSGIEdge`` /
``ASGIEdge`` before Django builds a request or runs a middleware, with the headers the
site's middleware gave it, and only to a visitor ``@cached_view`` would give it to.

Each test runs Django's own WSGI (or ASGI) handler, with the test settings' session,
CSRF, auth and messages middleware and a middleware that counts the requests that reach
Django, on a real memcached.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from django.conf import settings
from django.core.cache import caches
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.test import override_settings
from django.urls import path
from django.utils import translation

from django_mcache.views import cached_view
from mcache.edge import ASGIEdge, WSGIEdge
from mcache.errors import ConfigError
from tests.dj.test_backend import mcache_caches
from tests.memcached_reads import record_reads
from tests.servers import memcached_process

pytestmark = pytest.mark.django_db  # Django's handler closes old connections per request

REACHED: list[str] = []
_PREFIXES = itertools.count()


class Counting:
    """A middleware that notes each request reaching Django and adds a header of its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        REACHED.append(request.path)
        response = self.get_response(request)
        response["X-Site"] = "added by a middleware"
        return response


class Gzipping:
    """A middleware that rewrites every body (as GZipMiddleware does for some clients)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.content = gzip.compress(response.content, mtime=0)
        response["Content-Encoding"] = "gzip"
        return response


@cached_view(60, tags=["posts"])
def listing(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"posts, rendered {len(REACHED)}")


@cached_view(60, tags=["themed"], cookies=["theme"])
def themed(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"theme {request.COOKIES.get('theme', 'light')}")


@cached_view(60, vary_on_headers=["Accept-Language"])
def greeting(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(f"hello in {request.headers.get('Accept-Language', 'en')}")
    response["Vary"] = "Accept-Language"
    return response


@cached_view(60, per_user=True)
def mine(request: HttpRequest) -> HttpResponse:
    return HttpResponse("yours")


@cached_view(60, hole_context={})
def with_form(request: HttpRequest) -> HttpResponse:
    template = engines["django"].from_string("{% load mcache %}<form>{% csrf_token %}</form>")
    return HttpResponse(template.render({}, request))


@cached_view(60)
async def async_listing(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"async posts, rendered {len(REACHED)}")


urlpatterns = [
    path("posts/", listing),
    path("themed/", themed),
    path("greeting/", greeting),
    path("mine/", mine),
    path("form/", with_form),
    path("async/", async_listing),
]

COUNTING = "tests.dj.test_edge.Counting"


@pytest.fixture
def site(memcached_url: str) -> Iterator[None]:
    REACHED.clear()
    prefix = f"edge-{next(_PREFIXES)}"
    with override_settings(
        CACHES=mcache_caches(memcached_url, KEY_PREFIX=prefix),
        ROOT_URLCONF="tests.dj.test_edge",
        MIDDLEWARE=[COUNTING, *settings.MIDDLEWARE],
        ALLOWED_HOSTS=["testserver"],
    ):
        yield


class Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.body = status, body
        self.headers = dict(headers)
        self.header_list = headers


def call(app: Any, target: str, method: str = "GET", **environ: str) -> Answer:
    """Call a WSGI application as a server would, and close its body."""
    path, _, query = target.partition("?")
    env: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_HOST": "testserver",
    }
    env.update(environ)
    setup_testing_defaults(env)
    started: list[Any] = []
    body = app(env, lambda status, headers, exc_info=None: started.append((status, headers)))
    try:
        data = b"".join(body)
    finally:
        getattr(body, "close", lambda: None)()
    return Answer(started[0][0], started[0][1], data)


def edge(**options: Any) -> WSGIEdge:
    return WSGIEdge(WSGIHandler(), "default", **options)


def test_a_stored_page_is_answered_before_django_runs(site: None) -> None:
    app = edge()
    first = call(app, "/posts/")
    assert first.headers["X-Cache"] == "MISS" and REACHED == ["/posts/"]
    second = call(app, "/posts/")
    assert REACHED == ["/posts/"], "the second request reached Django"
    assert second.body == first.body == b"posts, rendered 1"
    assert second.headers["X-Cache"] == "HIT"
    assert second.headers["Cache-Status"] == "mcache; hit; detail=edge"
    assert second.headers["X-Site"] == "added by a middleware", "the middleware's header kept"
    same = {k: v for k, v in first.headers.items() if k not in ("X-Cache", "Cache-Status")}
    assert {k: v for k, v in second.headers.items() if k in same} == same
    kept = app.edge.learned.recipes.values()
    assert all(recipe.record.page == () for recipe in kept), "a recipe holds no page body"
    head = call(app, "/posts/", "HEAD")
    assert head.body == b"" and head.headers == {**second.headers}
    assert REACHED == ["/posts/"]


def test_an_edge_hit_is_one_read_of_the_page_and_its_tags_version(
    site: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = edge()
    call(app, "/posts/")
    requests = record_reads(monkeypatch)
    assert call(app, "/posts/").headers["Cache-Status"] == "mcache; hit; detail=edge"
    assert [keys for _, keys in requests] == [2], "the page and its tag's version, at once"


def test_an_invalidated_page_goes_to_django_once_then_is_answered_again(site: None) -> None:
    app = edge()
    call(app, "/posts/")
    call(app, "/posts/")
    caches["default"].mcache.invalidate("posts")
    rebuilt = call(app, "/posts/")
    assert REACHED == ["/posts/", "/posts/"] and rebuilt.body == b"posts, rendered 2"
    assert rebuilt.headers["X-Cache"] == "MISS"
    again = call(app, "/posts/")
    assert REACHED == ["/posts/", "/posts/"] and again.body == b"posts, rendered 2"


@pytest.fixture
def near_site(memcached_url: str) -> Iterator[None]:
    """The site on a cache with a near tier (``near_ttl``)."""
    REACHED.clear()
    prefix = f"edge-near-{next(_PREFIXES)}"
    with override_settings(
        CACHES=mcache_caches(memcached_url, KEY_PREFIX=prefix, OPTIONS={"near_ttl": 30}),
        ROOT_URLCONF="tests.dj.test_edge",
        MIDDLEWARE=[COUNTING, *settings.MIDDLEWARE],
        ALLOWED_HOSTS=["testserver"],
    ):
        yield


def test_with_a_near_cache_an_edge_hit_reads_nothing_and_makes_its_answer_once(
    near_site: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = edge()
    first = call(app, "/posts/")
    stored = call(app, "/posts/")  # answered at the edge; the page is now kept near
    requests = record_reads(monkeypatch)
    near = [call(app, "/posts/") for _ in range(3)]
    assert requests == [], "a near hit reads nothing from memcached"
    assert REACHED == ["/posts/"]
    for answer in near:
        assert answer.body == first.body == b"posts, rendered 1"
        assert answer.header_list == stored.header_list
        assert answer.headers["Cache-Status"] == "mcache; hit; detail=edge"
    copy = caches["default"].mcache.parts.near.copies
    made = [c.derived for c in copy.values() if c.derived is not None]
    assert len(made) == 1, "the answer is made once and kept with the near copy"
    assert call(app, "/posts/", "HEAD").body == b""
    assert requests == [] and REACHED == ["/posts/"]


def test_with_a_near_cache_an_invalidated_page_is_rebuilt_then_answered_anew(
    near_site: None,
) -> None:
    app = edge()
    for _ in range(3):
        call(app, "/posts/")
    caches["default"].mcache.invalidate("posts")
    rebuilt = call(app, "/posts/")
    assert REACHED == ["/posts/", "/posts/"] and rebuilt.body == b"posts, rendered 2"
    for _ in range(3):
        again = call(app, "/posts/")
        assert again.body == b"posts, rendered 2", "never the answer made for the old page"
        assert again.headers["X-Cache"] == "HIT"
    assert REACHED == ["/posts/", "/posts/"]


def test_a_store_gone_after_a_lesson_sends_requests_to_django_without_an_error() -> None:
    node = memcached_process().start()
    REACHED.clear()
    try:
        caches_setting = mcache_caches(f"memcached://{node.address}", KEY_PREFIX="gone")
        with override_settings(
            CACHES=caches_setting,
            ROOT_URLCONF="tests.dj.test_edge",
            MIDDLEWARE=[COUNTING, *settings.MIDDLEWARE],
            ALLOWED_HOSTS=["testserver"],
        ):
            app = edge()
            call(app, "/posts/")
            assert call(app, "/posts/").headers["Cache-Status"].endswith("detail=edge")
            node.kill()
            answer = call(app, "/posts/")
    finally:
        node.kill()
    assert answer.status.startswith("200") and answer.body == b"posts, rendered 2"
    assert REACHED == ["/posts/", "/posts/"], "the edge sent it on; Django built it"


@pytest.mark.parametrize(
    "environ",
    [
        {"HTTP_COOKIE": "sessionid=abc"},
        {"HTTP_AUTHORIZATION": "Bearer x"},
        {"REMOTE_USER": "ann"},
        {"HTTP_IF_NONE_MATCH": '"x"'},
        {"HTTP_RANGE": "bytes=0-3"},
        {"HTTP_X_API_KEY": "k"},
        {"REQUEST_METHOD": "POST"},
    ],
    ids=["session", "authorization", "remote-user", "conditional", "range", "private", "post"],
)
def test_a_visitor_who_may_be_someone_goes_to_django(site: None, environ: dict) -> None:
    app = edge(private_headers=["X-API-Key"])
    call(app, "/posts/")
    method = environ.pop("REQUEST_METHOD", "GET")
    call(app, "/posts/", method, **environ)
    assert REACHED == ["/posts/", "/posts/"]


def test_other_cookies_are_answered_and_declared_ones_key_the_page(site: None) -> None:
    app = edge()
    call(app, "/posts/")
    analytics = call(app, "/posts/", HTTP_COOKIE="_ga=GA1.2.3; consent=yes")
    assert analytics.headers["X-Cache"] == "HIT" and REACHED == ["/posts/"]
    light = call(app, "/themed/")
    dark = call(app, "/themed/", HTTP_COOKIE="theme=dark")
    assert (light.body, dark.body) == (b"theme light", b"theme dark")
    assert REACHED == ["/posts/", "/themed/", "/themed/"]
    assert call(app, "/themed/", HTTP_COOKIE="theme=dark; _ga=1").body == b"theme dark"
    assert call(app, "/themed/").body == b"theme light"
    assert len(REACHED) == 3, "each theme's page answered at the edge once learned"


def test_each_variant_of_a_varied_page_is_its_own(site: None) -> None:
    app = edge()
    english = call(app, "/greeting/", HTTP_ACCEPT_LANGUAGE="en")
    french = call(app, "/greeting/", HTTP_ACCEPT_LANGUAGE="fr")
    assert call(app, "/greeting/", HTTP_ACCEPT_LANGUAGE="fr").body == french.body
    assert call(app, "/greeting/", HTTP_ACCEPT_LANGUAGE="en").body == english.body
    assert english.body != french.body and len(REACHED) == 2


@pytest.mark.parametrize("target", ["/mine/", "/form/"], ids=["per-user", "holes"])
def test_a_page_for_one_visitor_is_never_answered_at_the_edge(site: None, target: str) -> None:
    app = edge()
    for _ in range(3):
        call(app, target)
    assert [target] * 3 == REACHED


def test_a_body_a_middleware_rewrote_is_never_answered_at_the_edge(site: None) -> None:
    with override_settings(MIDDLEWARE=[COUNTING, "tests.dj.test_edge.Gzipping"]):
        app = edge()
        for _ in range(3):
            answer = call(app, "/posts/")
    assert gzip.decompress(answer.body) == b"posts, rendered 1", "the cached page, compressed"
    assert REACHED == ["/posts/"] * 3


def test_no_page_is_answered_at_the_edge_when_a_middleware_chooses_the_language(
    site: None,
) -> None:
    locale = "django.middleware.locale.LocaleMiddleware"
    with override_settings(MIDDLEWARE=[*settings.MIDDLEWARE, locale]):  # Counting's first
        app = edge()
        try:
            for _ in range(3):
                call(app, "/posts/")
        finally:
            translation.deactivate()  # the middleware left its language active in this thread
    assert REACHED == ["/posts/"] * 3


def test_a_page_of_another_cache_is_not_answered(site: None, memcached_url: str) -> None:
    other = {"BACKEND": "django_mcache.backend.MCacheBackend", "LOCATION": "memory://"}
    with override_settings(CACHES={**settings.CACHES, "other": other}):
        app = WSGIEdge(WSGIHandler(), "other")
        for _ in range(2):
            call(app, "/posts/")
    assert REACHED == ["/posts/"] * 2


def test_a_wrong_cache_fails_at_start_up_naming_the_setting(site: None) -> None:
    with pytest.raises(ConfigError, match="no such cache in CACHES"):
        WSGIEdge(WSGIHandler(), "nope")
    locmem = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    with (
        override_settings(CACHES={**settings.CACHES, "plain": locmem}),
        pytest.raises(ConfigError, match="MCacheBackend"),
    ):
        WSGIEdge(WSGIHandler(), "plain")


def asgi_call(app: Any, target: str, method: str = "GET") -> Answer:
    """Call an ASGI application as a server would."""
    path, _, query = target.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"testserver")],
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 5000),
    }
    messages: list[dict] = []

    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays until the response is sent
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        messages.append(message)

    asyncio.run(app(scope, receive, send))
    start = messages[0]
    headers = [(n.decode(), v.decode()) for n, v in start["headers"]]
    body = b"".join(m.get("body", b"") for m in messages[1:])
    return Answer(str(start["status"]), headers, body)


@pytest.mark.parametrize("target", ["/posts/", "/async/"], ids=["sync-view", "async-view"])
def test_the_asgi_edge_answers_a_stored_page_before_django_runs(site: None, target: str) -> None:
    app = ASGIEdge(ASGIHandler(), "default")
    first = asgi_call(app, target)
    second = asgi_call(app, target)
    assert first.headers["X-Cache"] == "MISS" and second.headers["X-Cache"] == "HIT"
    assert second.body == first.body and [target] == REACHED
    assert second.headers["X-Site"] == "added by a middleware"
    assert asgi_call(app, target, "HEAD").body == b"" and [target] == REACHED
