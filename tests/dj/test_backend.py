"""MCacheBackend in settings.CACHES: Django's semantics, dog-pile safety, extras, checks."""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import caches
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_mcache.django_store import DjangoCacheStore
from mcache import Entry
from mcache.errors import NotNumeric
from mcache.stores import from_url
from mcache.testing.store_contract import StoreContract, run_together
from tests.dj import workers

BACKEND = "django_mcache.backend.MCacheBackend"


def mcache_caches(location: str, **params: Any) -> dict[str, Any]:
    return {"default": {"BACKEND": BACKEND, "LOCATION": location, **params}}


@pytest.fixture(params=["memory", "memcached", "redis"])
def location(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def cache(location: str):
    with override_settings(CACHES=mcache_caches(location, KEY_PREFIX="t")):
        backend = caches["default"]
        backend.clear()
        yield backend


# -- Django's semantics ----------------------------------------------------------------------


def test_timeouts_follow_django(cache) -> None:
    cache.set("forever", "v", None)
    cache.set("gone", "v", 0)
    cache.set("gone too", "v", -5)
    assert cache.get("forever") == "v"
    assert cache.get("gone") is None and cache.get("gone too") is None
    assert cache.add("added expired", "v", 0) is True
    assert cache.get("added expired") is None
    cache.set("touched", "v", 60)
    assert cache.touch("touched", 0) is True
    assert cache.get("touched") is None
    assert cache.touch("absent", 10) is False


def test_return_values_and_errors(cache) -> None:
    assert cache.add("k", 1) is True and cache.add("k", 2) is False
    assert cache.delete("k") is True and cache.delete("k") is False
    with pytest.raises(ValueError, match="not found"):
        cache.incr("absent")
    cache.set("n", 10)
    assert cache.incr("n", 5) == 15 and cache.decr("n", 3) == 12
    cache.set("text", "ten")
    with pytest.raises(NotNumeric):
        cache.incr("text")
    assert cache.set_many({"a": 1, "b": os.urandom(2 * 1024 * 1024)}) == ["b"]  # incompressible
    assert cache.get_many(["a", "b", "c"]) == {"a": 1}
    cache.set(None, "none is a key too")  # Django keys go through str(): any key is safe here
    assert cache.get(None) == "none is a key too"


def test_any_key_is_safe_and_silent(cache) -> None:
    key = "spaces, ünïcode and more than 250 bytes " + "x" * 300
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Django's backends warn here; mcache hashes the key
        cache.set(key, "v")
        assert cache.get(key) == "v"


def test_prefix_and_version_keep_entries_apart(location: str) -> None:
    caches_setting = {
        "default": {"BACKEND": BACKEND, "LOCATION": location, "KEY_PREFIX": "a"},
        "other": {"BACKEND": BACKEND, "LOCATION": location, "KEY_PREFIX": "b"},
        "v2": {"BACKEND": BACKEND, "LOCATION": location, "KEY_PREFIX": "a", "VERSION": 2},
    }
    with override_settings(CACHES=caches_setting):
        caches["default"].clear()
        caches["default"].set("k", "a1")
        assert caches["other"].get("k") is None
        assert caches["v2"].get("k") is None
        assert caches["v2"].get("k", version=1) == "a1"
        caches["default"].invalidate("posts")  # tags live in the KEY_PREFIX's namespace
        assert caches["default"].mcache.namespace == "a"
        assert caches["other"].mcache.namespace == "b"


def test_threads_share_one_core_cache() -> None:
    import threading

    seen = []
    thread = threading.Thread(target=lambda: seen.append(caches["default"].mcache))
    thread.start()
    thread.join()
    assert caches["default"] is not None
    assert seen == [caches["default"].mcache], "Django's per-thread backends share one mcache"


# -- get_or_set is dog-pile safe -----------------------------------------------------------------


def test_get_or_set_keeps_what_set_stored(cache) -> None:
    cache.set("k", "stored")
    assert cache.get_or_set("k", lambda: "built") == "stored"
    assert cache.get_or_set("new", lambda: "built", 60) == "built"
    assert cache.get("new") == "built"
    assert cache.get_or_set("never", lambda: "computed", 0) == "computed"
    assert cache.get("never") is None


def test_get_or_set_serves_stale_while_one_caller_rebuilds(cache) -> None:
    key = cache.make_key("page")
    store_key = cache.mcache.key(key)
    old = Entry("old page", cache.mcache.clock.time_ms() - 1000, 10, {})
    cache.mcache.store.set(store_key, cache.mcache.codec.dumps(old.to_wire(), store_key), 60)
    assert cache.get("page") is None, "expired for a plain get"
    built = []
    assert cache.get_or_set("page", lambda: built.append(1) or "new page", 60) == "new page"
    assert cache.get_or_set("page", lambda: built.append(1) or "newer", 60) == "new page"
    assert built == [1]


def test_get_or_set_stampede_builds_once(memcached_url: str) -> None:
    """4 processes × 8 threads ask for one absent key through Django's cache API."""
    caches_setting = mcache_caches(memcached_url, OPTIONS={"wait": 5})
    from_url(memcached_url).flush()
    context = multiprocessing.get_context("spawn")
    ready, go, results = context.Queue(), context.Event(), context.Queue()
    args = (caches_setting, memcached_url, 8, ready, go, results)
    processes = [context.Process(target=workers.get_or_set_stampede, args=args) for _ in range(4)]
    values = run_together(processes, ready, go, results)
    assert len(values) == 32 and len(set(values)) == 1
    assert from_url(memcached_url).get(workers.BUILDS) == b"1"


def test_async_methods(cache) -> None:
    async def build() -> str:
        return "awaited"

    async def calls() -> list[Any]:
        await cache.aset("k", "v")
        return [
            await cache.aget("k"),
            await cache.aget_or_set("k2", lambda: "built"),
            await cache.aget_or_build("k3", build, tags=["t"]),
        ]

    assert asyncio.run(calls()) == ["v", "built", "awaited"]


# -- extras ------------------------------------------------------------------------------------


def test_extras_reach_the_core(cache) -> None:
    assert cache.get_or_build("page", lambda: "v1", tags=["posts"]) == "v1"
    cache.invalidate("posts")
    assert cache.get_or_build("page", lambda: "v2", tags=["posts"]) == "v2"
    with cache.lock("job", timeout=5):
        assert cache.lock("job").try_acquire() is False
    assert cache.counter("signups").incr() == 1
    assert cache.online_counter("site", window=60, slots=6, unique="markers").hit("u1") >= 1
    stats = cache.stats()
    assert stats["cache"]["hits"] >= 0 and "servers" in stats


# -- configuration -----------------------------------------------------------------------------


def test_unknown_option_is_a_check_error_naming_it() -> None:
    with override_settings(CACHES=mcache_caches("memory://", OPTIONS={"stale_tll": 60})):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
    assert len(errors) == 1
    assert "'stale_tll'" in errors[0].msg and "stale_ttl" in errors[0].msg
    assert errors[0].obj == "default"


def test_the_check_error_points_to_pages_that_list_every_option() -> None:
    """The hint names docs pages that exist and list every OPTIONS name the backend takes."""
    from django_mcache.config import CACHE_OPTIONS, CODEC_OPTIONS

    with override_settings(CACHES=mcache_caches("memory://", OPTIONS={"stale_tll": 60})):
        (error,) = [e for e in run_checks() if e.id == "django_mcache.E001"]
    pages = re.findall(r"docs/[\w/-]+\.md", error.hint)
    assert pages == ["docs/reference/settings.md", "docs/reference/stores.md"], error.hint
    root = Path(__file__).resolve().parents[2]
    settings_page = (root / pages[0]).read_text(encoding="utf-8")
    missing = [name for name in CACHE_OPTIONS | CODEC_OPTIONS if f"`{name}`" not in settings_page]
    assert missing == [], f"{pages[0]} does not list {missing}"
    assert "memcached://" in (root / pages[1]).read_text(encoding="utf-8")


def test_invalid_value_is_a_check_error_and_fails_at_first_use() -> None:
    with override_settings(CACHES=mcache_caches("memory://", OPTIONS={"refresh": "later"})):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
        assert "refresh must be 'sync' or 'background'" in errors[0].msg
        with pytest.raises(ImproperlyConfigured, match="refresh"):
            caches["default"].get("k")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"namespace": "a b"}, "namespace"),
        ({"stats_interval": "x"}, "stats_interval"),
        ({"stats_interval": 0}, "stats_interval"),
        ({"trace_dir": 5}, "trace_dir"),
        ({"max_bytes": "8q"}, "max_bytes"),
        ({"max_bytes": True}, "max_bytes"),
        ({"serializer": "yaml"}, "yaml"),
        ({"lock_timeout": -1}, "lock_timeout"),
    ],
)
def test_every_bad_option_value_is_a_check_error_naming_it(options: dict, named: str) -> None:
    with override_settings(CACHES=mcache_caches("memory://", OPTIONS=options)):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
        assert len(errors) == 1 and named in errors[0].msg, errors
        with pytest.raises(ImproperlyConfigured, match=named):
            caches["default"].get("k")


