"""flask_mcache.MCache through Flask's test client and CLI runner, on real stores."""

from __future__ import annotations

import json
import threading
import time

import pytest
from flask import Flask, Response, make_response, request, session
from werkzeug.test import TestResponse

from flask_mcache import MCache
from mcache.errors import ConfigError
from tests.memcached_reads import record_reads

renders: list[str] = []


def make_app(url: str = "memory://", **config) -> tuple[Flask, MCache]:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="tests", MCACHE_URL=url, MCACHE_NAMESPACE="fl", **config)
    mcache = MCache(app)

    @app.get("/page")
    @mcache.cached_view(ttl=60, tags=["pages"])
    def page():
        renders.append("page")
        return f"page q={sorted(request.args.items(multi=True))}"

    @app.route("/both", methods=["GET", "POST"])
    @mcache.cached_view(ttl=60)
    def both():
        renders.append("both")
        return f"{request.method} {len(renders)}"

    @app.get("/lang")
    @mcache.cached_view(ttl=60, vary_on_headers=["Accept-Language"])
    def lang():
        renders.append("lang")
        response = make_response(f"lang={request.headers.get('Accept-Language')}")
        response.vary.add("Accept-Language")
        return response

    @app.get("/cookie")
    @mcache.cached_view(ttl=60)
    def cookie():
        renders.append("cookie")
        response = make_response(f"hello {request.args.get('who')}")
        response.set_cookie("visitor", request.args.get("who", ""))
        return response

    @app.get("/private")
    @mcache.cached_view(ttl=60)
    def private():
        renders.append("private")
        return Response(f"private {request.args.get('who')}", headers={"Cache-Control": "private"})

    @app.get("/no-store")
    @mcache.cached_view(ttl=60)
    def no_store():
        renders.append("no_store")
        return Response("x", headers={"Cache-Control": "no-store"})

    @app.get("/missing")
    @mcache.cached_view(ttl=60)
    def missing():
        renders.append("missing")
        return "gone", 404

    @app.get("/remember")
    @mcache.cached_view(ttl=60)
    def remember():
        renders.append("remember")
        session["seen"] = True
        return "noted"

    @app.get("/mine")
    @mcache.cached_view(ttl=60, per_user=lambda: request.headers.get("X-User"))
    def mine():
        renders.append("mine")
        return f"mine={request.headers.get('X-User')}"

    @app.get("/post/<int:pk>")
    @mcache.cached_view(ttl=60, stale_ttl=600, tags=lambda pk: [f"post:{pk}"])
    def post(pk):
        renders.append("post")
        time.sleep(0.2)
        return f"post {pk} render {len(renders)}"

    return app, mcache


@pytest.fixture(autouse=True)
def clean():
    renders.clear()


@pytest.fixture(params=["memory", "memcached", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    return (
        "memory://"
        if request.param == "memory"
        else request.getfixturevalue(f"{request.param}_url")
    )


def count(name: str) -> int:
    return renders.count(name)


def test_hits_and_misses_per_query_string_and_method(url: str) -> None:
    app, _ = make_app(url)
    client = app.test_client()
    first = client.get("/page?b=2&a=1")
    second = client.get("/page?a=1&b=2")
    other = client.get("/page?a=2")
    assert (first.headers["X-Cache"], second.headers["X-Cache"]) == ("MISS", "HIT")
    assert other.headers["X-Cache"] == "MISS" and count("page") == 2
    assert first.data == second.data != other.data
    assert client.post("/both").data.startswith(b"POST")
    assert bypassed(client.post("/both"), "method")
    assert bypassed(client.get("/both", headers={"Authorization": "Bearer x"}), "authorization")
    assert client.get("/both").headers["X-Cache"] == "MISS", "a POST is never cached"


def test_vary_headers_separate_entries() -> None:
    app, _ = make_app()
    client = app.test_client()
    assert client.get("/lang", headers={"Accept-Language": "fr"}).data == b"lang=fr"
    assert client.get("/lang", headers={"Accept-Language": "de"}).data == b"lang=de"
    assert client.get("/lang", headers={"Accept-Language": "fr"}).headers["X-Cache"] == "HIT"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/cookie?who=alice", "set-cookie"),
        ("/private?who=alice", "private"),
        ("/no-store", "private"),
        ("/missing", "status"),
        ("/remember", "session"),
    ],
)
def test_never_cached(path: str, reason: str) -> None:
    app, _ = make_app()
    client = app.test_client()
    first, second = client.get(path), app.test_client().get(path)
    assert bypassed(first, reason) and bypassed(second, reason)
    assert len(renders) == 2


