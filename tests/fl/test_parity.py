"""Flask at parity with Django: depends_on with SQLAlchemy, sessions with replicas, the
extension's get/set/delete/get_many, unless= and key= on cached_view, errors that teach."""

from __future__ import annotations

import threading

import pytest
from flask import Flask, render_template_string, session
from sqlalchemy import select

from flask_mcache import MCache
from flask_mcache.sqlalchemy import model_tag, obj_tag
from mcache.errors import ConfigError, Unserializable
from tests.fl.shop import Product, sessions


class NotMapped:
    pass


@pytest.fixture
def shop(memcached_url: str):
    Sessions = sessions()
    with Sessions.begin() as db:
        db.add_all([Product(id=1, name="kettle"), Product(id=2, name="teapot")])
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_NAMESPACE="parity", TESTING=True)
    mcache = MCache(app)
    mcache.watch_sqlalchemy(Sessions, app)
    renders: list[str] = []

    def names() -> str:
        with Sessions() as db:
            return ",".join(db.scalars(select(Product.name).order_by(Product.id)))

    @app.get("/products")
    @mcache.cached_view(60, depends_on=Product)
    def products():
        renders.append("products")
        return names()

    with Sessions() as db:
        first = db.get(Product, 1)

    @app.get("/first")
    @mcache.cached_view(60, depends_on=[first])
    def first_product():
        renders.append("first")
        with Sessions() as db:
            return db.get(Product, 1).name

    return app, mcache, Sessions, renders, names


def app_on(url: str, namespace: str) -> tuple[Flask, MCache]:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=url, MCACHE_NAMESPACE=namespace)
    return app, MCache(app)


def rename(Sessions, pk: int, name: str) -> None:
    with Sessions.begin() as db:
        db.get(Product, pk).name = name


def test_a_page_depending_on_a_model_follows_its_commits(shop) -> None:
    app, _, Sessions, renders, _ = shop
    client = app.test_client()
    assert client.get("/products").text == "kettle,teapot"
    assert client.get("/products").headers["X-Cache"] == "HIT"
    rename(Sessions, 2, "mug")
    again = client.get("/products")
    assert (again.headers["X-Cache"], again.text) == ("MISS", "kettle,mug")
    assert renders.count("products") == 2


def test_a_page_depending_on_a_row_follows_that_row_alone(shop) -> None:
    app, _, Sessions, renders, _ = shop
    client = app.test_client()
    assert client.get("/first").text == "kettle"
    rename(Sessions, 2, "mug")
    assert client.get("/first").headers["X-Cache"] == "HIT"
    rename(Sessions, 1, "jug")
    assert client.get("/first").text == "jug"
    assert renders.count("first") == 2


def test_cached_functions_and_fragments_take_depends_on(shop) -> None:
    app, mcache, Sessions, _, names = shop
    calls = []

    @mcache.cached(60, depends_on=Product)
    def catalogue() -> str:
        calls.append(1)
        return names()

    template = '{% mcache 60, "list", depends_on=model %}{{ names() }}{% endmcache %}'
    with app.test_request_context():
        assert catalogue() == catalogue() == "kettle,teapot" and len(calls) == 1
        assert render_template_string(template, model=Product, names=names) == "kettle,teapot"
        rename(Sessions, 1, "jug")
        assert catalogue() == "jug,teapot" and len(calls) == 2
        assert render_template_string(template, model=Product, names=names) == "jug,teapot"


def test_depends_on_tags_are_the_ones_the_watcher_bumps(shop) -> None:
    from flask_mcache.sqlalchemy import dependency_tags

    _, _, Sessions, _, _ = shop
    with Sessions() as db:
        row = db.get(Product, 2)
        assert dependency_tags([Product, row], "x") == [
            model_tag(Product),
            obj_tag("products", [2]),
        ]
    assert model_tag(Product) == "model:products"


@pytest.mark.parametrize(
    ("depends_on", "message"),
    [
        ("Product", r"got str 'Product'; for a tag by name use tags="),
        (NotMapped, r"depends_on takes SQLAlchemy mapped classes .* got type"),
        ([Product, 3], r"got int 3"),
        (Product(name="new"), r"row not yet flushed .* pass its class instead"),
    ],
)
def test_depends_on_names_what_it_got_when_it_is_no_mapped_class(shop, depends_on, message):
    _, mcache, _, _, _ = shop
    with pytest.raises(TypeError, match=message):
        mcache.cached_view(60, depends_on=depends_on)
    with pytest.raises(TypeError, match=message):
        mcache.cached(60, depends_on=depends_on)