def test_bad_location_is_a_check_error() -> None:
    with override_settings(CACHES=mcache_caches("memcache://h:11211")):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
    assert "memcached://" in errors[0].msg


def test_store_options_pass_through(memcached_cluster_url: str) -> None:
    options = {"replicas": 2, "stale_ttl": 600, "serializer": "json", "MAX_ENTRIES": 10}
    with override_settings(CACHES=mcache_caches(memcached_cluster_url, OPTIONS=options)):
        assert [e for e in run_checks() if e.id == "django_mcache.E001"] == []
        backend = caches["default"]
        assert backend.mcache.store.replicas == 2
        assert backend.mcache.defaults.stale_ttl == 600
        backend.set("k", {"json": True})
        assert backend.get("k") == {"json": True}


# -- LOCATION "alias:<name>": mcache over another Django cache ------------------------------------


@pytest.fixture
def redis_alias(redis_url: str):
    caches_setting = {
        "default": {"BACKEND": BACKEND, "LOCATION": "alias:redis"},
        "redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_url},
    }
    with override_settings(CACHES=caches_setting):
        yield caches["default"]


def test_alias_runs_mcache_over_django_redis(redis_alias) -> None:
    built = []
    build = lambda: built.append(1) or "page"  # noqa: E731
    assert redis_alias.get_or_build("home", build, tags=["posts"]) == "page"
    assert redis_alias.get_or_build("home", build, tags=["posts"]) == "page"
    redis_alias.invalidate("posts")
    assert redis_alias.get_or_build("home", build, tags=["posts"]) == "page"
    assert built == [1, 1]
    redis_alias.set("n", 1)
    assert redis_alias.incr("n", 2) == 3
    with redis_alias.lock("job", timeout=5):
        assert redis_alias.lock("job").try_acquire() is False