def test_one_users_page_is_never_served_to_another() -> None:
    app, _ = make_app()
    client = app.test_client()
    assert client.get("/cookie?who=alice").headers["Set-Cookie"].startswith("visitor=alice")
    bob = app.test_client().get("/cookie?who=bob")
    assert b"bob" in bob.data and "alice" not in bob.headers.get("Set-Cookie", "")
    assert bypassed(client.get("/page", headers={"Authorization": "Bearer x"}), "authorization")
    assert app.test_client().get("/page").headers["X-Cache"] == "MISS"
    alice = client.get("/mine", headers={"X-User": "alice"})
    bob_page = client.get("/mine", headers={"X-User": "bob"})
    assert (alice.data, bob_page.data) == (b"mine=alice", b"mine=bob")
    assert client.get("/mine", headers={"X-User": "alice"}).headers["X-Cache"] == "HIT"


def test_stale_is_served_while_one_request_rebuilds(memcached_url: str) -> None:
    app, mcache = make_app(memcached_url)
    client = app.test_client()
    assert client.get("/post/1").headers["X-Cache"] == "MISS"
    with app.app_context():
        mcache.invalidate("post:1")
    results: list = []
    threads = [
        threading.Thread(target=lambda: results.append(app.test_client().get("/post/1")))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    states = sorted(r.headers["X-Cache"] for r in results)
    assert states.count("MISS") == 1 and states.count("STALE") == 7, states
    assert count("post") == 2


def test_eight_threads_on_an_absent_page_build_once(memcached_url: str) -> None:
    app, _ = make_app(memcached_url)
    results: list = []
    threads = [
        threading.Thread(target=lambda: results.append(app.test_client().get("/post/7")))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert count("post") == 1 and len({r.data for r in results}) == 1


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_a_hit_is_one_request_to_one_server(
    memcached_cluster_url: str, monkeypatch, protocol: str
) -> None:
    url = f"{memcached_cluster_url}?protocol={protocol}"
    app, _ = make_app(url, MCACHE_NEAR_TTL=None)  # the wire, not the near cache
    client = app.test_client()
    client.get("/page")
    requests = record_reads(monkeypatch)
    assert client.get("/page").headers["X-Cache"] == "HIT"
    assert [keys for _, keys in requests] == [2], "the page and its tag version together"


def test_function_caching_and_extras() -> None:
    app, mcache = make_app()
    calls = []

    @mcache.cached(ttl=60, tags=lambda n: [f"n:{n}"])
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    with app.app_context():
        assert square(3) == 9 and square(3) == 9 and calls == [3]
        square.invalidate(3)
        assert square(3) == 9 and calls == [3, 3]
        mcache.invalidate("n:3")
        assert square(3) == 9 and calls == [3, 3, 3]
        assert mcache.get_or_build("k", lambda: "v", tags=["t"]) == "v"
        with mcache.lock("job", timeout=5):
            assert mcache.lock("job").try_acquire() is False
        assert mcache.counter("c").incr() == 1
        assert mcache.stats()["cache"]["hits"] >= 1


def test_metrics_config_exports_the_apps_pages_to_prometheus(redis_url: str) -> None:
    from prometheus_client import REGISTRY

    app, _ = make_app(redis_url, MCACHE_METRICS=["prometheus"])
    labels = {"cache": "fl", "family": "page"}  # the namespace names an app's cache
    before = REGISTRY.get_sample_value("mcache_hits_total", labels) or 0.0
    client = app.test_client()
    assert [client.get("/page").headers["X-Cache"] for _ in range(3)] == ["MISS", "HIT", "HIT"]
    assert REGISTRY.get_sample_value("mcache_hits_total", labels) == before + 2
    built = {**labels, "outcome": "built"}
    assert (REGISTRY.get_sample_value("mcache_build_seconds_count", built) or 0) >= 1


def test_several_apps_keep_their_own_caches() -> None:
    one, ext_one = make_app(MCACHE_DEFAULT_TTL=10)
    two = Flask("two")
    two.config.update(MCACHE_NAMESPACE="two")
    ext_one.init_app(two)
    assert one.extensions["mcache"] is not two.extensions["mcache"]
    assert two.extensions["mcache"].namespace == "two"
    assert not hasattr(ext_one, "_cache"), "no per-app state on the extension"


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"MCACHE_REFRESH": "later"}, "MCACHE_REFRESH"),
        ({"MCACHE_STALE_TTL": -5}, "MCACHE_STALE_TTL"),
        ({"MCACHE_TLL": 5}, "MCACHE_TLL"),
        ({"MCACHE_URL": "memcache://x"}, "MCACHE_URL"),
        ({"MCACHE_METRICS": ["statsd"]}, "MCACHE_METRICS"),
    ],
)
def test_bad_config_fails_at_init_app_naming_the_key(config, named) -> None:
    app = Flask("bad")
    app.config.update(config)
    with pytest.raises(ConfigError, match=named):
        MCache(app)


