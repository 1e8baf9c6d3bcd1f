"""The dashboard's data on real servers: per-family counts added up across processes, the
chart drawn from them, and each button's action, confirmed and logged."""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import subprocess
import sys
import time
from xml.etree import ElementTree

import pytest

from mcache import Cache
from mcache.admin.dashboard import CacheView, gather, trace_of
from mcache.admin.dashboard_actions import ActionError, perform, plan
from mcache.admin.dashboard_html import chart_svg, confirm_html, dashboard_html
from mcache.errors import ConfigError
from mcache.observe.families import FamilyCounts, family_minutes
from mcache.observe.samples import Minute


def family_cache(url: str, namespace: str = "dash") -> Cache:
    return Cache(url, namespace=namespace, metrics=["families"], stats_interval=0.01)


@pytest.fixture(params=["memcached", "redis"])
def url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


def _traffic(url: str, namespace: str, hits: int) -> None:
    cache = family_cache(url, namespace)

    @cache.cached(ttl=60, key_prefix="shop.price")
    def price(n: int) -> int:
        return n * 2

    price(1)  # a miss
    for _ in range(hits):
        price(1)
    cache.get_or_build(("view.page", "/"), lambda: "page", ttl=60)  # a page family miss
    time.sleep(0.05)
    cache.get_or_build(("view.page", "/"), lambda: "page", ttl=60)
    for observer in cache.counts.observers:
        if isinstance(observer, FamilyCounts):
            observer.flush()


