"""get_or_build on memcached's own leases (the meta protocol), against a real memcached 1.6.

The protocol-independent behaviour (stampedes, stale sets, renewal, tags,
counters) is tested on both protocols by the suites that take the
``memcached`` (meta, detected) and ``memcached_text`` URLs. Here: what only
the meta path does, the round trips it saves (counted by a proxy in front of
the server), and the fallback for a server that does not speak it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest

from mcache import NO_VALUE, Cache
from mcache.errors import ConfigError
from mcache.model.tags import version_ms
from mcache.stores.memcached.store import meta
from tests.core import workers
from tests.core.test_get_or_build import builds, run_stampede
from tests.memcached_proxy import MemcachedProxy, upstream_of


@pytest.fixture
def counting(memcached_url: str) -> Iterator[MemcachedProxy]:
    proxy = MemcachedProxy(upstream_of(memcached_url))
    yield proxy
    proxy.close()


@pytest.fixture
def text_only(memcached_url: str) -> Iterator[MemcachedProxy]:
    proxy = MemcachedProxy(upstream_of(memcached_url), meta=False)
    yield proxy
    proxy.close()


def round_trips(proxy: MemcachedProxy, call) -> int:  # type: ignore[no-untyped-def]
    before = proxy.counted()
    call()
    time.sleep(0.05)  # the proxy's thread counts as the bytes pass
    return proxy.counted() - before


# -- which protocol ----------------------------------------------------------------------------


def test_a_pool_of_memcached_1_6_speaks_meta_unless_told_otherwise(memcached_url: str) -> None:
    assert Cache(memcached_url).store.speaks_meta() is True  # type: ignore[attr-defined]
    assert Cache(memcached_url + "?protocol=text").store.speaks_meta() is False  # type: ignore[attr-defined]


def test_a_cache_says_what_elects_its_builder(
    memcached_url: str, redis_url: str, text_only: MemcachedProxy
) -> None:
    assert Cache(memcached_url).single_flight == "lease"
    assert Cache(memcached_url + "?protocol=text").single_flight == "lock"
    assert Cache(f"memcached://{text_only.address}").single_flight == "lock"  # fell back
    assert Cache(redis_url).single_flight == "lock"
    assert Cache("memory://").single_flight == "lock"


def test_an_unknown_protocol_fails_at_start_naming_the_setting(memcached_url: str) -> None:
    with pytest.raises(ConfigError, match="protocol must be one of auto, meta, text"):
        Cache(memcached_url + "?protocol=binary")


def test_a_server_without_meta_commands_makes_the_pool_fall_back(
    text_only: MemcachedProxy, caplog: pytest.LogCaptureFixture
) -> None:
    cache = Cache(f"memcached://{text_only.address}", namespace="fb")
    builds = []

    def build() -> str:
        builds.append(1)
        return "page"

    with caplog.at_level(logging.INFO, logger="mcache"):
        assert cache.get_or_build("k", build, ttl=60, tags=["t"]) == "page"
        assert cache.get_or_build("k", build, ttl=60, tags=["t"]) == "page"
    assert builds == [1]
    assert cache.store.speaks_meta() is False  # type: ignore[attr-defined]
    assert text_only.refused == 1, "asked once (mn), and never sent a meta command after"
    assert "does not speak the meta protocol" in caplog.text
    assert cache.counter("visits").incr() == 1 and cache.counter("visits").incr() == 1 + 1
    cache.invalidate("t")
    assert cache.get_or_build("k", lambda: "page 2", ttl=60, tags=["t"]) == "page 2"


def test_protocol_meta_on_a_server_without_it_warns_and_falls_back(
    text_only: MemcachedProxy, caplog: pytest.LogCaptureFixture
) -> None:
    cache = Cache(f"memcached://{text_only.address}?protocol=meta", namespace="fb")
    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert cache.get_or_build("k", lambda: "page", ttl=60) == "page"
    assert "using the text protocol" in caplog.text


# -- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_round_trips_per_path(counting: MemcachedProxy, protocol: str) -> None:
    cache = Cache(f"memcached://{counting.address}?protocol={protocol}", namespace=protocol)
    cache.get_or_build("warm", lambda: "x", ttl=60, tags=["t"])  # the probe, the tag's creation

    def cold() -> object:
        return cache.get_or_build("cold", lambda: "built", ttl=60, tags=["t"])

    def hit() -> object:
        return cache.get_or_build("cold", lambda: "unused", ttl=60, tags=["t"])

    trips = {"cold": round_trips(counting, cold), "hit": round_trips(counting, hit)}
    if protocol == "meta":
        assert trips == {"cold": 2, "hit": 1}, "the read with its lease, the guarded write"
    else:
        assert trips["hit"] == 1 and trips["cold"] >= 6, trips


def test_a_counter_is_created_and_counted_in_one_command(counting: MemcachedProxy) -> None:
    cache = Cache(f"memcached://{counting.address}", namespace="ct")
    assert cache.store.speaks_meta()  # type: ignore[attr-defined]
    counter = cache.counter("signups")
    assert round_trips(counting, counter.incr) == 1
    assert counter.value() == 1
    assert round_trips(counting, lambda: counter.incr(4)) == 1
    assert counter.value() == 5


# -- what the server's lease does --------------------------------------------------------------


def test_a_stale_entry_is_leased_to_one_reader_the_others_get_it_at_once(
    memcached_url: str,
) -> None:
    first, second = Cache(memcached_url, namespace="sl"), Cache(memcached_url, namespace="sl")
    first.get_or_build("k", lambda: "old", ttl=1, stale_ttl=60)
    time.sleep(2.1)  # past its fresh time, on memcached's whole-second clock too
    started, release = threading.Event(), threading.Event()
    builds = []

    def slow() -> str:
        builds.append(1)
        started.set()
        release.wait(5)
        return "new"

    rebuilder = threading.Thread(target=lambda: first.get_or_build("k", slow, ttl=60))
    rebuilder.start()
    assert started.wait(5)
    assert workers.build_lock_held(second, "k"), "the server leased it to the rebuilder"
    assert second.get_or_build("k", lambda: "mine", ttl=60) == "old"
    release.set()
    rebuilder.join()
    assert builds == [1]
    assert second.get_or_build("k", lambda: "mine", ttl=60) == "new"


def test_a_bumped_tag_marks_the_entry_stale_for_every_reader(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="tg")
    cache.get_or_build("k", lambda: "v1", ttl=60, tags=["posts"])
    cache.invalidate("posts")
    release = workers.hold_build_lock(cache, "k", 30)  # "another process" rebuilds it now
    assert cache.get_or_build("k", lambda: "mine", ttl=60, tags=["posts"]) == "v1"
    reply = workers._ask_owner(cache, cache.key("k"), meta.get(cache.key("k")))
    assert reply.stale and reply.other_won, "marked stale, its rebuild leased"
    assert release()
    time.sleep(0.3)  # this process trusts a rebuild it found under way for a quarter second
    assert cache.get_or_build("k", lambda: "v2", ttl=60, tags=["posts"]) == "v2"


def test_a_lease_on_an_entry_that_is_not_due_is_handed_back(memcached_url: str) -> None:
    writer = Cache(memcached_url, namespace="hb")
    writer.get_or_build("k", lambda: "kept", ttl=100, stale_ttl=1)
    # A reader whose stale window (300 s) is wider than the entry's whole life is
    # leased it by the server at once; the entry is fresh for 99 s more.
    assert writer.get_or_build("k", lambda: "rebuilt", ttl=100, stale_ttl=300) == "kept"
    assert not workers.build_lock_held(writer, "k"), "handed back: nobody holds it"


def test_an_invalidation_during_a_build_keeps_its_value_out(memcached_url: str) -> None:
    cache = Cache(memcached_url, namespace="ss")

    def build() -> str:
        cache.delete("k")  # a writer deletes the key while the build runs
        return "built before the delete"

    assert cache.get_or_build("k", build, ttl=60) == "built before the delete"
    assert cache.get("k") is NO_VALUE, "the lease's write found the key gone and stored nothing"


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_a_bump_of_new_tags_creates_them_in_the_same_batch(
    counting: MemcachedProxy, protocol: str
) -> None:
    cache = Cache(f"memcached://{counting.address}?protocol={protocol}", namespace=protocol)
    cache.get_or_build("warm", lambda: "x", ttl=60)
    versions: dict[str, int] = {}
    trips = round_trips(counting, lambda: versions.update(cache.invalidate("a", "b", "c")))
    # The read of every copy, then one batch: ma … N J creates the missing versions
    # where the text protocol adds them one at a time.
    assert trips == (2 if protocol == "meta" else 2 + 2)
    # made at one millisecond, each with low bits of its own (mcache.model.tags.VERSION_BITS)
    assert len({version_ms(version) for version in versions.values()}) == 1
    again = cache.invalidate("a")
    assert again["a"] > versions["a"], "a bump only moves a version forward"


@pytest.mark.parametrize("server", ["memcached", "memcached_text"])
def test_a_tag_stale_stampede_builds_once(request: pytest.FixtureRequest, server: str) -> None:
    url = request.getfixturevalue(f"{server}_url")
    cache = Cache(url, namespace="st")
    cache.get_or_build("hot", lambda: "old", ttl=60, tags=["t"])
    cache.invalidate("t")  # fresh by its times, stale by its tag: the server cannot tell
    outcomes = run_stampede(url, "hot", {"ttl": 60, "tags": ["t"]})
    values = [value for value, _ in outcomes]
    assert builds(cache) == 1
    assert values.count("old") == len(values) - 1, "everyone but the rebuilder got stale"
    assert cache.get_or_build("hot", lambda: "unused", ttl=60, tags=["t"]).startswith("built by")


def test_while_a_server_is_down_builds_take_the_portable_lock(trio) -> None:  # type: ignore[no-untyped-def]
    url = "memcached://" + ",".join(n.address for n in trio) + "?dead_timeout=30&timeout=0.3"
    cache = Cache(url, namespace="dn")
    assert cache.store.speaks_meta()  # type: ignore[attr-defined]
    cache.get_or_build("page", lambda: "v1", ttl=60, tags=["posts"])
    owner = cache.store.ring.server_for(cache.key("page"))  # type: ignore[attr-defined]
    other = next(n for n in trio if n.port != owner.port)
    other.kill()
    cache.store.get_many([f"probe:{i}" for i in range(100)])  # finds it down
    assert cache.store.dead_servers()  # type: ignore[attr-defined]
    cache.invalidate("posts")
    assert cache.get_or_build("page", lambda: "v2", ttl=60, tags=["posts"]) == "v2"
    assert cache.get_or_build("page", lambda: "v3", ttl=60, tags=["posts"]) == "v2"
    assert cache.get_or_build("new", lambda: "built", ttl=60) == "built"
