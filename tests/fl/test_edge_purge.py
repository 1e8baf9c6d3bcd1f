"""Varnish and CDNs purged by the same tags, in Flask: ``MCACHE_PAGE_SURROGATE`` names a
shared page's tags in the header the cache in front reads, and ``MCACHE_PURGE`` purges
them when they are invalidated (here a local checker of Cloudflare's published purge
API: a format test, not a live one)."""

from __future__ import annotations

import pytest
from flask import Flask

from flask_mcache import MCache
from mcache.errors import ConfigError
from tests.purge_checkers import checker


def _app(**config: object) -> tuple[Flask, MCache]:
    app = Flask(__name__)
    app.config.update(MCACHE_URL="memory://", TESTING=True, SECRET_KEY="t", **config)
    mcache = MCache(app)

    @app.get("/posts/")
    @mcache.cached_view(60, tags=["posts"])
    def posts() -> str:
        authors = mcache.get_or_build("authors", lambda: "ann, bo", tags=["authors"])
        return f"posts by {authors}"

    @app.get("/themed/")
    @mcache.cached_view(60, tags=["themed"], cookies=["theme"])
    def themed() -> str:
        from flask import request

        return f"theme {request.cookies.get('theme', 'light')}"

    @app.get("/mine/")
    @mcache.cached_view(60, tags=["posts"], per_user=lambda: "ann")
    def mine() -> str:
        return "yours"

    return app, mcache


def test_a_shared_page_names_its_tags_and_what_its_build_read() -> None:
    app, _ = _app(MCACHE_NAMESPACE="fl-edge-1", MCACHE_PAGE_SURROGATE="cache-tag")
    client = app.test_client()
    first, again = client.get("/posts/"), client.get("/posts/")
    assert first.headers["X-Cache"] == "MISS" and again.headers["X-Cache"] == "HIT"
    assert first.headers["Cache-Tag"] == again.headers["Cache-Tag"] == "posts,authors"
    assert "Cache-Tag" not in client.get("/mine/").headers  # one visitor's: private


def test_callable_tags_run_once_for_a_page_built_and_named() -> None:
    """A callable ``tags`` may query a database: the page's key, its store and the header
    that names its tags to the cache in front all use the one list it returned."""
    app = Flask(__name__)
    app.config.update(
        MCACHE_URL="memory://", MCACHE_NAMESPACE="fl-edge-4", MCACHE_PAGE_SURROGATE="cache-tag"
    )
    mcache = MCache(app)
    asked: list[int] = []

    def tags_of(pk: int) -> list[str]:
        asked.append(pk)
        return [f"post:{pk}"]

    @app.get("/post/<int:pk>/")
    @mcache.cached_view(60, tags=tags_of)
    def post(pk: int) -> str:
        return f"post {pk}"

    built = app.test_client().get("/post/7/")
    assert built.headers["X-Cache"] == "MISS" and built.headers["Cache-Tag"] == "post:7"
    assert asked == [7], f"tags asked {len(asked)} times for one request"


def test_a_cookie_keyed_page_names_its_keys_and_varies_on_cookie() -> None:
    app, _ = _app(MCACHE_NAMESPACE="fl-edge-3", MCACHE_PAGE_SURROGATE="xkey")
    client = app.test_client()
    client.set_cookie("theme", "dark")
    response = client.get("/themed/")
    assert response.headers["xkey"] == "themed"
    assert "Cookie" in response.headers["Vary"]


def test_a_bad_page_surrogate_fails_at_start_up_naming_it() -> None:
    with pytest.raises(ConfigError, match="MCACHE_PAGE_SURROGATE must be one of"):
        _app(MCACHE_PAGE_SURROGATE="xkeys")


def test_invalidate_purges_cloudflare_format_against_a_local_checker() -> None:
    with checker("cloudflare", ident="ZONE1") as api:
        url = f"cloudflare://ZONE1?token=secret-token&api={api.api}"
        app, mcache = _app(MCACHE_NAMESPACE="fl-edge-2", MCACHE_PURGE=url)
        with app.app_context():
            mcache.invalidate("posts")
            purger = app.extensions["mcache"].purger
            try:
                assert purger.flush(5)
            finally:
                purger.close()
    assert api.refused == []
    assert [request["body"] for request in api.accepted] == [{"tags": ["posts"]}]
