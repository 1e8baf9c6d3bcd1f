"""Builders the queue workers import by path, and the named cache they rebuild into.

The web processes and the workers both import this module; the cache's store
and refresher come from the environment the tests start them with.
"""

from __future__ import annotations

import os
import time

from mcache import Cache

cache = Cache(
    os.environ.get("MCACHE_QUEUE_URL", "memory://"),
    namespace=os.environ.get("MCACHE_QUEUE_NAMESPACE", "queues"),
    name="queues",
    refresher=os.environ.get("MCACHE_QUEUE_REFRESHER", "thread"),
    refresh_queue=os.environ.get("MCACHE_QUEUE_NAME") or None,
    refresh="background",
    lock_timeout=2,
)


@cache.cached(ttl=60, stale_ttl=600)
def report(number: int) -> str:
    """A slow report that counts its builds in the store and says which process built it.

    ``attempts:<n>`` counts the builds begun (a failing or killed one too),
    ``builds:<n>`` those that finished.
    """
    count(f"attempts:{number}")
    time.sleep(float(os.environ.get("MCACHE_QUEUE_BUILD_SECONDS", "0.2")))
    if os.environ.get("MCACHE_QUEUE_FAIL"):
        raise RuntimeError("the report's database is down")
    count(f"builds:{number}")
    return f"report {number} by {os.getpid()}"


@cache.cached(ttl=600, tags=["pages"])
def page(number: int) -> str:
    """A tagged page, as a site caches one: made stale by ``invalidate("pages")``.

    ``page-attempts:<n>`` counts the builds begun, ``page-builds:<n>`` those
    that finished.
    """
    count(f"page-attempts:{number}")
    time.sleep(float(os.environ.get("MCACHE_QUEUE_BUILD_SECONDS", "0.2")))
    count(f"page-builds:{number}")
    return f"page {number} by {os.getpid()}"


def count(key: str) -> None:
    """Add one to the plain counter ``key`` in the store (created at 0)."""
    if cache.store.incr(key, 1) is None:
        cache.store.add(key, b"0", 0)
        cache.store.incr(key, 1)