# -- CLI -------------------------------------------------------------------------------------


def test_cli_stats_invalidate_and_flush(memcached_cluster_url: str) -> None:
    app, mcache = make_app(memcached_cluster_url)
    client = app.test_client()
    client.get("/page")
    client.get("/page")
    with app.app_context():
        mcache.cache.store.set_many({f"fill{i}": b"v" * 3000 for i in range(60)})
    runner = app.test_cli_runner()
    report = json.loads(runner.invoke(args=["mcache", "stats", "--json"]).output)
    assert report["cache"]["hits"] == 0 and report["counts_age"] is None, "the command flushed"
    app.extensions["mcache"].counts.flush()  # what the app's processes do every interval
    report = json.loads(runner.invoke(args=["mcache", "stats", "--json"]).output)
    assert report["cache"]["hits"] == 1 and report["cache"]["misses"] == 1
    assert len(report["servers"]) == 3
    assert "#" in runner.invoke(args=["mcache", "stats", "--slabs"]).output
    top = runner.invoke(args=["mcache", "stats", "--top", "1"]).output
    assert top.splitlines()[1].startswith("view.") and "lru_crawler" in top, top
    traced = runner.invoke(args=["mcache", "stats", "--trace-view", "/page"])
    assert "tracing is off: set MCACHE_TRACE_DIR" in traced.output
    result = runner.invoke(args=["mcache", "invalidate", "pages"])
    assert result.exit_code == 0 and result.output.startswith("pages ")
    assert client.get("/page").headers["X-Cache"] == "MISS"
    refused = runner.invoke(args=["mcache", "flush"], input="n\n")
    assert refused.exit_code != 0 and client.get("/page").headers["X-Cache"] == "HIT"
    assert runner.invoke(args=["mcache", "flush", "--yes"]).output.strip() == "flushed"
    assert client.get("/page").headers["X-Cache"] == "MISS"


def test_cli_stats_exits_2_when_a_server_is_down(memcached_url: str) -> None:
    from tests.servers import free_port

    down = f"127.0.0.1:{free_port()}"
    app, _ = make_app(f"{memcached_url},{down}?connect_timeout=0.2")
    result = app.test_cli_runner().invoke(args=["mcache", "stats"])
    assert result.exit_code == 2, result.output
    assert any(line.startswith(down) and "DEAD" in line for line in result.output.splitlines())
    assert f"server(s) down: {down}" in result.output
    app, _ = make_app(memcached_url)
    assert app.test_cli_runner().invoke(args=["mcache", "stats"]).exit_code == 0


def test_background_refresh_re_renders_after_the_response(memcached_url: str) -> None:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="t", MCACHE_URL=memcached_url, MCACHE_NAMESPACE="bg")
    mcache = MCache(app)

    @app.get("/news")
    @mcache.cached_view(ttl=60, stale_ttl=600, tags=["news"], refresh="background")
    def news():
        renders.append("news")
        return f"news for {request.args.get('region')} #{count('news')}"

    client = app.test_client()
    first = client.get("/news?region=eu")
    assert first.data == b"news for eu #1"
    assert first.headers["Cache-Status"] == "mcache; fwd=uri-miss; stored"  # RFC 9211
    with app.app_context():
        mcache.invalidate("news")
    stale = client.get("/news?region=eu")
    assert stale.headers["X-Cache"] == "STALE" and stale.data == b"news for eu #1"
    assert stale.headers["Cache-Status"] == "mcache; fwd=stale"
    deadline = time.monotonic() + 5
    while count("news") < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    while client.get("/news?region=eu").headers["X-Cache"] != "HIT" and time.monotonic() < deadline:
        time.sleep(0.02)
    hit = client.get("/news?region=eu")
    assert hit.data == b"news for eu #2", "rendered with the request's args"
    assert hit.headers["Cache-Status"] == "mcache; hit"


# -- after review ----------------------------------------------------------------------------


def session_app() -> tuple[Flask, MCache]:
    app, mcache = make_app()

    @app.get("/login/<name>")
    def login(name):
        session["user"] = name
        return "ok"

    @app.get("/hello")
    @mcache.cached_view(ttl=60)
    def hello():
        renders.append("hello")
        return f"hello {session.get('user', 'stranger')}" if "user" in session else "hello stranger"

    @app.get("/me")
    @mcache.cached_view(ttl=60, per_user=lambda: session.get("user"))
    def me():
        renders.append("me")
        return f"me={session.get('user')}"

    return app, mcache


