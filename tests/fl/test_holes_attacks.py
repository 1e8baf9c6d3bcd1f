"""Attacks on holes, hole_context and CDN windows (Flask): ways one visitor's data could
reach another's response, or a placeholder go out unfilled, each one shut. A real app
with Flask-WTF's CSRFProtect and Flask-Login, through Flask's test client (one client
per visitor).
"""

from __future__ import annotations

import pytest
from flask import g, render_template, request, session
from flask_login import current_user
from flask_wtf.csrf import generate_csrf

from tests.fl.test_page_holes import User, signed_in, site

TEMPLATES = {
    "greeting.html": (
        "<header>{% nocache %}{% if current_user.is_authenticated %}Hello, "
        "{{ current_user.id }}{% else %}Sign in{% endif %}{% endnocache %}</header>"
    ),
    "anon_reader.html": ("{% if current_user.is_authenticated %}Hello{% else %}Sign in{% endif %}"),
}


@pytest.fixture
def app():
    app, mcache = site("review", TEMPLATES)
    app.calls = []

    @app.before_request
    def load_logged_in_user():
        # The Flask tutorial's pattern (flaskr): the signed-in user in g, from the session.
        if request.path != "/g-user":
            return
        user_id = session.get("_user_id")
        g.user = None if user_id is None else User(user_id)

    @app.get("/g-user")
    @mcache.cached_view(60, hole_context={})
    def g_user():
        return f"<p>Hi {g.user.id if g.user else 'guest'}</p>"

    @app.get("/csrf-header")
    @mcache.cached_view(60)
    def csrf_header():
        return "ok", {"X-CSRF-Token": generate_csrf()}

    @app.get("/counted")
    @mcache.cached_view(60, hole_context={})
    def counted():
        app.calls.append("counted")  # a side effect: an INSERT, a counter, an e-mail...
        return f"Hello {'you' if current_user.is_authenticated else 'guest'}"

    @app.get("/stale-greeting")
    @mcache.cached_view(
        60, stale_ttl=600, tags=["review-stale"], refresh="background", hole_context={}
    )
    def stale_greeting():
        return render_template("greeting.html")

    @app.get("/cdn-anon-reader")
    @mcache.cached_view(60, stale_ttl=600, cdn=True, hole_context={})
    def cdn_anon_reader():
        return render_template("anon_reader.html")

    app.mcache = mcache
    return app


# -- 1. the session read before the view (g.user) ----------------------------------------------


def test_g_user_set_before_the_view_never_reaches_another_visitor(app) -> None:
    """SharedRender swaps the session and Flask-Login's user, but cannot see ``g``: a
    before_request hook that loaded the user into ``g`` (the Flask tutorial's pattern)
    read the session before the view, so a visitor who has one shares nothing."""
    alice = signed_in(app, "alice")
    assert b"Hi alice" in alice.get("/g-user").data
    anonymous = app.test_client().get("/g-user")
    assert b"alice" not in anonymous.data, (
        f"an anonymous visitor got alice's page ({anonymous.headers['X-Cache']})"
    )


# -- 2. the CSRF token in a header -------------------------------------------------------------


def test_a_csrf_token_in_a_response_header_is_never_sent_as_a_placeholder(app) -> None:
    """Only a stored body is filled: a page with a placeholder in a header is filled
    for this response and not stored."""
    page = app.test_client().get("/csrf-header")
    assert "__mcache_hole_" not in page.headers["X-CSRF-Token"], page.headers["X-CSRF-Token"]


# -- 3. the view runs once per request once the page is stored ---------------------------------


def test_a_signed_in_visitor_runs_the_view_once_per_request_once_the_page_is_stored(app) -> None:
    """A page whose shared part reads the user, for visitors with a session cookie: the
    build a session holder sets off renders the shared page and then theirs (twice, once
    per build); from then on the stored page says it read the user, and each such visitor
    runs the view once, with their own session."""
    alice, bob = signed_in(app, "alice"), signed_in(app, "bob")
    app.calls.clear()
    assert alice.get("/counted").data == b"Hello you"
    assert app.calls == ["counted", "counted"], "the shared build, then alice's own"
    app.calls.clear()
    assert bob.get("/counted").data == b"Hello you"
    assert app.calls == ["counted"], f"the view ran {len(app.calls)} times for one request"
    assert app.test_client().get("/counted").headers["X-Cache"] == "HIT"


# -- 4. a stale page filled for one visitor stays private --------------------------------------


def test_a_stale_page_with_filled_holes_stays_private(app) -> None:
    app.test_client().get("/stale-greeting")
    with app.app_context():
        app.mcache.invalidate("review-stale")
    stale = signed_in(app, "alice").get("/stale-greeting")
    assert stale.headers["X-Cache"] == "STALE" and b"Hello, alice" in stale.data
    assert "private" in stale.headers["Cache-Control"], stale.headers["Cache-Control"]


# -- 5. no CDN windows on a page mcache keeps from session holders -----------------------------


def test_a_page_mcache_keeps_from_session_holders_gets_no_cdn_windows(app) -> None:
    page = app.test_client().get("/cdn-anon-reader")
    assert page.headers["X-Cache"] == "MISS" and "Cookie" in page.headers["Vary"]
    assert "CDN-Cache-Control" not in page.headers, page.headers["CDN-Cache-Control"]
