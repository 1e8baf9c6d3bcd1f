"""The near cache: hot entries kept in the process, coherent within a stated bound.

Another process is a real one (``python -c``), writing through its own cache to
the same server. Round trips are counted by the servers themselves (Redis's
``total_commands_processed``, memcached's ``cmd_get``), never by a stand-in.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from pymemcache.client.base import Client

from mcache import Cache
from mcache.errors import ConfigError

ELSEWHERE = 0.05  # seconds: how soon another process's write must be seen on Redis


def other_process(url: str, code: str) -> None:
    """Run ``code`` with ``cache`` (namespace "near", no near cache) in another process."""
    script = f"from mcache import Cache\ncache = Cache({url!r}, namespace='near')\n{code}"
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


def counting(values: list[int]) -> Callable[[], dict[str, Any]]:
    """Return a builder whose values count its builds: ``{"n": 1}``, ``{"n": 2}``, …"""

    def build() -> dict[str, Any]:
        values.append(1)
        return {"n": len(values), "rows": [1, 2, 3]}

    return build


def seen_within(read: Callable[[], Any], wanted: Any, limit: float) -> float:
    """Poll ``read`` until it returns ``wanted``; return how long it took (failing past
    ``limit``)."""
    started = time.monotonic()
    while read() != wanted:
        assert time.monotonic() - started < limit, f"not seen within {limit} s"
        time.sleep(0.001)
    return time.monotonic() - started


class Commands:
    """Counts the reads a Redis server processed (what a near hit must not send).

    Only reads: the server is shared with the session's other tests, whose
    housekeeping (a stats flush, a feed's reconnection) may land meanwhile.
    """

    READS = ("get", "mget", "getex", "exists", "eval", "evalsha", "fcall", "fcall_ro")

    def __init__(self, server: redis.Redis) -> None:
        self.server = server
        self.last = self._total()

    def _total(self) -> int:
        stats = self.server.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in self.READS)

    def since(self) -> int:
        """Return the reads processed since the last call."""
        total = self._total()
        counted, self.last = total - self.last, total
        return counted


def live(cache: Cache) -> None:
    """Wait until the cache's invalidation feed is subscribed (it starts with the cache)."""
    deadline = time.monotonic() + 5
    while not cache.parts.tags.invalidations.listening:
        assert time.monotonic() < deadline, "the invalidation feed never came up"
        time.sleep(0.005)


# -- everywhere --------------------------------------------------------------------------------


def test_near_settings_are_checked_at_start_up() -> None:
    with pytest.raises(ConfigError, match="near_ttl"):
        Cache("memory://", near_ttl=0)
    with pytest.raises(ConfigError, match="near_size"):
        Cache("memory://", near_ttl=1, near_size=0)
    assert Cache("memory://").parts.near is None  # off unless asked for


def test_a_near_hit_returns_a_copy_the_caller_may_change() -> None:
    cache = Cache("memory://", namespace="near", near_ttl=60)
    builds: list[int] = []
    first = cache.get_or_build("k", counting(builds), tags=["t"])
    held = cache.get_or_build("k", counting(builds), tags=["t"])
    held["rows"].append(4)
    assert cache.get_or_build("k", counting(builds), tags=["t"]) == first
    assert len(builds) == 1
    assert len(cache.parts.near.copies) == 1


def test_the_oldest_copy_goes_first_at_near_size() -> None:
    cache = Cache("memory://", namespace="near", near_ttl=60, near_size=2)
    for key in ("a", "b", "c"):
        cache.get_or_build(key, str)  # built and written: not kept
        cache.get_or_build(key, str)  # a hit read from the store: kept
    assert list(cache.parts.near.copies) == [cache.key("b"), cache.key("c")]


def test_own_writes_deletes_and_bumps_are_seen_at_once(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="near", near_ttl=60)
    builds: list[int] = []
    build = counting(builds)
    assert cache.get_or_build("k", build, tags=["t"])["n"] == 1
    assert cache.get_or_build("k", build, tags=["t"])["n"] == 1  # near
    cache.invalidate("t")
    assert cache.get_or_build("k", build, tags=["t"])["n"] == 2
    cache.delete("k")
    assert cache.get_or_build("k", build, tags=["t"])["n"] == 3
    cache.set("plain", "one")
    assert cache.get_or_build("plain", lambda: "built") == "one"
    cache.set("plain", "two")
    assert cache.get_or_build("plain", lambda: "built") == "two"
    cache.clear()
    assert cache.get_or_build("plain", lambda: "built") == "built"


def test_near_hits_make_no_round_trip_on_memcached(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="near", near_ttl=60)
    cache.get_or_build("k", lambda: "v", tags=["t", "u"])
    cache.get_or_build("k", lambda: "v", tags=["t", "u"])
    host, port = memcached_url.removeprefix("memcached://").split(",")[0].rsplit(":", 1)
    server = Client((host, int(port)))
    before = int(server.stats()[b"cmd_get"])
    for _ in range(200):
        assert cache.get_or_build("k", lambda: "other", tags=["t", "u"]) == "v"
    assert int(server.stats()[b"cmd_get"]) == before
    assert cache.stats()["cache"]["hits"] >= 201


def test_memcached_staleness_never_exceeds_near_ttl(memcached_url: str) -> None:
    near_ttl = 0.5
    cache = Cache(memcached_url, namespace="near", near_ttl=near_ttl)
    builds: list[int] = []
    assert cache.get_or_build("k", counting(builds), tags=["t"])["n"] == 1
    assert cache.get_or_build("k", counting(builds), tags=["t"])["n"] == 1
    other_process(memcached_url, "cache.invalidate('t')")
    took = seen_within(lambda: cache.get_or_build("k", counting(builds), tags=["t"])["n"], 2, 5)
    assert took <= near_ttl + 0.05
    other_process(memcached_url, "cache.set('plain', 'theirs')")
    took = seen_within(lambda: cache.get_or_build("plain", lambda: "built"), "theirs", 5)
    assert took <= near_ttl + 0.05


def test_an_async_caller_hits_the_same_near_copies(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="near", near_ttl=60)
    builds: list[int] = []

    async def build() -> dict[str, Any]:
        return counting(builds)()

    async def read() -> list[Any]:
        return [await cache.aget_or_build("k", build, tags=["t"]) for _ in range(3)]

    assert [v["n"] for v in asyncio.run(read())] == [1, 1, 1]
    assert cache.get_or_build("k", lambda: "sync", tags=["t"])["n"] == 1
    assert len(builds) == 1


def test_a_cluster_trusts_near_copies_for_near_ttl(cluster_url: str) -> None:
    cache = Cache(cluster_url, namespace="near", near_ttl=0.5)
    assert cache.parts.coherence.feed is None  # no push on a cluster: bounded instead
    cache.get_or_build("k", lambda: "old", tags=["t"])
    other_process(cluster_url, "cache.invalidate('t')")
    assert seen_within(lambda: cache.get_or_build("k", lambda: "new", tags=["t"]), "new", 5) <= 0.55


# -- Redis: pushed invalidations -----------------------------------------------------------


@pytest.fixture(params=["redis", "sentinel"])
def pushed_url(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def server(request: pytest.FixtureRequest, pushed_url: str) -> Iterator[redis.Redis]:
    """A client of the server the URL's writes go to (a sentinel group's primary)."""
    if pushed_url.startswith("redis+sentinel"):
        port = request.getfixturevalue("sentinel_group").primary_port()
        client = redis.Redis(host="127.0.0.1", port=port)
    else:
        client = redis.Redis.from_url(pushed_url)
    yield client
    client.close()


def test_redis_pushes_another_process_s_writes_within_milliseconds(
    pushed_url: str, server: redis.Redis
) -> None:
    cache = Cache(pushed_url, namespace="near", near_ttl=300, stats_interval=3600)
    live(cache)
    builds: list[int] = []
    read = lambda: cache.get_or_build("k", counting(builds), tags=["t"])["n"]  # noqa: E731
    assert read() == 1
    assert read() == 1
    # The first read's write comes back pushed to our own feed, and may land after the
    # second read kept its copy (dropping it: one more read). Let it land first.
    deadline = time.monotonic() + 5
    while True:
        time.sleep(0.1)
        if cache.parts.near.copies.get(cache.key("k")) is not None:
            break
        assert time.monotonic() < deadline, "the near copy was never kept"
        assert read() == 1
    commands = Commands(server)
    for _ in range(200):
        assert read() == 1
    assert commands.since() == 0
    other_process(pushed_url, "cache.invalidate('t')")
    assert seen_within(read, 2, ELSEWHERE) < ELSEWHERE
    assert read() == 2
    other_process(pushed_url, "cache.delete('k')")
    assert seen_within(read, 3, ELSEWHERE) < ELSEWHERE
    cache.get_or_build("plain", lambda: "built")
    other_process(pushed_url, "cache.set('plain', 'theirs')")
    theirs = lambda: cache.get_or_build("plain", lambda: "built")  # noqa: E731
    assert seen_within(theirs, "theirs", ELSEWHERE) < ELSEWHERE


def test_a_lost_tracking_connection_flushes_and_nothing_stale_is_read(
    pushed_url: str, server: redis.Redis
) -> None:
    cache = Cache(pushed_url, namespace="near", near_ttl=300)
    live(cache)
    feed = cache.parts.coherence.feed
    cache.get_or_build("k", lambda: "old", tags=["t"])
    deadline = time.monotonic() + 2
    while not cache.parts.near.copies:  # its own write's pushed invalidation may land late
        assert time.monotonic() < deadline, "no near copy was kept"
        cache.get_or_build("k", lambda: "old", tags=["t"])
        time.sleep(0.01)
    assert server.client_kill_filter(_id=feed.client_id) == 1
    deadline = time.monotonic() + 2
    while cache.parts.near.copies or cache.parts.tags.local_versions(["t"]) is not None:
        assert time.monotonic() < deadline, "the near cache was not flushed"
        time.sleep(0.001)
    other_process(pushed_url, "cache.invalidate('t')")  # while tracking may still be down
    assert cache.get_or_build("k", lambda: "new", tags=["t"]) == "new"
    live(cache)
    assert feed.client_id is not None
    assert cache.get_or_build("k", lambda: "newer", tags=["t"]) == "new"
    other_process(pushed_url, "cache.invalidate('t')")  # tracking is back: pushed again
    read = lambda: cache.get_or_build("k", lambda: "newest", tags=["t"])  # noqa: E731
    assert seen_within(read, "newest", ELSEWHERE) < ELSEWHERE


def test_a_flush_elsewhere_empties_the_near_cache(redis_url: str) -> None:
    cache = Cache(redis_url, namespace="near", near_ttl=300)
    live(cache)
    cache.get_or_build("k", lambda: "old")
    cache.get_or_build("k", lambda: "old")
    other_process(redis_url, "cache.clear()")
    assert seen_within(lambda: cache.get_or_build("k", lambda: "new"), "new", ELSEWHERE) < ELSEWHERE


def test_a_forked_child_keeps_nothing_from_its_parent(redis_url: str) -> None:
    import multiprocessing

    cache = Cache(redis_url, namespace="near", near_ttl=300)
    live(cache)
    cache.get_or_build("k", lambda: "old")
    cache.get_or_build("k", lambda: "old")

    def child(results: Any) -> None:
        results.put((len(cache.parts.near.copies), cache.parts.tags.invalidations.listening))

    results = multiprocessing.get_context("fork").Queue()
    process = multiprocessing.get_context("fork").Process(target=child, args=(results,))
    process.start()
    assert results.get(timeout=10) == (0, False)
    process.join(timeout=10)
