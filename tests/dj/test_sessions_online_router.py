"""Replicated sessions, the online-visitors middleware and the replica-lag router."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.cache import caches
from django.db import connection, router
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from django_mcache.sessions import SessionStore, session_cache
from mcache import FakeClock
from tests.dj.blog.models import Post
from tests.servers import memcached_process

BACKEND = "django_mcache.backend.MCacheBackend"
pytestmark = pytest.mark.django_db


@pytest.fixture
def trio(memcached_nodes):
    nodes = [memcached_process().start() for _ in range(3)]
    location = "memcached://" + ",".join(n.address for n in nodes)
    options = {"connect_timeout": 0.2, "timeout": 0.3, "dead_timeout": 60}
    caches_setting = {"default": {"BACKEND": BACKEND, "LOCATION": location, "OPTIONS": options}}
    with override_settings(CACHES=caches_setting, SESSION_ENGINE="django_mcache.sessions"):
        yield nodes
    for node in nodes:
        node.kill()


def owner_of(session_key: str, nodes):
    backend = session_cache()
    store_key = backend.mcache.key(backend.make_key(SessionStore.cache_key_prefix + session_key))
    server = backend.mcache.store.ring.server_for(store_key)
    return next(n for n in nodes if n.port == server.port)


def test_a_logged_in_user_survives_the_loss_of_their_sessions_server(trio) -> None:
    User.objects.create_user("alice", password="pw")
    client = Client()
    assert client.login(username="alice", password="pw")
    assert client.get("/whoami/").content == b"user=alice"
    owner_of(client.session.session_key, trio).kill()
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/whoami/").content == b"user=alice", "still signed in"
    assert not [q for q in queries if "django_session" in q["sql"]], "read from the replica"
    assert Session.objects.count() == 1, "and written through to the database"


def test_a_thousand_sessions_and_one_server_killed_lose_none(trio) -> None:
    keys = []
    for i in range(1000):
        session = SessionStore()
        session["n"] = i
        session.save()
        keys.append(session.session_key)
    assert session_cache().mcache.store.replicas == 2
    trio[1].kill()
    lost = [i for i, key in enumerate(keys) if SessionStore(key).get("n") != i]
    assert lost == []


def test_sessions_keep_djangos_semantics(trio) -> None:
    check_djangos_session_semantics()


@pytest.mark.parametrize("topology", ["sentinel", "cluster"])
def test_sessions_on_redis_sentinel_and_cluster(topology: str, request) -> None:
    location = request.getfixturevalue(f"{topology}_url")
    caches_setting = {"default": {"BACKEND": BACKEND, "LOCATION": location}}
    with override_settings(CACHES=caches_setting, SESSION_ENGINE="django_mcache.sessions"):
        User.objects.create_user("alice", password="pw")
        client = Client()
        assert client.login(username="alice", password="pw")
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/whoami/").content == b"user=alice"
        assert not [q for q in queries if "django_session" in q["sql"]], "read from the cache"
        assert Session.objects.count() == 1, "written through to the database"
        check_djangos_session_semantics()


def check_djangos_session_semantics() -> None:
    session = SessionStore()
    session["cart"] = 3
    session.set_expiry(60)
    session.save()
    old_key = session.session_key
    session.cycle_key()
    assert SessionStore(session.session_key)["cart"] == 3
    assert not SessionStore().exists(old_key)
    session.delete()
    assert SessionStore(session.session_key).get("cart") is None
    SessionStore.clear_expired()  # the database's expired rows (the cache expires its own)


# -- online visitors ---------------------------------------------------------------------------

MIDDLEWARE = [*settings.MIDDLEWARE, "django_mcache.middleware.OnlineVisitorsMiddleware"]


@pytest.fixture
def online(monkeypatch):
    caches["default"].clear()
    core = caches["default"].mcache
    clock = FakeClock(core.clock.time())
    monkeypatch.setattr(core, "clock", clock)
    with override_settings(MIDDLEWARE=MIDDLEWARE, MCACHE_ONLINE_WINDOW=60):
        yield clock


def site_count(clock: FakeClock) -> int:
    counter = caches["default"].online_counter("site", 60, 6)
    clock.advance(counter.slot_len)  # the count covers the slots before the filling one
    return counter.count()


def test_distinct_visitors_count_once_each_without_sessions(online) -> None:
    visitors = [Client(HTTP_USER_AGENT="Mozilla/5.0", REMOTE_ADDR=f"10.0.0.{i}") for i in range(5)]
    for visitor in visitors:
        for _ in range(3):
            visitor.get("/lang/")
    assert site_count(online) == 5
    assert Session.objects.count() == 0
    assert all("sessionid" not in v.cookies for v in visitors)
    assert all("mcache_visitor" in v.cookies for v in visitors)


def test_robots_are_not_counted(online) -> None:
    Client(HTTP_USER_AGENT="Googlebot/2.1").get("/lang/")
    Client(HTTP_USER_AGENT="curl/8.0").get("/lang/")
    Client(HTTP_USER_AGENT="Mozilla/5.0").get("/lang/")
    assert site_count(online) == 1


def test_a_signed_in_visitor_counts_by_session(online) -> None:
    User.objects.create_user("bob", password="pw")
    client = Client(HTTP_USER_AGENT="Mozilla/5.0")
    client.login(username="bob", password="pw")
    client.get("/lang/")
    client.get("/lang/")
    assert site_count(online) == 1
    assert "mcache_visitor" not in client.cookies


# -- the replica-lag router ------------------------------------------------------------------------


@pytest.fixture
def fresh_reads(monkeypatch):
    with override_settings(
        DATABASE_ROUTERS=["django_mcache.routers.FreshReadRouter"], MCACHE_REPLICATION_LAG=2.0
    ):
        fresh = router.routers[0]
        core = caches["default"].mcache
        clock = FakeClock(core.clock.time())
        monkeypatch.setattr(core, "clock", clock)  # tag versions are times on the same clock
        monkeypatch.setattr(core.tags, "clock", clock)
        fresh.changes.clock = clock
        yield clock


@pytest.mark.django_db(transaction=True, databases=["default", "replica"])
def test_reads_go_to_the_primary_right_after_a_write_then_to_the_replica(fresh_reads) -> None:
    post = Post.objects.create(title="new")
    assert Post.objects.all().db == "default", "the replica may not have it yet"
    assert Post.objects.get(pk=post.pk).title == "new"
    fresh_reads.advance(2.5)
    assert Post.objects.all().db == "replica"
    assert Post.objects.get(pk=post.pk).title == "new"  # the test replica mirrors the primary
    post.save()
    assert Post.objects.all().db == "default"
    assert router.db_for_write(Post) == "default"


def test_a_client_that_keeps_no_cookie_counts_once(online) -> None:
    for _ in range(4):
        Client(HTTP_USER_AGENT="Mozilla/5.0 (no cookies)").get("/lang/")
    assert site_count(online) == 1
