"""The edge in Flask: ``WSGIEdge`` around a Flask application answers a page
``cached_view`` stored, before Flask pushes a context or runs a request hook, and only to
a visitor ``cached_view`` would give it to (real Flask, on a real memcached)."""

from __future__ import annotations

import itertools
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest
from flask import Flask, request

from flask_mcache import MCache
from mcache import Cache
from mcache.edge import WSGIEdge

_NAMESPACES = itertools.count()


def _site(memcached_url: str) -> tuple[WSGIEdge, list[str], Cache]:
    app = Flask(__name__)
    app.config.update(
        MCACHE_URL=memcached_url, MCACHE_NAMESPACE=f"fl-edge-{next(_NAMESPACES)}", SECRET_KEY="t"
    )
    mcache = MCache(app)
    reached: list[str] = []

    @app.before_request
    def count() -> None:
        reached.append(request.path)

    @app.after_request
    def add_header(response: Any) -> Any:
        response.headers["X-Site"] = "added by a hook"
        return response

    @app.get("/posts/")
    @mcache.cached_view(60, tags=["posts"])
    def posts() -> str:
        return f"posts, rendered {len(reached)}"

    @app.get("/themed/")
    @mcache.cached_view(60, cookies=["theme"])
    def themed() -> str:
        return f"theme {request.cookies.get('theme', 'light')}"

    @app.get("/mine/")
    @mcache.cached_view(60, per_user=lambda: "ann")
    def mine() -> str:
        return "yours"

    return WSGIEdge(app, app.extensions["mcache"]), reached, app.extensions["mcache"]


def call(app: Any, path: str, method: str = "GET", **environ: str) -> tuple[dict, bytes]:
    env: dict[str, Any] = {"REQUEST_METHOD": method, "PATH_INFO": path, "HTTP_HOST": "site"}
    env.update(environ)
    setup_testing_defaults(env)
    started: list[Any] = []
    body = app(env, lambda status, headers, exc_info=None: started.append(headers))
    try:
        data = b"".join(body)
    finally:
        getattr(body, "close", lambda: None)()
    return dict(started[0]), data


def test_a_stored_page_is_answered_before_flask_runs(memcached_url: str) -> None:
    app, reached, mcache = _site(memcached_url)
    first_headers, first = call(app, "/posts/")
    headers, body = call(app, "/posts/")
    assert reached == ["/posts/"] and body == first == b"posts, rendered 1"
    assert first_headers["X-Cache"] == "MISS" and headers["X-Cache"] == "HIT"
    assert headers["Cache-Status"] == "mcache; hit; detail=edge"
    assert headers["X-Site"] == "added by a hook"
    mcache.invalidate("posts")
    assert call(app, "/posts/")[1] == b"posts, rendered 2" and len(reached) == 2


@pytest.mark.parametrize(
    "environ",
    [
        {"HTTP_COOKIE": "session=x"},
        {"HTTP_COOKIE": "remember_token=x"},
        {"HTTP_AUTHORIZATION": "x"},
    ],
    ids=["session", "remember-me", "authorization"],
)
def test_a_visitor_who_may_be_someone_goes_to_flask(memcached_url: str, environ: dict) -> None:
    app, reached, _ = _site(memcached_url)
    call(app, "/posts/")
    call(app, "/posts/", **environ)
    assert reached == ["/posts/", "/posts/"]


def test_declared_cookies_key_the_page_and_per_user_pages_stay_in_flask(
    memcached_url: str,
) -> None:
    app, reached, _ = _site(memcached_url)
    assert call(app, "/themed/", HTTP_COOKIE="theme=dark; _ga=1")[1] == b"theme dark"
    assert call(app, "/themed/")[1] == b"theme light"
    assert call(app, "/themed/", HTTP_COOKIE="theme=dark")[1] == b"theme dark"
    assert call(app, "/themed/", HTTP_COOKIE="consent=yes")[1] == b"theme light"
    assert reached == ["/themed/", "/themed/"]
    for _ in range(2):
        call(app, "/mine/")
    assert reached[2:] == ["/mine/", "/mine/"]