def test_bare_decorators_use_the_defaults(memcached_url: str) -> None:
    app, mcache = app_on(memcached_url, "bare")
    calls = []

    @app.get("/")
    @mcache.cached_view
    def home():
        calls.append(1)
        return "home"

    @mcache.cached
    def double(n: int) -> int:
        calls.append(n)
        return 2 * n

    client = app.test_client()
    assert [client.get("/").headers["X-Cache"] for _ in range(2)] == ["MISS", "HIT"]
    with app.app_context():
        assert double(4) == double(4) == 8
    assert calls == [1, 4]
    with pytest.raises(TypeError, match=r"write @mcache.cached_view\(300\)"):
        mcache.cached_view("300")


def test_unless_serves_the_view_uncached_and_says_why(memcached_url: str) -> None:
    app, mcache = app_on(memcached_url, "unless")
    renders = []

    @app.get("/news")
    @mcache.cached_view(60, unless=lambda: app.config.get("PREVIEW"))
    def news():
        renders.append(1)
        return "news"

    client = app.test_client()
    assert client.get("/news").headers["X-Cache"] == "MISS"
    app.config["PREVIEW"] = True
    bypassed = client.get("/news")
    assert (bypassed.headers["X-Cache"], bypassed.headers["X-Cache-Reason"]) == (
        "BYPASS",
        "unless",
    )
    app.config["PREVIEW"] = False
    assert client.get("/news").headers["X-Cache"] == "HIT"
    assert len(renders) == 2


def test_a_key_function_decides_which_requests_share_a_page(memcached_url: str) -> None:
    app, mcache = app_on(memcached_url, "keyfn")

    @app.get("/items/<int:page>")
    @mcache.cached_view(60, key=lambda page: min(page, 3))  # pages past 3 are one page
    def items(page):
        return f"page {page}"

    client = app.test_client()
    assert client.get("/items/5?utm=a").text == "page 5"
    shared = client.get("/items/9?utm=b")
    assert (shared.headers["X-Cache"], shared.text) == ("HIT", "page 5")
    assert client.get("/items/2").text == "page 2"


def test_the_extension_reads_and_writes_plain_keys(memcached_url: str) -> None:
    app, mcache = app_on(memcached_url, "plain")
    with app.app_context():
        assert mcache.get("missing") is None and mcache.get("missing", 0) == 0
        assert mcache.set("a", {"n": 1}, ttl=60) is True
        assert mcache.set_many({("b", 2): [2], "c": 3}) == []
        assert mcache.get("a") == {"n": 1}
        assert mcache.get_many(["a", ("b", 2), "nope"]) == {"a": {"n": 1}, ("b", 2): [2]}
        assert mcache.delete("a") is True and mcache.get("a") is None
        with pytest.raises(Unserializable, match=r"cannot cache a _thread\.lock value") as raised:
            mcache.set("lock", threading.Lock())
        assert "(MCACHE_SERIALIZER)" in str(raised.value), "the Flask setting, not the codec's"
        with pytest.raises(Unserializable, match=r"MCACHE_SERIALIZER"):
            mcache.cache.get_or_build("built", threading.Lock)


def test_every_config_problem_is_reported_at_once() -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL="memcached://127.0.0.1:99999",
        MCACHE_JITER=0.1,
        MCACHE_STALE_TTL="long",
        MCACHE_REFRESH="later",
        MCACHE_SESSION_REPLICAS="two",
    )
    with pytest.raises(ConfigError) as raised:
        MCache(app)
    message = str(raised.value)
    assert message.startswith("5 problems, fix them all:")
    for expected in (
        "unknown config key(s) 'MCACHE_JITER' (did you mean 'MCACHE_JITTER'?)",
        "MCACHE_STALE_TTL must be an int or float, got 'long'",
        "bad port 99999",
        "MCACHE_REFRESH: refresh must be 'sync' or 'background', got 'later'",
        "MCACHE_SESSION_REPLICAS must be an int, got 'two'",
    ):
        assert expected in message


# -- sessions -------------------------------------------------------------------------------------


@pytest.fixture
def trio_app(trio):
    url = "memcached://" + ",".join(n.address for n in trio)
    app = Flask(__name__)
    app.secret_key = "tests-only"
    app.config.update(
        MCACHE_URL=url,
        MCACHE_STORE_OPTIONS={"connect_timeout": 0.2, "timeout": 0.3, "dead_timeout": 60},
        MCACHE_SESSIONS=True,
        MCACHE_NAMESPACE="sessions",
    )
    MCache(app)

    @app.post("/login/<name>")
    def login(name):
        session.regenerate()
        session["user"] = name
        return "ok"

    @app.get("/whoami")
    def whoami():
        return f"user={session.get('user')}"

    @app.post("/logout")
    def logout():
        session.clear()
        return "bye"

    return app, trio


def owner_of(app: Flask, sid: str, nodes):
    cache = app.session_interface.cache
    server = cache.store.ring.server_for(cache.key(("session", sid)))
    return next(n for n in nodes if n.port == server.port)


