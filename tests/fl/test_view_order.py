"""Mistakes that cached nothing or leaked, now loud: a view cached above its route, or memoized."""

from __future__ import annotations

import asyncio

import pytest
from flask import Blueprint, Flask, make_response

from flask_mcache import MCache
from mcache.errors import ConfigError, NotMemoizable


def new_app(url: str = "memory://") -> tuple[Flask, MCache]:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="t", MCACHE_URL=url, MCACHE_NAMESPACE="order")
    return app, MCache(app)


def test_a_cached_view_above_its_route_fails_where_it_is_written() -> None:
    app, mcache = new_app()
    with pytest.raises(ConfigError, match=r"view 'products'.*above the route decorator") as error:

        @mcache.cached_view(ttl=60)
        @app.get("/products")
        def products() -> str:
            return "products"

    assert "@app.get(...)\n    @mcache.cached_view(...)\n    def products(...)" in str(error.value)


def test_the_right_order_caches() -> None:
    app, mcache = new_app()

    @app.get("/products")
    @mcache.cached_view(ttl=60)
    def products() -> str:
        return "products"

    client = app.test_client()
    assert [client.get("/products").headers["X-Cache"] for _ in range(2)] == ["MISS", "HIT"]


def shop_in_the_wrong_order(mcache: MCache) -> Blueprint:
    shop = Blueprint("shop", __name__)

    @mcache.cached_view(ttl=60)
    @shop.get("/products")
    def products() -> str:
        return "products"

    return shop


def test_a_blueprint_registered_after_init_app_fails_at_its_first_request() -> None:
    app, mcache = new_app()
    app.register_blueprint(shop_in_the_wrong_order(mcache))
    app.testing = True
    client = app.test_client()
    for _ in range(2):  # every request, until the order is mended
        with pytest.raises(ConfigError, match=r"view 'shop.products'"):
            client.get("/products")


def test_init_app_finds_a_blueprint_registered_before_it() -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL="memory://")
    mcache = MCache()
    app.register_blueprint(shop_in_the_wrong_order(mcache))
    with pytest.raises(ConfigError, match=r"view 'shop.products'"):
        mcache.init_app(app)


def test_a_view_routed_plain_elsewhere_is_refused_with_the_way_to_do_it() -> None:
    app, mcache = new_app()

    def page() -> str:
        return "page"

    app.add_url_rule("/live", "live", page)
    with pytest.raises(ConfigError, match="route a function of its own that calls it"):
        mcache.cached_view(ttl=60)(page)

    def live() -> str:  # the way the message gives
        return page()

    app2, mcache2 = new_app()
    app2.add_url_rule("/cached", "cached", mcache2.cached_view(ttl=60)(page))
    app2.add_url_rule("/live", "live", live)
    client = app2.test_client()
    assert "X-Cache" not in client.get("/live").headers
    assert client.get("/cached").headers["X-Cache"] == "MISS"


def test_a_memoized_view_returning_a_response_fails_and_leaks_nothing(memcached_url: str) -> None:
    app, mcache = new_app(memcached_url)

    @app.get("/me/<name>")
    @mcache.cached(ttl=60)
    def me(name: str):
        response = make_response(f"hello {name}")
        response.set_cookie("visitor", name)
        return response

    app.testing = True
    client = app.test_client()
    with pytest.raises(NotMemoizable, match=r"me returned a Response.*@mcache\.cached_view"):
        client.get("/me/alice")
    with pytest.raises(NotMemoizable):  # not served from the cache either: never stored
        client.get("/me/alice")
    with app.app_context():
        assert mcache.cache.get(me.for_cache().key("alice"), None) is None


def test_an_async_memoized_function_returning_a_response_fails_too() -> None:
    app, mcache = new_app()

    @mcache.cached(ttl=60)
    async def page():
        return make_response("page")

    with app.test_request_context(), pytest.raises(NotMemoizable, match="Response"):
        asyncio.run(page())


def test_a_memoized_function_returning_data_is_memoized() -> None:
    app, mcache = new_app()
    calls = []

    @mcache.cached(ttl=60)
    def totals(day: int) -> dict[str, int]:
        calls.append(day)
        return {"orders": day * 2}

    with app.app_context():
        assert totals(3) == totals(3) == {"orders": 6}
    assert calls == [3]