def test_a_visitor_with_a_session_is_neither_served_nor_stored_unless_per_user() -> None:
    app, _ = session_app()
    alice = app.test_client()
    alice.get("/login/alice")
    page = alice.get("/hello")
    assert page.data == b"hello alice" and bypassed(page, "session")
    stranger = app.test_client().get("/hello")
    assert stranger.data == b"hello stranger" and stranger.headers["X-Cache"] == "MISS"
    assert alice.get("/hello").data == b"hello alice", "never the shared page"
    assert alice.get("/me").headers["X-Cache"] == "MISS"
    assert alice.get("/me").headers["X-Cache"] == "HIT"
    bob = app.test_client()
    bob.get("/login/bob")
    assert bob.get("/me").data == b"me=bob"


def test_a_background_refresh_runs_in_a_context_of_its_own(memcached_url: str) -> None:
    app = Flask(__name__)
    app.config.update(SECRET_KEY="t", MCACHE_URL=memcached_url, MCACHE_NAMESPACE="ctx")
    mcache = MCache(app)
    torn_down: list[bool] = []
    cookies_seen: list[dict] = []
    app.teardown_appcontext(lambda error: torn_down.append(True))

    @app.get("/feed")
    @mcache.cached_view(ttl=60, stale_ttl=600, tags=["feed"], refresh="background")
    def feed():
        cookies_seen.append(dict(request.cookies))
        return f"feed {len(cookies_seen)}"

    client = app.test_client()
    client.get("/feed")
    with app.app_context():
        mcache.invalidate("feed")
    client.set_cookie("tracking", "visitor-1")
    assert client.get("/feed").headers["X-Cache"] == "STALE"
    deadline = time.monotonic() + 5
    while len(cookies_seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cookies_seen[1] == {}, "the re-render never sees the visitor's cookies"
    while len(torn_down) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(torn_down) >= 4, "the re-render's own context was torn down too"


def test_cached_methods() -> None:
    app, mcache = make_app()

    class Repo:
        def __init__(self, base: int) -> None:
            self.base = base

        def __cache_key__(self) -> int:
            return self.base

        @mcache.cached(ttl=60)
        def plus(self, n: int) -> int:
            renders.append("plus")
            return self.base + n

    with app.app_context():
        assert Repo(1).plus(2) == 3 and Repo(1).plus(2) == 3 and count("plus") == 1
        Repo(1).plus.invalidate(2)
        assert Repo(1).plus(2) == 3 and count("plus") == 2


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"MCACHE_STORE_OPTIONS": 5}, "MCACHE_STORE_OPTIONS"),
        ({"MCACHE_STATS_INTERVAL": "s"}, "MCACHE_STATS_INTERVAL"),
        ({"MCACHE_NAMESPACE": 5}, "MCACHE_NAMESPACE"),
        ({"MCACHE_ONLINE": "no"}, "MCACHE_ONLINE"),
        ({"MCACHE_METRICS": "prometheus"}, "MCACHE_METRICS"),
    ],
)
def test_wrong_types_name_their_key(config, named) -> None:
    app = Flask("bad")
    app.config.update(config)
    with pytest.raises(ConfigError, match=named):
        MCache(app)


@pytest.mark.parametrize("topology", ["sentinel", "cluster"])
def test_cli_stats_lists_every_redis_node_with_its_role(topology: str, request) -> None:
    app, _mcache = make_app(request.getfixturevalue(f"{topology}_url"))
    report = json.loads(app.test_cli_runner().invoke(args=["mcache", "stats", "--json"]).output)
    roles = sorted(fields["role"] for fields in report["servers"].values())
    expected = {"sentinel": ["primary", "replica"], "cluster": ["primary"] * 3 + ["replica"] * 3}
    assert roles == expected[topology]


def bypassed(response: TestResponse, reason: str) -> bool:
    """Return whether ``response`` says it was not cached, for ``reason`` (in ``X-Cache`` and
    in RFC 9211's ``Cache-Status``)."""
    headers = response.headers
    return (headers.get("X-Cache"), headers.get("X-Cache-Reason"), headers.get("Cache-Status")) == (
        "BYPASS",
        reason,
        f"mcache; fwd=bypass; detail={reason}",
    )


def test_a_head_that_finds_no_page_is_no_miss() -> None:
    """``curl -I`` on a page nobody stored answers nothing from the cache: no miss counted."""
    app, mcache = make_app()
    client = app.test_client()

    def counted() -> tuple[int, int]:
        with app.app_context():
            counters = mcache.cache.stats()["cache"]
        return counters["hits"], counters["misses"]

    before = counted()
    assert client.head("/page").headers["X-Cache"] == "BYPASS"
    assert counted() == before
    client.get("/page")
    assert counted() == (before[0], before[1] + 1)
    assert client.head("/page").headers["X-Cache"] == "HIT"
    assert counted() == (before[0] + 1, before[1] + 1)