def test_a_signed_in_visitor_survives_the_loss_of_their_sessions_server(trio_app) -> None:
    app, trio = trio_app
    client = app.test_client()
    client.post("/login/alice")
    assert client.get("/whoami").text == "user=alice"
    cookie = client.get_cookie("session").value
    assert "alice" not in cookie, "the cookie holds a signed id, not the data"
    assert app.session_interface.cache.store.replicas == 2
    sid = cookie.rsplit(".", 1)[0]
    owner_of(app, sid, trio).kill()
    assert client.get("/whoami").text == "user=alice", "still signed in"


def test_a_thousand_sessions_and_one_server_killed_lose_none(trio_app) -> None:
    app, trio = trio_app
    clients = [app.test_client() for _ in range(1000)]
    for i, client in enumerate(clients):
        client.post(f"/login/u{i}")
    trio[1].kill()
    lost = [i for i, client in enumerate(clients) if client.get("/whoami").text != f"user=u{i}"]
    assert lost == []


def test_sessions_sign_their_ids_regenerate_at_login_and_end_at_logout(trio_app) -> None:
    app, _ = trio_app
    client = app.test_client()
    client.post("/login/bob")
    first = client.get_cookie("session").value
    client.post("/login/bob")
    second = client.get_cookie("session").value
    assert first != second, "a sign-in moves the session to a new id"
    planted = app.test_client()
    planted.set_cookie("session", first)
    assert planted.get("/whoami").text == "user=None", "the old id is gone"
    forged = app.test_client()
    forged.set_cookie("session", second.rsplit(".", 1)[0] + ".forged")
    assert forged.get("/whoami").text == "user=None", "an unsigned id is refused"
    client.post("/logout")
    assert client.get_cookie("session") is None
    replay = app.test_client()
    replay.set_cookie("session", second)
    assert replay.get("/whoami").text == "user=None", "a logged-out session is deleted"


def test_sessions_on_redis(redis_url: str) -> None:
    app = Flask(__name__)
    app.secret_key = "tests-only"
    app.config.update(MCACHE_URL=redis_url, MCACHE_SESSIONS=True, MCACHE_NAMESPACE="rs")
    MCache(app)

    @app.get("/count")
    def count():
        session["n"] = session.get("n", 0) + 1
        return str(session["n"])

    client = app.test_client()
    assert [client.get("/count").text for _ in range(3)] == ["1", "2", "3"]


def test_a_session_cached_page_is_never_shared(memcached_url: str) -> None:
    app = Flask(__name__)
    app.secret_key = "tests-only"
    app.config.update(MCACHE_URL=memcached_url, MCACHE_SESSIONS=True, MCACHE_NAMESPACE="sp")
    mcache = MCache(app)

    @app.get("/hello")
    @mcache.cached_view(60)
    def hello():
        return f"hello {session.get('user', 'guest')}"

    @app.post("/login/<name>")
    def login(name):
        session["user"] = name
        return "ok"

    alice, guest = app.test_client(), app.test_client()
    alice.post("/login/alice")
    seen = alice.get("/hello")
    assert (seen.text, seen.headers["X-Cache"]) == ("hello alice", "BYPASS")
    assert guest.get("/hello").text == "hello guest"


def test_jitter_spreads_both_ways_when_given_a_pair() -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL="memory://", MCACHE_JITTER=[0.2, 0.2])
    with app.app_context():
        assert MCache(app).cache.defaults.jitter == (0.2, 0.2)


def test_depends_on_in_an_app_watching_no_session_fails_at_first_use(memcached_url: str) -> None:
    """A cache that cannot invalidate says so: with no watch_sqlalchemy, no commit bumps
    what depends_on names, and the page, function or fragment would stay stale."""
    app, mcache = app_on(memcached_url, "unwatched")
    app.testing = True  # the error reaches the test, as it reaches a developer's console

    @app.get("/products")
    @mcache.cached_view(60, depends_on=Product)
    def products():
        return "kettle"

    @mcache.cached(60, depends_on=Product)
    def catalogue() -> str:
        return "kettle"

    fragment = '{% mcache 60, "list", depends_on=model %}x{% endmcache %}'
    watch = r"watches no session.*mcache\.watch_sqlalchemy\(Session\)"
    with pytest.raises(ConfigError, match=r"mcache\.cached_view with depends_on= .*" + watch):
        app.test_client().get("/products")
    with app.test_request_context():
        with pytest.raises(ConfigError, match=r"mcache\.cached with depends_on=.*" + watch):
            catalogue()
        with pytest.raises(ConfigError, match=r"\{% mcache %\} with depends_on=.*" + watch):
            render_template_string(fragment, model=Product)
    mcache.watch_sqlalchemy(sessions(), app)
    assert app.test_client().get("/products").text == "kettle"
    with app.test_request_context():
        assert catalogue() == "kettle"
