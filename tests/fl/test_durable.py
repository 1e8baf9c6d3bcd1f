"""Flask: counters on a durable store (MCACHE_COUNTERS_URL), pages over memcached + PostgreSQL."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from flask import Flask, render_template_string

from flask_mcache import MCache
from mcache.stores.sql.store import SqlStore


def test_counters_survive_a_flushed_memcached(memcached_url: str, sqlite_url: str) -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_COUNTERS_URL=sqlite_url, MCACHE_ONLINE=True)
    mcache = MCache(app)

    @app.get("/posts/<int:pk>")
    def post(pk: int) -> str:
        return render_template_string("{{ count_view(pk) }}", pk=pk)

    client = app.test_client()
    for _ in range(5):
        client.get("/posts/3")
    with app.app_context():
        assert isinstance(mcache.counters.store, SqlStore)
        mcache.cache.store.flush()  # memcached restarted
        assert mcache.view_counter("views").value(3) == 5
        online = mcache.online_counter()
        filling = mcache.counters.store.get(online.slot_key(online._slot()))
        assert filling == b"1", "the visitors online are counted there too"
        assert mcache.counter("signups").incr() == 1


def test_pages_come_back_from_postgres_after_memcached_is_flushed(
    memcached_url: str, postgres_url: str
) -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config["MCACHE_URL"] = "tiered://?" + urlencode(
        {"hot": memcached_url, "cold": postgres_url}
    )
    mcache = MCache(app)
    renders: list[int] = []

    @app.get("/report")
    @mcache.cached_view(600, tags=["reports"])
    def report() -> str:
        renders.append(1)
        return f"report #{len(renders)}"

    client = app.test_client()
    assert client.get("/report").text == "report #1"
    with app.app_context():
        mcache.cache.store.hot.flush()
    response = client.get("/report")
    assert (response.text, renders) == ("report #1", [1]), "served from PostgreSQL, not rebuilt"
    with app.app_context():
        mcache.invalidate("reports")
    assert client.get("/report").text == "report #2"


def test_a_bad_counters_url_names_the_key(memcached_url: str) -> None:
    from mcache.errors import ConfigError

    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_COUNTERS_URL="postgres://")
    with pytest.raises(ConfigError, match="MCACHE_COUNTERS_URL"):
        MCache(app)