def test_families_add_up_across_processes_minute_by_minute(url: str) -> None:
    namespace = f"fam{time.time_ns()}"
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_traffic, args=(url, namespace, 4)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    reader = family_cache(url, namespace)
    name = "shop.price"
    chart = family_minutes(reader.counts, [name, "page", "other"], int(time.time() // 60))
    function_counts = {"hits": 0, "stale": 0, "misses": 0}
    for minute in chart[name]:
        for event, count in minute.counts.items():
            function_counts[event] += count
    # each process: one miss then four hits of price(1); the entry is shared, so the second
    # process may hit where the first missed
    assert function_counts["hits"] + function_counts["misses"] == 10
    assert function_counts["hits"] >= 8
    assert sum(m.counts["misses"] + m.counts["hits"] for m in chart["page"]) == 4
    assert chart["other"] == []


def test_a_process_that_exits_before_the_interval_still_adds_its_family_counts(
    url: str,
) -> None:
    namespace = f"famexit{time.time_ns()}"
    script = (
        "from mcache import Cache\n"
        f"cache = Cache({url!r}, namespace={namespace!r}, metrics=['families'],"
        " stats_interval=3600)\n"
        "for _ in range(3):\n"
        "    cache.get_or_build(('view.page', '/'), lambda: 'page', ttl=60)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    reader = family_cache(url, namespace)
    chart = family_minutes(reader.counts, ["page"], int(time.time() // 60))
    counted = {event: sum(m.counts[event] for m in chart["page"]) for event in ("hits", "misses")}
    assert counted == {"hits": 2, "misses": 1}


def test_the_unknown_function_family_is_other_and_families_are_off_by_default(
    memcached_url: str,
) -> None:
    plain = Cache(memcached_url, namespace="plain")
    assert gather(plain, "plain").families is None
    with pytest.raises(ConfigError, match="families"):
        Cache(memcached_url, namespace="bad", metrics=["famlies"])


def test_the_chart_draws_each_family_with_lookups(url: str) -> None:
    namespace = f"chart{time.time_ns()}"
    _traffic(url, namespace, 3)
    cache = family_cache(url, namespace)
    cache.counts.flush()
    view = gather(cache, "default")
    svg = chart_svg(view)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    drawn = {family for family, minutes in (view.families or {}).items() if minutes}
    assert "page" in drawn
    for family in drawn:
        assert f'data-family="{family}"' in svg


def test_a_few_minutes_of_samples_span_the_chart_and_the_legend_is_clear_of_them() -> None:
    now = 29_000_000
    minutes = [Minute(now - n, {"hits": 9, "misses": 1}) for n in range(9, -1, -1)]
    names = ["page", "fragment", "shop.prices", "blog.sidebar", "search.results", "other"]
    view = CacheView("default", {}, minutes, {name: minutes for name in names}, now_minute=now)
    svg = ElementTree.fromstring(chart_svg(view))
    ns = {"svg": "http://www.w3.org/2000/svg"}
    grid = [float(line.get("x1")) for line in svg.findall("svg:line", ns)][:1]
    right = max(float(line.get("x2")) for line in svg.findall("svg:line", ns))
    lowest_line = 0.0
    for series in svg.findall("svg:polyline", ns):
        points = [map(float, point.split(",")) for point in series.get("points").split()]
        xs, ys = zip(*points, strict=True)
        assert (min(xs), max(xs)) == (grid[0], right), "ten minutes span the whole width"
        lowest_line = max(lowest_line, *ys)
    labels = [float(t.get("y")) for t in svg.findall("svg:text", ns)]
    entries = svg.findall("svg:g", ns)
    assert [entry.get("data-family") for entry in entries] == ["all", *names]
    boxes = []
    for entry in entries:
        text = entry.find("svg:text", ns)
        x, y = float(entry.find("svg:line", ns).get("x1")), float(text.get("y"))
        assert y - 11 > max(labels[:4]) and y - 11 > lowest_line, "under the plot and its labels"
        boxes.append((y, x, float(text.get("x")) + 6.5 * len(text.text)))
    for (y1, _, end), (y2, start, _) in itertools.pairwise(boxes):
        assert y2 > y1 or start > end, "entries of a row do not overlap"
    assert float(svg.get("height")) >= max(y for y, _, _ in boxes)
    assert "9 min ago" in ElementTree.tostring(svg, encoding="unicode"), "the first sample's"


def test_the_page_escapes_what_it_shows(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="esc")
    cache.get_or_build(("<script>", 1), lambda: 1, ttl=60)
    html = dashboard_html(
        [gather(cache, "<b>x</b>")], "/act", {"csrf": '"><script>'}, trace_of(cache, "<i>")
    )
    assert "<script>" not in html and "<b>x</b>" not in html and "<i>" not in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and 'value="&quot;&gt;&lt;script&gt;"' in html


def test_invalidate_is_confirmed_then_done_and_logged(
    memcached_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = Cache(memcached_url, namespace="act")
    builds = []
    cache.get_or_build("k", lambda: builds.append(1) or len(builds), ttl=60, tags=["shop"])
    caches = {"default": cache}
    action = plan({"kind": "invalidate", "cache": "default", "target": "shop"}, caches)
    page = confirm_html(action, "/act", "/", {})
    assert "Invalidate tag &#x27;shop&#x27;" in page and 'name="confirmed" value="yes"' in page
    with caplog.at_level(logging.WARNING, "mcache.dashboard"):
        done = perform(action, caches, "alice")
    assert "invalidated tag 'shop'" in done
    assert "by alice" in caplog.text
    cache.get_or_build("k", lambda: builds.append(1) or len(builds), ttl=60, tags=["shop"])
    assert len(builds) == 2, "the tag's entry was rebuilt"


def test_refresh_runs_the_function_for_the_given_arguments(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="refresh")
    calls: list[int] = []

    @cache.cached(ttl=60, key_prefix="shop.price")
    def price(n: int, currency: str = "EUR") -> str:
        calls.append(n)
        return f"{n} {currency} #{len(calls)}"

    assert price(3) == "3 EUR #1"
    caches = {"default": cache}
    action = plan(
        {"kind": "refresh", "cache": "default", "target": "shop.price", "arguments": "[3]"}, caches
    )
    assert "shop.price(3)" in action.describe()
    perform(action, caches, "bob")
    assert price(3) == "3 EUR #2", "the entry holds the refreshed result"
    with pytest.raises(ActionError, match="JSON"):
        plan(
            {"kind": "refresh", "cache": "default", "target": "shop.price", "arguments": "3,"},
            caches,
        )
    with pytest.raises(ActionError, match="not a @cached function"):
        plan({"kind": "refresh", "cache": "default", "target": "nope"}, caches)


def test_flush_wants_the_cache_name_typed(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="flush")
    cache.set("k", 1)
    caches = {"default": cache}
    action = plan({"kind": "flush", "cache": "default"}, caches)
    assert 'name="typed"' in confirm_html(action, "/act", "/", {})
    with pytest.raises(ActionError, match="type the cache's name"):
        perform(action, caches, "carol", typed="yes")
    assert cache.get("k") == 1, "nothing flushed without the name"
    perform(action, caches, "carol", typed="default")
    assert cache.get("k", None) is None


def test_a_trace_is_shown_when_tracing_is_on(memcached_url: str, tmp_path) -> None:
    off = Cache(memcached_url, namespace="notrace")
    assert "tracing is off" in trace_of(off, "k").problem
    on = Cache(memcached_url, namespace="trace", trace_dir=str(tmp_path))
    before = time.time()
    on.get_or_build("k", lambda: 1, ttl=60)
    on.get_or_build("k", lambda: 1, ttl=60)
    [(key, letters, written)] = trace_of(on, "k").rows
    assert key == on.key("k") and letters.startswith("M") and letters.endswith("H")
    assert written is not None and before - 1 <= written <= time.time() + 1
    html = dashboard_html([gather(on, "default")], "/act", {}, trace_of(on, "k"))
    assert f"<code>{letters}</code>" in html and " UTC</td>" in html
    assert "no events of 'other' yet" in trace_of(on, "other").problem


def test_near_hits_are_counted_per_family_and_recorded_as_no_call(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace=f"near{time.time_ns()}", near_ttl=60,
                  metrics=["families"], stats_interval=0.01)  # fmt: skip
    assert cache.counts.call_watchers == [], "counting only: no call is recorded for it"
    for _ in range(4):  # a miss, a hit from the store, then near hits
        cache.get_or_build(("view.page", "/"), lambda: "page", ttl=60)
    [families] = [o for o in cache.counts.observers if isinstance(o, FamilyCounts)]
    families.flush()
    minutes = family_minutes(cache.counts, ["page"], int(time.time() // 60))["page"]
    counted = {e: sum(m.counts[e] for m in minutes) for e in ("hits", "stale", "misses")}
    assert counted == {"hits": 3, "stale": 0, "misses": 1}  # a minute may end in between


def test_a_framework_names_what_it_invalidates_besides_tags(memcached_url: str) -> None:
    caches = {"default": Cache(memcached_url, namespace="tag-of")}
    form = {"kind": "invalidate", "cache": "default", "label": "shop_item"}
    with pytest.raises(ActionError, match="name the tag"):
        plan(form, caches)  # no framework to say what a label is
    action = plan(form, caches, lambda table: (f"model:{table}", f"table {table}"))
    assert (action.target, action.label) == ("model:shop_item", "table shop_item")
    again = plan(action.fields(), caches, lambda table: ("never", "asked"))
    assert again == action, "the confirmation's form names the tag: nothing is looked up again"
