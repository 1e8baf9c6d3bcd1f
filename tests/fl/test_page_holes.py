"""Pages real sites can cache, in Flask: holes, significant cookies and CDN windows.

A real Flask app with Flask-WTF's CSRFProtect and Flask-Login, through Flask's test
client: each visitor has a client of its own (its own cookie jar).
"""

from __future__ import annotations

import re

import pytest
from flask import Flask, render_template, render_template_string, session
from flask_login import LoginManager, UserMixin, login_user
from flask_wtf.csrf import CSRFProtect
from jinja2 import ChoiceLoader, DictLoader, TemplateRuntimeError

from flask_mcache import MCache
from mcache.errors import ConfigError
from tests.fl.test_extension import bypassed

TEMPLATES = {
    "base.html": (
        "<header>{% nocache %}{% if current_user.is_authenticated %}Hello, "
        "{{ current_user.id }}{% else %}Sign in{% endif %}{% endnocache %}</header>"
        "<main>{% block main %}{% endblock %}</main>"
    ),
    "greeting.html": (
        '{% extends "base.html" %}{% block main %}Specials: {{ specials }}{% endblock %}'
    ),
    "leaky.html": (
        '{% extends "base.html" %}{% block main %}As {{ current_user.id }}{% endblock %}'
    ),
    "form.html": '<form method="post"><input name="csrf_token" value="{{ csrf_token() }}"></form>',
    "cart.html": "<p>Shop</p>{% nocache %}Cart: {{ cart }} items{% endnocache %}",
}


class User(UserMixin):
    def __init__(self, name: str) -> None:
        self.id = name


