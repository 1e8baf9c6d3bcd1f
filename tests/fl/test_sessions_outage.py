"""Flask's server-side sessions (``MCACHE_SESSIONS``) never answer 500 for a cache failure:
every session server SIGKILLed under a signed-in visitor, on real memcached and SQLite.

On a store that keeps sessions through a restart (``tiered://`` memcached over SQLite)
a visitor signed in before the outage stays signed in. On memcached alone, a visitor
signs in during the outage and stays signed in (the session travels in its signed
cookie until the store is back, then goes to the store); one signed in before it is
signed out while the store is down, and back once it answers. A store that is down is
asked once per request, and session reads are counted apart from the cache's.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask, session

from flask_mcache import MCache
from flask_mcache.sessions import sid_of
from tests.servers import ServerProcess, memcached_process

FAST = "connect_timeout=0.2&timeout=0.3&dead_timeout=1"


def make_app(session_url: str, main_url: str) -> Flask:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="outage",
        MCACHE_URL=main_url,
        MCACHE_NAMESPACE="outage",
        MCACHE_SESSIONS=True,
        MCACHE_SESSION_URL=session_url,
    )
    MCache(app)

    @app.post("/in/<name>")
    def sign_in(name: str) -> str:
        session.regenerate()
        session["user"] = name
        return "signed in"

    @app.get("/whoami")
    def whoami() -> str:
        session["seen"] = session.get("seen", 0) + 1  # a write on every request
        return f"user={session.get('user', 'anonymous')}"

    return app


@pytest.fixture
def pool(memcached_nodes) -> Iterator[list[ServerProcess]]:
    nodes = [memcached_process().start() for _ in range(2)]
    yield nodes
    for node in nodes:
        node.kill()


def pool_url(nodes: list[ServerProcess]) -> str:
    return "memcached://" + ",".join(n.address for n in nodes) + f"?{FAST}"


def session_errors(app: Flask) -> int:
    return app.session_interface.cache.counts.local()["store_errors"]  # type: ignore[attr-defined]


def test_on_a_durable_store_a_visitor_signed_in_before_the_outage_stays(
    pool, tmp_path: Path, memcached_url: str
) -> None:
    cold = f"sqlite:///{tmp_path / 'sessions.db'}"
    app = make_app("tiered://?" + urllib.parse.urlencode({"hot": pool_url(pool), "cold": cold}),
                   memcached_url)  # fmt: skip
    browser = app.test_client()
    browser.post("/in/alice")
    assert browser.get("/whoami").text == "user=alice"
    for node in pool:
        node.kill()
    for _ in range(3):
        page = browser.get("/whoami")
        assert (page.status_code, page.text) == (200, "user=alice"), "still signed in"
    for node in pool:
        node.restart()  # empty
    assert browser.get("/whoami").text == "user=alice", "nothing written was lost"


def test_on_memcached_alone_a_visitor_signs_in_during_the_outage_and_stays(
    pool, memcached_url: str
) -> None:
    app = make_app(pool_url(pool), memcached_url)
    before, during = app.test_client(), app.test_client()
    before.post("/in/alice")
    assert before.get("/whoami").text == "user=alice"
    for node in pool:
        node.kill()
    page = before.get("/whoami")
    assert (page.status_code, page.text) == (200, "user=anonymous"), "its session is out of reach"
    errors = session_errors(app)
    assert during.post("/in/bob").status_code == 200
    assert session_errors(app) - errors <= 1, "a store that is down: asked once per request"
    assert sid_of(app, during.get_cookie("session").value) is None, "carried whole"
    for _ in range(3):
        assert during.get("/whoami").text == "user=bob", "signed in during the outage"
    for node in pool:
        node.restart()  # empty
    time.sleep(1.1)  # the pool's dead_timeout: then it asks the servers again
    assert during.get("/whoami").text == "user=bob"
    sid = sid_of(app, during.get_cookie("session").value)
    assert sid is not None, "the store took the session: the cookie carries its id alone"
    assert during.get("/whoami").text == "user=bob"
    stored = app.session_interface.cache.get(("session", sid))  # type: ignore[attr-defined]
    assert stored is not None and stored["user"] == "bob" and stored["seen"] >= 5, stored


def test_session_reads_are_counted_apart_from_the_cache(memcached_url: str) -> None:
    app = make_app(memcached_url, memcached_url)
    core = app.extensions["mcache"]
    core.counts.flush()
    before = core.stats()["cache"]
    browser = app.test_client()
    browser.post("/in/carol")
    for _ in range(4):
        browser.get("/whoami")
    app.session_interface.cache.counts.flush()  # type: ignore[attr-defined]
    after = core.stats()
    assert (after["cache"]["hits"], after["cache"]["misses"]) == (before["hits"], before["misses"])
    assert after["sessions"]["hits"] >= 4, after.get("sessions")


def test_a_forged_carried_session_is_a_new_one(memcached_url: str) -> None:
    app = make_app(memcached_url, memcached_url)
    browser = app.test_client()
    browser.set_cookie("session", '["sid", {"user": "mallory"}]')
    assert browser.get("/whoami").text == "user=anonymous"
