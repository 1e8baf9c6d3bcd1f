"""No stale sets through the Django backend: delete/delete_many during a get_or_set win.

On a memcached LOCATION, a Redis one, and ``alias:`` over django-redis (where
mcache's cas is emulated by read-then-compare).
"""

from __future__ import annotations

import threading

import pytest
from django.core.cache import caches
from django.test import override_settings

BACKEND = "django_mcache.backend.MCacheBackend"


@pytest.fixture(params=["memcached", "redis", "alias"])
def cache(request: pytest.FixtureRequest):
    if request.param == "alias":
        url = request.getfixturevalue("redis_url")
        setting = {
            "default": {"BACKEND": BACKEND, "LOCATION": "alias:redis", "KEY_PREFIX": "ss"},
            "redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": url},
        }
    else:
        url = request.getfixturevalue(f"{request.param}_url")
        setting = {"default": {"BACKEND": BACKEND, "LOCATION": url, "KEY_PREFIX": "ss"}}
    with override_settings(CACHES=setting):
        yield caches["default"]


@pytest.mark.parametrize(("old", "new"), [("old", "new"), (10, 11)], ids=["str", "int"])
@pytest.mark.parametrize("delete", ["delete", "delete_many"])
def test_a_delete_during_get_or_set_leaves_nothing_stale(cache, delete: str, old, new) -> None:
    """An int too, which get_or_set stores plainly afterwards (so that incr counts it)."""
    row = {"title": old}
    started, release = threading.Event(), threading.Event()
    got = []

    def build() -> str:
        title = row["title"]  # the query
        started.set()
        assert release.wait(10)
        return title

    thread = threading.Thread(target=lambda: got.append(cache.get_or_set("post", build, 60)))
    thread.start()
    assert started.wait(10)
    row["title"] = new  # the writer updates the row, then clears the key
    if delete == "delete":
        cache.delete("post")
    else:
        cache.delete_many(["post"])
    release.set()
    thread.join(10)
    assert got == [old], "the caller still gets what it built"
    assert cache.get("post") is None
    assert cache.get_or_set("post", lambda: row["title"], 60) == new


def test_a_set_during_get_or_set_is_kept(cache) -> None:
    started, release = threading.Event(), threading.Event()

    def build() -> str:
        started.set()
        assert release.wait(10)
        return "built from old data"

    thread = threading.Thread(target=lambda: cache.get_or_set("post", build, 60))
    thread.start()
    assert started.wait(10)
    cache.set("post", "written by the writer", 60)
    release.set()
    thread.join(10)
    assert cache.get("post") == "written by the writer"


def test_a_number_from_get_or_set_still_counts(cache) -> None:
    assert cache.get_or_set("views", lambda: 41, 60) == 41
    assert cache.incr("views") == 42, "stored plainly once built: incr counts it"
