"""A cached function on a Django cache, for the Django Tasks workers to rebuild."""

from __future__ import annotations

import os
import time

from django.core.cache import caches

cache = caches["default"].mcache


@cache.cached(ttl=60, stale_ttl=600)
def report(number: int) -> str:
    """A slow report that counts its builds in the store and says which process built it."""
    time.sleep(float(os.environ.get("MCACHE_QUEUE_BUILD_SECONDS", "0.2")))
    counted = cache.store.incr(f"builds:{number}", 1)
    if counted is None:
        cache.store.add(f"builds:{number}", b"0", 0)
        cache.store.incr(f"builds:{number}", 1)
    return f"report {number} by {os.getpid()}"