def test_alias_to_a_missing_cache_is_a_check_error() -> None:
    with override_settings(CACHES=mcache_caches("alias:nowhere")):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
    assert "names no cache" in errors[0].msg


class TestDjangoCacheStore(StoreContract):
    """The store contract over django-redis: what Django's API does atomically holds."""

    @pytest.fixture
    def store(self, redis_url: str):
        with override_settings(CACHES=workers.redis_caches(redis_url)):
            yield DjangoCacheStore("redis")

    @pytest.fixture
    def store_factory(self, redis_url: str):
        return functools.partial(workers.django_store, redis_url)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)


def test_a_forked_worker_gets_its_own_connections(memcached_url: str) -> None:
    """gunicorn --preload forks after the parent used the cache: no socket may be shared."""
    with override_settings(CACHES=mcache_caches(memcached_url)):
        backend = caches["default"]
        backend.set("before fork", "parent")
        parent_core = backend.mcache
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report and leave without running pytest's teardown
            try:
                ok = backend.mcache is not parent_core and backend.get("before fork") == "parent"
                for i in range(200):
                    backend.set(f"child {i}", i)
                    ok = ok and backend.get(f"child {i}") == i
                os.write(writer, b"ok" if ok else b"bad")
            finally:
                os._exit(0)
        os.close(writer)
        for i in range(200):
            backend.set(f"parent {i}", i)
            assert backend.get(f"parent {i}") == i
        os.waitpid(pid, 0)
        assert os.read(reader, 16) == b"ok"
        assert backend.mcache is parent_core


# -- after review: Django's semantics where get_or_set's entries differ from plain values ----------


def test_get_or_set_numbers_count_with_incr(cache) -> None:
    assert cache.get_or_set("hits", 0, 60) == 0
    assert cache.incr("hits") == 1 and cache.incr("hits", 5) == 6
    assert cache.get_or_set("hits", 0, 60) == 6


def test_an_expired_get_or_set_value_is_gone_for_add_and_touch(cache) -> None:
    cache.get_or_set("page", "old", 60)
    key = cache.mcache.key(cache.make_key("page"))
    old = Entry("old", cache.mcache.clock.time_ms() - 1000, 10, {})  # past its timeout, kept stale
    cache.mcache.store.set(key, cache.mcache.codec.dumps(old.to_wire(), key), 60)
    assert cache.touch("page", 30) is False
    assert cache.add("page", "new", 60) is True
    assert cache.get("page") == "new"
    assert cache.add("page", "newer", 60) is False


def test_get_or_set_with_timeout_zero_returns_what_is_there(cache) -> None:
    cache.set("k", "cached")
    assert cache.get_or_set("k", lambda: "computed", 0) == "cached"
    assert cache.get_or_set("absent", lambda: "computed", 0) == "computed"
    assert cache.get("absent") is None


def test_plain_reads_count_in_the_stats(cache) -> None:
    cache.set("a", 1)
    cache.mcache.counts.flush()  # and no flush for stats_interval: local() counts all that follows
    before = cache.mcache.counts.local()
    cache.get("a")
    cache.get("missing")
    cache.get_many(["a", "b", "c"])
    after = cache.mcache.counts.local()
    assert after["hits"] - before["hits"] == 2
    assert after["misses"] - before["misses"] == 3


def test_options_that_are_not_a_dict_are_a_check_error() -> None:
    with override_settings(CACHES=mcache_caches("memory://", OPTIONS=["stale_ttl", 60])):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
    assert "OPTIONS must be a dict" in errors[0].msg


def test_jitter_spreads_both_ways_when_given_a_pair() -> None:
    with override_settings(CACHES=mcache_caches("memory://", OPTIONS={"jitter": [0.2, 0.2]})):
        assert [e for e in run_checks() if e.id == "django_mcache.E001"] == []
        assert caches["default"].mcache.defaults.jitter == (0.2, 0.2)
