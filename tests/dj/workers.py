"""Code that runs in spawned processes for the Django adapter's concurrency tests."""

from __future__ import annotations

import os
import time
from typing import Any

from tests.core.workers import run_together

BUILDS = "test:dj:builds"


def configure(caches: dict[str, Any]) -> None:
    """Set Django up in a fresh process with the test settings and these CACHES."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.dj.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.CACHES = caches


def redis_caches(redis_url: str) -> dict[str, Any]:
    """Return CACHES with a django-redis cache under the alias ``redis``."""
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "redis": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_url},
    }


def django_store(redis_url: str) -> Any:
    """Return a DjangoCacheStore over django-redis, in a process of its own (a store factory)."""
    configure(redis_caches(redis_url))
    from django_mcache.django_store import DjangoCacheStore

    return DjangoCacheStore("redis")


def get_or_set_stampede(
    caches: dict[str, Any], counter_url: str, threads: int, ready: Any, go: Any, results: Any
) -> None:
    """Run ``threads`` concurrent ``cache.get_or_set`` calls; count builds in the store."""
    configure(caches)
    from django.core.cache import caches as django_caches

    from mcache.stores import from_url

    counter = from_url(counter_url)

    def build() -> str:
        time.sleep(0.3)
        if counter.incr(BUILDS, 1) is None:
            counter.add(BUILDS, b"0")
            counter.incr(BUILDS, 1)
        return f"built in {os.getpid()}"

    values: list[Any] = []

    def call() -> None:
        go.wait()
        values.append(django_caches["default"].get_or_set("hot", build, 60))

    run_together(call, threads, ready)
    results.put(values)
