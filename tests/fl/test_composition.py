"""The new user's page in Flask: cached_view + {% mcache %} fragments + background refresh.

After a row is saved through a watched SQLAlchemy session (or a fragment-only
tag is invalidated) the page may be served stale while it is rebuilt; once
rebuilt it holds the new fragment and is a HIT, and no response ever carries
the old fragment as fresh. Real memcached and Redis, a real refresher thread.
"""

from __future__ import annotations

import pytest
from flask import Flask, render_template_string
from sqlalchemy import select

from flask_mcache import MCache
from tests.fl.shop import Product, sessions

PAGE = (
    '{% mcache 60, "names", tags=["model:products"] %}'
    "names:{% for name in names %}{{ name }};{% endfor %}{% endmcache %}|"
    '{% mcache 60, "categories", tags=["categories"] %}categories:{{ categories }}{% endmcache %}'
)


@pytest.fixture(params=["memcached", "redis"])
def shop(request: pytest.FixtureRequest):
    Sessions = sessions()
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL=request.getfixturevalue(f"{request.param}_url"),
        MCACHE_NAMESPACE="newuser",
        MCACHE_REFRESH="background",  # fragments inherit it too
    )
    mcache = MCache(app)
    mcache.watch_sqlalchemy(Sessions, app)
    data = {"categories": "c1"}

    @app.get("/catalog")
    @mcache.cached_view(ttl=60, tags=["model:products"])
    def catalog() -> str:
        with Sessions() as session:
            names = session.scalars(select(Product.name).order_by(Product.id)).all()
        return render_template_string(PAGE, names=names, categories=data["categories"])

    return app, mcache, Sessions, data


def follow(app: Flask, changed: str, old: str) -> None:
    """Request the page until it is a HIT again, checking what every response carried."""
    client, refresher = app.test_client(), app.extensions["mcache"].refresher
    seen: list[tuple[str, str]] = []
    for _ in range(6):
        response = client.get("/catalog")
        seen.append((response.headers["X-Cache"], response.text))
        if response.headers["X-Cache"] == "HIT":
            break
        assert refresher.wait_idle(10), "the background rebuild never finished"
    assert not [body for state, body in seen if state != "STALE" and old in body], seen
    assert seen[-1][0] == "HIT" and changed in seen[-1][1], seen
    assert len(seen) <= 3, "stale once, then the rebuilt page"
    for _ in range(3):
        again = client.get("/catalog")
        assert again.headers["X-Cache"] == "HIT" and changed in again.text


def test_a_saved_row_reaches_the_fragment_inside_the_page(shop) -> None:
    app, _, Sessions, _ = shop
    with Sessions() as session, session.begin():
        session.add(Product(id=1, name="a"))
    client = app.test_client()
    assert client.get("/catalog").headers["X-Cache"] == "MISS"
    assert client.get("/catalog").text == "names:a;|categories:c1"
    with Sessions() as session, session.begin():
        session.get(Product, 1).name = "b"
    follow(app, changed="names:b;", old="names:a;")


def test_invalidating_a_tag_only_the_fragment_declares_reaches_the_page(shop) -> None:
    app, mcache, _, data = shop
    client = app.test_client()
    client.get("/catalog")
    assert client.get("/catalog").headers["X-Cache"] == "HIT"
    data["categories"] = "c2"
    with app.app_context():
        mcache.invalidate("categories")
    follow(app, changed="categories:c2", old="categories:c1")


@pytest.mark.parametrize(("stale_wait", "expected"), [(None, ("STALE", "v1")), (5, ("HIT", "v2"))])
def test_cached_view_stale_wait(memcached_url: str, stale_wait, expected) -> None:
    import threading
    import time

    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_NAMESPACE=f"sw{stale_wait}")
    mcache = MCache(app)
    renders: list[int] = []

    @app.get("/slow")
    @mcache.cached_view(ttl=60, tags=["slow"], stale_wait=stale_wait)
    def slow() -> str:
        renders.append(1)
        time.sleep(0.3)
        return f"v{len(renders)}"

    client = app.test_client()
    client.get("/slow")
    with app.app_context():
        mcache.invalidate("slow")
    rebuild = threading.Thread(target=lambda: app.test_client().get("/slow"))
    rebuild.start()
    time.sleep(0.1)  # the rebuild (0.3 s) is under way
    response = client.get("/slow")
    rebuild.join(10)
    assert (response.headers["X-Cache"], response.text) == expected
