"""Flask view counters on SQLAlchemy rows: seeded once from the column, one per request, flushed."""

from __future__ import annotations

import pytest
from flask import Flask, render_template_string
from sqlalchemy import event, select
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.pool import StaticPool

from flask_mcache import MCache
from tests.fl.shop import Article, Product, sessions

PAGE = "{{ count_view(product) }} {{ count_view(product) }} / {{ view_count(product) }}"


@pytest.fixture(params=["memcached", "redis"])
def shop(request: pytest.FixtureRequest):
    url = request.getfixturevalue(f"{request.param}_url")
    Sessions = sessions()
    with Sessions() as session, session.begin():
        session.add_all([Product(id=1, name="lamp", views=41), Article(id=5, hits=7)])
    selects: list[str] = []
    event.listen(
        Sessions.kw["bind"],
        "before_cursor_execute",
        lambda *args: selects.append(args[2]) if args[2].startswith("SELECT") else None,
    )
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL=url,
        MCACHE_NAMESPACE="shop",
        MCACHE_VIEW_COUNT_FIELDS={"articles": "hits"},
    )
    mcache = MCache(app)
    mcache.watch_sqlalchemy(Sessions, app)

    @app.get("/products/<int:pk>")
    def product(pk: int) -> str:
        with Sessions() as session:
            return render_template_string(PAGE, product=session.get(Product, pk))

    yield app, mcache, Sessions, selects
    with app.app_context():  # record what is left now, not at exit when the servers are gone
        mcache.view_counter(Product).push()
        mcache.view_counter(Article).push()


def stored_views(Sessions, model=Product, pk=1, column="views") -> int:
    with Sessions() as session:
        return getattr(session.get(model, pk), column)


def test_a_row_is_counted_once_per_request_from_its_column(shop) -> None:
    app, _, _, selects = shop
    client = app.test_client()
    assert client.get("/products/1").text == "42 42 / 42", "seeded from views=41, counted once"
    assert client.get("/products/1").text == "43 43 / 43"
    seeds = [s for s in selects if "products.views" in s and "products.name" not in s]
    assert len(seeds) == 1, "the column is read once, when the count is first needed"


def test_counts_are_flushed_back_to_the_column(shop) -> None:
    app, mcache, Sessions, _ = shop
    client = app.test_client()
    for _ in range(3):
        client.get("/products/1")
    with app.app_context():
        assert mcache.flush_view_counts(Product) == 1
        assert mcache.flush_view_counts(Product) == 0, "nothing new since"
    assert stored_views(Sessions) == 44
    assert client.get("/products/1").text == "45 45 / 45", "counting goes on from the cache"
    with app.app_context():
        mcache.flush_view_counts(Product)
    assert stored_views(Sessions) == 45


def test_a_configured_column_and_the_model_counter(shop) -> None:
    app, mcache, Sessions, _ = shop
    with app.test_request_context():
        counter = mcache.view_counter(Article)
        article = counter.incr(5)
        assert article == 8, "seeded from hits=7, as MCACHE_VIEW_COUNT_FIELDS says"
        assert mcache.flush_view_counts(Article) == 1
    assert stored_views(Sessions, Article, 5, "hits") == 8


def test_flask_sqlalchemy_models_without_watch(redis_url: str) -> None:
    from flask_sqlalchemy import SQLAlchemy

    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL=redis_url,
        MCACHE_NAMESPACE="fsa",
        SQLALCHEMY_DATABASE_URI="sqlite://",
        SQLALCHEMY_ENGINE_OPTIONS={"poolclass": StaticPool},
    )
    db = SQLAlchemy(app)

    class Post(db.Model):  # type: ignore[name-defined]
        id: Mapped[int] = mapped_column(primary_key=True)
        view_count: Mapped[int] = mapped_column(default=0)

    mcache = MCache(app)
    with app.app_context():
        db.create_all()
        db.session.add(Post(id=3, view_count=10))
        db.session.commit()

    @app.get("/")
    def page() -> str:
        return render_template_string("{{ count_view(post) }}", post=db.session.get(Post, 3))

    client = app.test_client()
    assert [client.get("/").text for _ in range(2)] == ["11", "12"]
    with app.app_context():
        assert mcache.flush_view_counts(Post) == 1
        assert db.session.scalar(select(Post.view_count)) == 12


def test_plain_keys_and_objects_with_an_id_still_count(memcached_url: str) -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_NAMESPACE="keys")
    MCache(app)

    class Thing:
        id = 9

    with app.test_request_context():
        template = "{{ count_view('home') }} {{ count_view(thing) }} {{ count_view(thing) }}"
        assert render_template_string(template, thing=Thing()) == "1 1 1"
