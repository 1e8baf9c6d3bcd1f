"""manage.py mcache_stats against real servers, checked against known activity."""

from __future__ import annotations

import io
import json
import os
import sys

import pytest
from django.core.cache import caches
from django.core.management import CommandError, call_command
from django.test import override_settings

from mcache.admin.report import collect
from tests.servers import memcached_process

BACKEND = "django_mcache.backend.MCacheBackend"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("mcache_stats", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def cluster(memcached_cluster_url: str, tmp_path):
    options = {"trace_dir": str(tmp_path / "trace"), "stats_interval": 3600}
    setting = {
        "default": {"BACKEND": BACKEND, "LOCATION": memcached_cluster_url, "OPTIONS": options},
        "plain": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
    with override_settings(CACHES=setting):
        yield caches["default"]


def test_json_report_matches_known_activity(cluster) -> None:
    for _ in range(4):
        cluster.get_or_set("page", lambda: "x" * 5000, 60)
    cluster.get_or_build("sidebar", lambda: "s", tags=["posts"])
    cluster.mcache.counts.flush()  # what the site's processes do every stats_interval
    report = json.loads(run("--json"))
    counters = report["cache"]
    assert (counters["misses"], counters["hits"], counters["builds"]) == (2, 3, 2)
    assert counters["hit_ratio"] == pytest.approx(3 / 5)
    assert len(report["servers"]) == 3
    assert sum(s["curr_items"] for s in report["servers"].values()) >= 2
    for fields in report["servers"].values():
        assert 0.0 <= fields["hit_ratio"] <= 1.0 and fields["uptime"] >= 0


def test_text_report_names_servers_and_both_hit_ratios(cluster) -> None:
    cluster.get_or_set("page", lambda: "v", 60)
    text = run()
    for name in cluster.mcache.store.stats():
        assert name in text
    assert "hit ratio" in text and "stale served" in text


def test_the_command_flushes_nothing_and_says_how_old_the_counts_are(cluster) -> None:
    cluster.get_or_set("page", lambda: "v", 60)
    report = json.loads(run("--json"))
    assert report["cache"]["misses"] == 0 and report["counts_age"] is None
    assert cluster.mcache.counts.local()["misses"] == 1, "the command flushed a process's counts"
    assert "counts: no process has added its counts yet" in run()
    cluster.mcache.counts.flush()
    report = json.loads(run("--json"))
    assert report["cache"]["misses"] == 1 and 0 <= report["counts_age"] < 5
    said = "counts as of 0 s ago (each process adds its counts on its first call 3600 s after"
    assert said in run()


def test_evictions_warn_that_the_cache_is_too_small() -> None:
    node = memcached_process(memory_mb=2).start()
    location = f"memcached://{node.address}"
    try:
        with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": location}}):
            assert "warning" not in run()
            caches["default"].set_many({f"k{i}": os.urandom(50_000) for i in range(200)}, 60)
            first, report = run(), json.loads(run("--json"))
            caches["default"].set_many({f"j{i}": os.urandom(50_000) for i in range(200)}, 60)
            rising = collect(caches["default"].mcache, previous=report)["warnings"]
            rounds = run("--watch", "0.01", "--count", "2")
    finally:
        node.kill()
    assert "evictions rising" not in first and "smaller than its working set" in first
    assert report["warnings"] and "an hour over its" in report["warnings"][0]
    assert rising and rising[0].startswith(f"{node.address}: evictions rising (+")
    assert rounds.count("warning:") == 2


def test_top_lists_the_entries_read_most_recently(cluster) -> None:
    for n in range(5):
        cluster.mcache.get_or_build(("block", f"box{n}"), lambda: "v", ttl=60)
    cluster.mcache.get_or_build(("block", "box3"), lambda: "v", ttl=60)  # read since written
    rows = json.loads(run("--top", "3", "--json"))
    assert len(rows) == 3 and rows[0]["readable"] == "block.box3" and rows[0]["read"] is True
    assert [r["read"] for r in rows[1:]] == [False, False]
    assert {r["family"] for r in rows} == {"fragment"}
    text = run("--top", "2")
    assert "block.box3" in text and "lru_crawler metadump" in text
    with pytest.raises(CommandError, match="--top takes a number"):
        run("--top", "0")


def test_watch_repeats(cluster) -> None:
    assert run("--watch", "0.01", "--count", "2").count("mcache (every process") == 2


def test_slab_chart_from_memcached(cluster) -> None:
    cluster.set_many({f"k{i}": "v" * 3000 for i in range(50)})
    rows = json.loads(run("--slabs", "--json"))
    assert any(r["used"] > 0 and r["allocated"] >= r["used"] for r in rows)
    assert "#" in run("--slabs")


def test_slab_png(cluster, tmp_path) -> None:
    cluster.set_many({f"k{i}": "v" * 3000 for i in range(50)})
    target = tmp_path / "slabs.png"
    assert str(target) in run("--png", str(target))
    assert target.read_bytes().startswith(b"\x89PNG")


def test_png_without_matplotlib_says_how_to_get_it(cluster, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(CommandError, match="pip install matplotlib"):
        run("--png", str(tmp_path / "x.png"))


def test_trace_follows_a_key(cluster) -> None:
    cluster.get_or_set("page", lambda: "v", 60)
    cluster.get_or_set("page", lambda: "v", 60)
    assert run("--trace", "page").strip() == "page: MLWUH"


def test_trace_finds_a_pages_keys_by_path_and_a_fragments_by_name(cluster, rf) -> None:
    core = cluster.mcache
    for path in ("/blogs/x/", "/blogs/x/", "/blogs/xy/"):
        core.get_or_build(("view", "blog", "http", "testserver", path, (), (), None, None), str)
    core.get_or_build(("block", "sidebar", (), "en"), str)
    core.get_or_build(("block", "sidebar", (), "fr"), str)
    pages = run("--trace-view", "/blogs/x/").strip().splitlines()
    assert len(pages) == 1 and pages[0].endswith(": MLWUH"), pages
    fragments = run("--trace-fragment", "sidebar").strip().splitlines()
    assert [line.rsplit(": ", 1)[1] for line in fragments] == ["MLWU", "MLWU"]
    assert "no events yet" in run("--trace-view", "/nowhere/")


def test_a_server_down_is_shown_and_fails_the_command_for_monitoring(memcached_url) -> None:
    from tests.servers import free_port

    down = f"127.0.0.1:{free_port()}"
    location = f"{memcached_url},{down}?connect_timeout=0.2"
    with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": location}}):
        out = io.StringIO()
        with pytest.raises(CommandError, match=f"server\\(s\\) down: {down}") as failed:
            call_command("mcache_stats", stdout=out)
        assert failed.value.returncode == 2
        row = next(line for line in out.getvalue().splitlines() if line.startswith(down))
        assert "DEAD" in row
    with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": memcached_url}}):
        assert "DEAD" not in run()  # every server up: no error, exit status 0


def test_mistakes_are_command_errors(cluster) -> None:
    with pytest.raises(CommandError, match="not an mcache cache"):
        run("--cache", "plain")
    with pytest.raises(CommandError, match="no cache 'nope'"):
        run("--cache", "nope")
    with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": "memory://"}}):
        with pytest.raises(CommandError, match="needs a memcached store"):
            run("--slabs")
        with pytest.raises(CommandError, match="tracing is off"):
            run("--trace", "page")
        with pytest.raises(CommandError, match="tracing is off"):
            run("--trace-view", "/")
        with pytest.raises(CommandError, match=r"--top needs a memcached store"):
            run("--top", "5")


@pytest.mark.parametrize("topology", ["sentinel", "cluster"])
def test_every_redis_node_is_listed_with_its_role(topology: str, request) -> None:
    url = request.getfixturevalue(f"{topology}_url")
    with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": url}}):
        caches["default"].set("page", "v", 60)
        text = run()
    rows = [line for line in text.splitlines() if line.startswith("127.0.0.1:")]
    roles = sorted(row.split()[1] for row in rows)
    expected = {"sentinel": ["primary", "replica"], "cluster": ["primary"] * 3 + ["replica"] * 3}
    assert roles == expected[topology], text


def test_a_per_process_store_says_so_and_lists_no_servers() -> None:
    with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": "memory://"}}):
        caches["default"].get_or_set("page", lambda: "v", 60)
        text, report = run(), json.loads(run("--json"))
    assert text.startswith("mcache: this process only") and "servers" not in text
    assert "every process" not in text
    assert (report["scope"], report["servers"]) == ("this process", {})


def test_redis_without_maxmemory_has_no_limit_and_png_errors_name_png(redis_url, tmp_path) -> None:
    with override_settings(CACHES={"default": {"BACKEND": BACKEND, "LOCATION": redis_url}}):
        caches["default"].set("page", "v", 60)
        row = next(line for line in run().splitlines() if line.startswith("127.0.0.1:"))
        assert "no limit" in row
        with pytest.raises(CommandError, match=r"^--png needs a memcached store"):
            run("--png", str(tmp_path / "x.png"))
        with pytest.raises(CommandError, match=r"^--slabs needs a memcached store"):
            run("--slabs")