def site(namespace: str, templates: dict[str, str]) -> tuple[Flask, MCache]:
    """An app with CSRFProtect, Flask-Login (any name signs in) and ``templates``."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="t", MCACHE_URL="memory://", MCACHE_NAMESPACE=namespace, TESTING=True
    )
    app.jinja_env.loader = ChoiceLoader([DictLoader(templates), app.jinja_env.loader])
    mcache = MCache(app)
    CSRFProtect(app)
    LoginManager(app).user_loader(User)

    @app.get("/login/<name>")
    def sign_in(name):
        login_user(User(name))
        return "in"

    return app, mcache


@pytest.fixture
def app():
    app, mcache = site("holes", TEMPLATES)
    app.renders = []

    def cart() -> int:
        from flask import request

        if request.cookies.get("fail"):
            raise RuntimeError("this visitor's cart could not be read")
        return int(request.cookies.get("cart", 0))

    @app.route("/form", methods=["GET", "POST"])
    @mcache.cached_view(60)
    def form():
        from flask import request

        if request.method == "POST":
            return f"posted {request.form['text']}"
        app.renders.append("form")
        return render_template("form.html")

    @app.get("/greeting")
    @mcache.cached_view(60, hole_context={})
    def greeting():
        app.renders.append("greeting")
        return render_template("greeting.html", specials="soup")

    @app.get("/leaky")
    @mcache.cached_view(60, hole_context={})
    def leaky():
        app.renders.append("leaky")
        return render_template("leaky.html")

    @app.get("/reads-session")
    @mcache.cached_view(60, hole_context={})
    def reads_session():
        return f"visits={session.get('visits', 0)}"

    @app.get("/shop")
    @mcache.cached_view(60, hole_context={"cart": cart})
    def shop():
        app.renders.append("shop")
        return render_template("cart.html")

    @app.get("/fragment")
    @mcache.cached_view(60)
    def fragment():
        return render_template_string(
            '{% mcache 60, "side" %}{% nocache %}x{% endnocache %}{% endmcache %}'
        )

    @app.get("/themed")
    @mcache.cached_view(60, cookies=["theme"])
    def themed():
        from flask import request

        app.renders.append("themed")
        return f"theme={request.cookies.get('theme')}", {"Vary": "Cookie"}

    @app.get("/site-themed")
    @mcache.cached_view(60)
    def site_themed():
        from flask import request

        return f"theme={request.cookies.get('theme')}", {"Vary": "Cookie"}

    @app.get("/edge")
    @mcache.cached_view(60, stale_ttl=600, cdn=True, tags=["cdn"], refresh="background")
    def edge():
        return "at the edge"

    app.mcache = mcache
    return app


def signed_in(app: Flask, name: str):
    client = app.test_client()
    assert client.get(f"/login/{name}").status_code == 200
    return client


def token_in(body: bytes) -> str:
    found = re.search(rb'name="csrf_token" value="([^"]+)"', body)
    assert found is not None, body
    return found[1].decode()


def test_a_form_page_is_built_once_and_each_visitor_posts_with_their_own_token(app) -> None:
    visitors = [app.test_client() for _ in range(3)]
    pages = [each.get("/form") for each in visitors]
    assert [page.headers["X-Cache"] for page in pages] == ["MISS", "HIT", "HIT"]
    assert app.renders.count("form") == 1
    tokens = [token_in(page.data) for page in pages]
    assert len(set(tokens)) == 3 and all(b"__mcache_hole_" not in p.data for p in pages)
    for each, token in zip(visitors, tokens, strict=True):
        posted = each.post("/form", data={"csrf_token": token, "text": "hi"})
        assert posted.status_code == 200 and posted.data == b"posted hi"
    stolen = visitors[1].post("/form", data={"csrf_token": tokens[0], "text": "hi"})
    assert stolen.status_code == 400, "another visitor's token fails Flask-WTF's check"


def test_a_greeting_is_built_once_for_two_signed_in_users_and_an_anonymous_one(app) -> None:
    alice, bob, anonymous = signed_in(app, "alice"), signed_in(app, "bob"), app.test_client()
    pages = [alice.get("/greeting"), bob.get("/greeting"), anonymous.get("/greeting")]
    assert [page.headers["X-Cache"] for page in pages] == ["MISS", "HIT", "HIT"]
    assert app.renders.count("greeting") == 1
    assert b"Hello, alice" in pages[0].data and b"bob" not in pages[0].data
    assert b"Hello, bob" in pages[1].data and b"alice" not in pages[1].data
    assert b"Sign in" in pages[2].data and b"Hello" not in pages[2].data
    assert all(b"Specials: soup" in page.data for page in pages)
    assert all(page.headers["Content-Length"] == str(len(page.data)) for page in pages)
    assert all("private" in page.headers["Cache-Control"] for page in pages)


def test_a_page_reading_the_user_outside_a_hole_is_bypassed_for_signed_in_visitors(app) -> None:
    alice = signed_in(app, "alice")
    first = alice.get("/leaky")
    assert bypassed(first, "session") and b"As alice" in first.data
    assert b"Hello, alice" in first.data
    assert app.test_client().get("/leaky").headers["X-Cache"] == "HIT", "the anonymous page"
    again = alice.get("/leaky")
    assert bypassed(again, "session") and b"As alice" in again.data
    assert app.test_client().get("/leaky").headers["X-Cache"] == "HIT"


def test_a_page_reading_the_session_outside_a_hole_is_bypassed_with_its_reason(app) -> None:
    client = signed_in(app, "alice")
    with client.session_transaction() as stored:
        stored["visits"] = 4
    page = client.get("/reads-session")
    assert bypassed(page, "session") and page.data == b"visits=4"


def test_a_hole_renders_with_the_context_the_view_declares(app) -> None:
    empty, full = app.test_client(), app.test_client()
    full.set_cookie("cart", "3")
    first, second = empty.get("/shop"), full.get("/shop")
    assert (first.headers["X-Cache"], second.headers["X-Cache"]) == ("MISS", "HIT")
    assert b"Cart: 0 items" in first.data and b"Cart: 3 items" in second.data
    assert app.renders.count("shop") == 1


def test_a_failed_hole_fails_that_response_only_not_the_cached_page(app) -> None:
    app.config["PROPAGATE_EXCEPTIONS"] = False
    failing = app.test_client()
    failing.set_cookie("fail", "1")
    assert failing.get("/shop").status_code == 500
    after = app.test_client().get("/shop")
    assert after.status_code == 200 and after.headers["X-Cache"] == "HIT"
    assert b"Cart: 0 items" in after.data and app.renders.count("shop") == 1


def test_nocache_inside_a_cached_fragment_fails_rather_than_share_a_hole(app) -> None:
    with pytest.raises(TemplateRuntimeError, match="cannot render inside"):
        app.test_client().get("/fragment")


def test_outside_a_cached_page_nocache_renders_in_place(app) -> None:
    with app.test_request_context():
        source = "a{% nocache %}{{ word }}{% endnocache %}c"
        assert render_template_string(source, word="b") == "abc"


def test_requests_with_only_other_cookies_get_the_shared_page(app) -> None:
    plain, tracked = app.test_client(), app.test_client()
    tracked.set_cookie("_ga", "GA1.2.3")
    pages = [plain.get("/themed"), tracked.get("/themed")]
    assert [page.headers["X-Cache"] for page in pages] == ["MISS", "HIT"]
    dark = app.test_client()
    dark.set_cookie("theme", "dark")
    dark.set_cookie("_ga", "GA1.9.9")
    assert dark.get("/themed").data == b"theme=dark"
    assert dark.get("/themed").headers["X-Cache"] == "HIT"
    assert app.renders.count("themed") == 2
    assert bypassed(app.test_client().get("/site-themed"), "vary")


def test_mcache_page_cookies_declares_the_cookies_of_every_page() -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_PAGE_COOKIES=["theme"], TESTING=True)
    mcache = MCache(app)

    @app.get("/")
    @mcache.cached_view(60)
    def home():
        return "home", {"Vary": "Cookie"}

    tracked = app.test_client()
    tracked.set_cookie("_ga", "GA1")
    assert app.test_client().get("/").headers["X-Cache"] == "MISS"
    assert tracked.get("/").headers["X-Cache"] == "HIT"


def test_a_bad_mcache_page_cookies_names_the_setting() -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_PAGE_COOKIES=[""], TESTING=True)
    with pytest.raises(ConfigError, match="MCACHE_PAGE_COOKIES must be a list of cookie names"):
        MCache(app)


def test_cdn_headers_carry_the_entrys_ttl_and_stale_ttl(app) -> None:
    for page in (app.test_client().get("/edge"), app.test_client().get("/edge")):
        control = {d.strip() for d in page.headers["Cache-Control"].split(",")}
        assert {"max-age=60", "s-maxage=60", "stale-while-revalidate=600"} <= control
        assert "stale-if-error=600" in control
        assert page.headers["CDN-Cache-Control"] == (
            "max-age=60, stale-while-revalidate=600, stale-if-error=600"
        )
        assert int(page.headers["Age"]) >= 0
    with app.app_context():
        app.mcache.invalidate("cdn")
    stale = app.test_client().get("/edge")
    assert stale.headers["X-Cache"] == "STALE" and stale.headers["Cache-Control"] == "max-age=0"
    assert "CDN-Cache-Control" not in stale.headers


def test_mcache_page_cdn_turns_cdn_headers_on_for_every_page() -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_PAGE_CDN=True, MCACHE_STALE_TTL=90, TESTING=True)
    mcache = MCache(app)

    @app.get("/")
    @mcache.cached_view(30)
    def home():
        return "home"

    page = app.test_client().get("/")
    assert page.headers["CDN-Cache-Control"] == (
        "max-age=30, stale-while-revalidate=90, stale-if-error=90"
    )


@pytest.mark.parametrize("value", [["user"], {"cart": 3}])
def test_a_bad_hole_context_fails_at_decoration_saying_what_to_write(app, value) -> None:
    with pytest.raises(TypeError, match="hole_context must be a dict of names to callables"):
        app.mcache.cached_view(60, hole_context=value)
