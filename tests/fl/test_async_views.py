"""``async def`` Flask views: cached as Flask runs them, and ``aget_or_build`` inside them.

Flask runs an async view on an event loop of its own per request (asgiref).
On Redis the store's async twin opens its connections on that loop and closes
them when it ends; nothing is left to a closed loop.
"""

from __future__ import annotations

import gc
import warnings

import pytest
from flask import Flask

from flask_mcache import MCache

renders: list[str] = []


@pytest.fixture(params=["memory", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    return "memory://" if request.param == "memory" else request.getfixturevalue("redis_url")


def make_app(url: str) -> tuple[Flask, MCache]:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="tests", MCACHE_URL=url, MCACHE_NAMESPACE="fl-async")
    mcache = MCache(app)

    @app.get("/page/<int:n>")
    @mcache.cached_view(ttl=60, tags=lambda n: [f"page:{n}"])
    async def page(n: int) -> str:
        renders.append(f"page {n}")
        return f"async page {n}"

    @app.get("/fragment")
    async def fragment() -> str:
        async def build() -> str:
            renders.append("fragment")
            return "built once"

        return await mcache.aget_or_build("fragment", build, ttl=60, tags=["fragments"])

    with app.app_context():
        mcache.cache.clear()
    return app, mcache


def test_an_async_view_is_cached_and_invalidated(url: str) -> None:
    renders.clear()
    app, mcache = make_app(url)
    client = app.test_client()
    first, second = client.get("/page/1"), client.get("/page/1")
    assert (first.headers["X-Cache"], second.headers["X-Cache"]) == ("MISS", "HIT")
    assert second.data == b"async page 1"
    with app.app_context():
        mcache.invalidate("page:1")
    assert client.get("/page/1").headers["X-Cache"] == "MISS"
    assert client.head("/page/1").headers["X-Cache"] == "HIT"
    assert renders == ["page 1", "page 1"]


def test_aget_or_build_inside_async_views_leaves_no_connection_behind(url: str) -> None:
    renders.clear()
    app, mcache = make_app(url)
    client = app.test_client()
    gc.collect()  # what earlier tests left is theirs, not this one's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bodies = [client.get("/fragment").data for _ in range(3)]
        with app.app_context():
            mcache.invalidate("fragments")
        bodies.append(client.get("/fragment").data)
        gc.collect()
    assert bodies == [b"built once"] * 4
    assert renders == ["fragment", "fragment"], "built, hit twice, rebuilt after the bump"
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []
