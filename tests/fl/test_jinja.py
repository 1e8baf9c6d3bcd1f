"""{% mcache %} fragments with tags, and the counters' Jinja globals, in a real Flask app."""

from __future__ import annotations

import pytest
from flask import Flask, render_template_string
from jinja2 import TemplateSyntaxError

from flask_mcache import MCache
from mcache import FakeClock
from tests.renders import Renders


@pytest.fixture
def app():
    app = Flask(__name__)
    app.config.update(SECRET_KEY="t", MCACHE_NAMESPACE="jinja", MCACHE_ONLINE=True)
    mcache = MCache(app)

    @app.get("/post/<int:pk>")
    def post(pk):
        return render_template_string(
            "{{ count_view(key) }} {{ count_view(key) }} {{ view_count(key) }}", key=f"post:{pk}"
        )

    @app.get("/")
    def home():
        return "home"

    app.mcache = mcache
    return app


def test_fragment_renders_once_and_follows_its_tag(app) -> None:
    renders = Renders()
    block = '{% mcache 60, "sidebar", tags=["posts"] %}n={{ renders() }}{% endmcache %}'
    with app.test_request_context():
        assert render_template_string(block, renders=renders) == "n=1"
        assert render_template_string(block, renders=renders) == "n=1"
        app.mcache.invalidate("posts")
        assert render_template_string(block, renders=renders) == "n=2"


def test_vary_values_and_a_ttl_of_zero_or_none_keeps_until_invalidated(app) -> None:
    renders = Renders()
    block = '{% mcache 60, "menu", vary=[user] %}{{ user }}/{{ renders() }}{% endmcache %}'
    with app.test_request_context():
        assert render_template_string(block, renders=renders, user=1) == "1/1"
        assert render_template_string(block, renders=renders, user="1") == "1/2"
        assert render_template_string(block, renders=renders, user=1) == "1/1"
        for ttl in ("0", "None"):  # Flask-Caching's rule: no timeout
            kept = (
                f'{{% mcache {ttl}, "kept-{ttl}", tags=["k"] %}}'
                "{{ renders() }}{% endmcache %}"
            )
            first = render_template_string(kept, renders=renders)
            assert render_template_string(kept, renders=renders) == first
            app.mcache.invalidate("k")
            assert render_template_string(kept, renders=renders) == str(int(first) + 1)


def test_unknown_options_fail_when_the_template_is_compiled(app) -> None:
    with app.test_request_context(), pytest.raises(TemplateSyntaxError, match="unknown option"):
        render_template_string('{% mcache 60, "x", colour="red" %}x{% endmcache %}')


def test_views_count_once_per_request(app) -> None:
    client = app.test_client()
    assert client.get("/post/1").data == b"1 1 1"
    assert client.get("/post/1").data == b"2 2 2"
    assert client.get("/post/2").data == b"1 1 1"


def test_online_tracking_counts_distinct_humans(app, monkeypatch) -> None:
    with app.app_context():
        core = app.mcache.cache
        clock = FakeClock(core.clock.time())
        monkeypatch.setattr(core, "clock", clock)
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.1"):
            app.test_client().get(
                "/", headers={"User-Agent": "Mozilla/5.0"}, environ_base={"REMOTE_ADDR": address}
            )
        app.test_client().get("/", headers={"User-Agent": "Googlebot"})
        clock.advance(app.mcache.online_counter("site").slot_len)
        with app.test_request_context():
            assert render_template_string("{{ online_count() }}") == "2"


def test_online_count_counts_the_visitor_looking_when_asked(app, monkeypatch) -> None:
    with app.app_context():
        core = app.mcache.cache
        monkeypatch.setattr(core, "clock", FakeClock(core.clock.time()))
        app.test_client().get("/", headers={"User-Agent": "Mozilla/5.0"})
        with app.test_request_context():
            assert render_template_string("{{ online_count() }}") == "0"
            assert render_template_string("{{ online_count(current=True) }}") == "1"


def test_online_settings_shape_what_is_counted_and_shown(monkeypatch) -> None:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="t",
        MCACHE_NAMESPACE="online-settings",
        MCACHE_ONLINE=True,
        MCACHE_ONLINE_WINDOW=60,
        MCACHE_ONLINE_SLOTS=3,
        MCACHE_ROBOTS=["monitor"],
    )
    MCache(app)
    app.get("/")(lambda: "home")
    core = app.extensions["mcache"]
    clock = FakeClock(core.clock.time())
    monkeypatch.setattr(core, "clock", clock)
    for agent in ("Mozilla/5.0 (a)", "Mozilla/5.0 (b)", "uptime-monitor/1.0"):
        app.test_client().get("/", headers={"User-Agent": agent})
    clock.advance(30)  # a 30 s slot later (60 s over two complete slots): the first is complete
    with app.test_request_context():
        assert render_template_string("{{ online_count() }}") == "2"
