"""Stores: where mcache keeps its bytes.

``MemoryStore`` needs nothing; ``MemcachedStore`` needs pymemcache and
``RedisStore`` redis-py, so those two are imported on first use and a project
that never names them does not need their drivers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcache.stores.memory.store import MemoryStore
from mcache.stores.tiered.store import TieredStore
from mcache.stores.url import from_url

if TYPE_CHECKING:
    from mcache.stores.memcached.store import MemcachedStore
    from mcache.stores.redis.store import RedisStore

__all__ = ["MemcachedStore", "MemoryStore", "RedisStore", "TieredStore", "from_url"]


def __getattr__(name: str) -> Any:
    if name == "MemcachedStore":
        from mcache.stores.memcached.store import MemcachedStore

        return MemcachedStore
    if name == "RedisStore":
        from mcache.stores.redis.store import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
