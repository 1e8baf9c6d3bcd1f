"""Sessions never answer 500 for a cache failure: ``django_mcache.sessions`` with every
session server SIGKILLed, on real memcached and Redis.

With Django's sessions app installed (the default site), sessions are written through to
the database: a visitor signed in before the outage stays signed in, one signs in during
it, and servers that come back empty lose nothing. Without the app, sessions live in the
cache alone: nobody stays signed in while it is down, but no request fails. Either way
a store that is down is asked once per request, and session reads are counted apart
from the cache's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth import authenticate, login, logout
from django.contrib.auth.models import User
from django.core.cache import caches
from django.http import HttpResponse
from django.test import Client, override_settings
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from django_mcache import sessions
from tests.servers import ServerProcess, memcached_process, redis_process

pytestmark = pytest.mark.django_db
BACKEND = "django_mcache.backend.MCacheBackend"


@csrf_exempt
def sign_in(request):
    user = authenticate(request, username=request.POST["name"], password=request.POST["pw"])
    login(request, user)  # a new session key: Django's create() loop, as the admin's login
    return HttpResponse("signed in")


def sign_out(request):
    logout(request)
    return HttpResponse("signed out")


def whoami(request):
    request.session["seen"] = request.session.get("seen", 0) + 1  # a save on every request
    return HttpResponse(f"user={request.user.username or 'anonymous'}")


urlpatterns = [path("in/", sign_in), path("out/", sign_out), path("whoami/", whoami)]


@pytest.fixture(params=["memcached", "redis"])
def servers(request: pytest.FixtureRequest, memcached_nodes) -> Iterator[list[ServerProcess]]:
    """Session servers of the test's own (two memcached with every session on both, or one
    Redis), so killing them disturbs nobody; the site's settings point at them."""
    if request.param == "memcached":
        nodes = [memcached_process().start() for _ in range(2)]
        location = "memcached://" + ",".join(n.address for n in nodes)
        options = {"connect_timeout": 0.2, "timeout": 0.3, "dead_timeout": 1}
    else:
        nodes = [redis_process().start()]
        location = f"redis://{nodes[0].address}/0?socket_timeout=0.3&socket_connect_timeout=0.2"
        options = {}
    caches_setting = {"default": {"BACKEND": BACKEND, "LOCATION": location, "OPTIONS": options}}
    settings = {
        "CACHES": caches_setting,
        "SESSION_ENGINE": "django_mcache.sessions",
        "ROOT_URLCONF": __name__,
    }
    with override_settings(**settings):
        yield nodes
    for node in nodes:
        node.kill()


def session_errors() -> int:
    """The store errors the session cache of this process has counted, not yet flushed."""
    return sessions.session_cache().mcache.counts.local()["store_errors"]


def test_a_signed_in_visitor_stays_signed_in_through_an_outage(servers) -> None:
    User.objects.create_user("alice", password="pw")
    browser = Client()
    assert browser.post("/in/", {"name": "alice", "pw": "pw"}).content == b"signed in"
    assert browser.get("/whoami/").content == b"user=alice"
    for server in servers:
        server.kill()  # SIGKILL: every session server at once
    errors = session_errors()
    for _ in range(3):
        page = browser.get("/whoami/")
        assert (page.status_code, page.content) == (200, b"user=alice"), "still signed in"
    assert session_errors() - errors <= 3, "a store that is down: asked once per request"
    assert browser.get("/out/").status_code == 200
    assert browser.get("/whoami/").content == b"user=anonymous", "signed out"
    errors = session_errors()
    assert browser.post("/in/", {"name": "alice", "pw": "pw"}).status_code == 200
    assert session_errors() - errors <= 1, "one add, not Django's 10,000 session keys"
    assert browser.get("/whoami/").content == b"user=alice", "signed in during the outage"
    for server in servers:
        server.restart()  # empty: memcached and this Redis keep nothing on disk
    caches["default"].mcache.store.close()
    for _ in range(3):
        assert browser.get("/whoami/").content == b"user=alice", "nothing written was lost"
    assert browser.session["seen"] >= 4, "and every write since sign-in is there"


def test_session_reads_are_counted_apart_from_the_cache(servers) -> None:
    User.objects.create_user("bob", password="pw")
    core = caches["default"].mcache
    core.counts.flush()
    before = core.stats()["cache"]
    browser = Client()
    browser.post("/in/", {"name": "bob", "pw": "pw"})
    for _ in range(5):
        browser.get("/whoami/")
    sessions.session_cache().mcache.counts.flush()
    after = core.stats()
    assert after["cache"]["hits"] == before["hits"], "no session read in the cache's counts"
    assert after["cache"]["misses"] == before["misses"]
    assert after["sessions"]["hits"] >= 5, after.get("sessions")


@override_settings(
    INSTALLED_APPS=[
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "django_mcache",
        "tests.dj.blog",
    ]
)
def test_without_djangos_sessions_app_an_outage_signs_out_and_fails_nothing(servers) -> None:
    assert sessions.SessionStore is sessions.CacheOnlyStore
    User.objects.create_user("carol", password="pw")
    browser = Client()
    assert browser.post("/in/", {"name": "carol", "pw": "pw"}).status_code == 200
    assert browser.get("/whoami/").content == b"user=carol"
    for server in servers:
        server.kill()
    errors = session_errors()
    signing_in = browser.post("/in/", {"name": "carol", "pw": "pw"})
    assert signing_in.status_code == 200, "no 500: Django's loop would try 10,000 keys"
    assert session_errors() - errors <= 1, "one add for the new session, then no more"
    page = browser.get("/whoami/")
    assert (page.status_code, page.content) == (200, b"user=anonymous")


def test_the_engine_is_the_database_backed_one_where_djangos_sessions_app_is() -> None:
    assert sessions.SessionStore is sessions.WriteThroughStore
    assert sessions.writes_through()
