"""The plain operations of the Cache facade, on every store, and its fail-open policy."""

from __future__ import annotations

import logging

import pytest

from mcache import NO_VALUE, Cache, Codec
from mcache.errors import ConfigError, InvalidKey, NotNumeric
from mcache.stores import MemoryStore, from_url


@pytest.fixture(params=["memory", "memcached", "memcached_text", "redis"])
def cache(request: pytest.FixtureRequest) -> Cache:
    if request.param == "memory":
        return Cache("memory://", namespace="t")
    url = request.getfixturevalue(f"{request.param}_url")
    return Cache(url, namespace="t")


def test_round_trip_keeps_types(cache: Cache) -> None:
    values = {"none": None, "int": 7, "str": "7", "tuple": (1, "a"), "dict": {"k": [1.5]}}
    for name, value in values.items():
        assert cache.set(name, value) is True
    for name, value in values.items():
        got = cache.get(name)
        assert got == value and type(got) is type(value), name


def test_none_is_a_value_and_a_miss_is_no_value(cache: Cache) -> None:
    cache.set("n", None)
    assert cache.get("n") is None
    assert cache.get("missing") is NO_VALUE
    assert cache.get("missing", "fallback") == "fallback"


def test_keys_keep_types_apart(cache: Cache) -> None:
    cache.set(("user", 1), "int one")
    cache.set(("user", "1"), "str one")
    assert cache.get(("user", 1)) == "int one"
    assert cache.get(("user", "1")) == "str one"
    cache.set("a key with spaces and ünïcode", "ok")
    assert cache.get("a key with spaces and ünïcode") == "ok"


def test_many_add_delete_touch(cache: Cache) -> None:
    assert cache.set_many({"a": 1, ("b", 2): "two"}) == []
    assert cache.get_many(["a", ("b", 2), "c"]) == {"a": 1, ("b", 2): "two"}
    assert cache.add("a", 99) is False
    assert cache.add("c", 3) is True
    assert cache.touch("c", 60) is True
    assert cache.delete("c") is True
    assert cache.delete("c") is False
    cache.delete_many(["a", ("b", 2)])
    assert cache.get_many(["a", ("b", 2)]) == {}


def test_incr_on_cached_int(cache: Cache) -> None:
    assert cache.incr("hits") is None
    cache.set("hits", 10)
    assert cache.incr("hits", 5) == 15
    assert cache.incr("hits", -20) == 0
    assert cache.get("hits") == 0
    cache.set("word", "ten")
    with pytest.raises(NotNumeric):
        cache.incr("word")


def test_namespaces_are_isolated() -> None:
    store = MemoryStore()
    site_a, site_b = Cache(store, namespace="a"), Cache(store, namespace="b")
    site_a.set("k", "from a")
    assert site_b.get("k") is NO_VALUE
    assert site_a.get("k") == "from a"


def test_oversize_value_is_not_cached_and_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    cache = Cache(MemoryStore(max_value_size=1000), codec=Codec(compress_threshold=None))
    cache.set("big", "small")
    with caplog.at_level(logging.WARNING, logger="mcache"):
        assert cache.set("big", "x" * 5000) is False
    assert cache.get("big") is NO_VALUE
    assert "value not cached" in caplog.text


def test_values_set_many_could_not_cache_are_counted_in_words(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for big, said in ((1, "1 value not cached"), (2, "2 values not cached")):
        cache = Cache(MemoryStore(max_value_size=1000), codec=Codec(compress_threshold=None))
        items = {"small": "x", **{f"big{n}": "x" * 5000 for n in range(big)}}
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mcache"):
            assert len(cache.set_many(items)) == big
        assert said in caplog.text, caplog.text


def test_corrupt_bytes_are_a_miss() -> None:
    cache = Cache("memory://", namespace="t")
    cache.set("k", {"a": 1})
    cache.store.set(cache.key("k"), b"\xa7\x01garbage")
    assert cache.get("k", "default") == "default"


def test_dead_store_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    from tests.servers import free_port

    store = from_url(f"memcached://127.0.0.1:{free_port()}?connect_timeout=0.2")
    cache = Cache(store)
    with caplog.at_level(logging.WARNING, logger="mcache"):
        for _ in range(5):
            assert cache.get("k", "default") == "default"
            assert cache.set("k", 1) is False
            assert cache.add("k", 1) is False
            assert cache.incr("k") is None
            assert cache.get_many(["k"]) == {}
            assert cache.delete("k") is False
    messages = [r.getMessage() for r in caplog.records if r.name == "mcache"]
    cache_lines = [m for m in messages if m.startswith("cache ")]
    kinds = {m.split(" failed")[0] for m in cache_lines}
    assert len(cache_lines) == len(kinds) == 6, "one line per failure kind, not one per call"
    (dead,) = [m for m in messages if "marked dead for" in m]
    # One server in the pool: no next server takes its keys, and the line says so.
    assert "no server of the pool is up: reads miss and writes are dropped" in dead, dead
    assert "next server" not in dead


def test_a_dead_server_of_two_hands_its_keys_to_the_other(
    memcached_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.servers import free_port

    up = memcached_url.removeprefix("memcached://")
    cache = Cache(f"memcached://{up},127.0.0.1:{free_port()}?connect_timeout=0.2", namespace="two")
    with caplog.at_level(logging.WARNING, logger="mcache"):
        for index in range(40):  # some of these keys belong to the dead server
            cache.set(f"k{index}", index)
            assert cache.get(f"k{index}") == index
    (dead,) = [r.getMessage() for r in caplog.records if "marked dead for" in r.getMessage()]
    assert "its keys go to the next server up" in dead, dead


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"default_ttl": -1}, "default_ttl must be >= 0"),
        ({"default_ttl": "300"}, "default_ttl must be a number"),
        ({"namespace": "has space"}, "namespace"),
    ],
)
def test_bad_configuration_fails_at_start(kwargs: dict, message: str) -> None:
    with pytest.raises((ConfigError, InvalidKey), match=message):
        Cache("memory://", **kwargs)


def test_bad_store_object() -> None:
    with pytest.raises(ConfigError, match="store must be a URL"):
        Cache(object())  # type: ignore[arg-type]
