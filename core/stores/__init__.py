"""Stores: where mcache keeps its bytes, and what a store of your own needs.

``MemoryStore`` needs nothing; the others need their drivers (pymemcache, redis-py,
psycopg), so they are imported on first use and a project that never names them does
not need their drivers. A store of your own implements ``Store`` (``mcache.Store``),
declares its ``StoreTraits`` and may use the small helpers every store here shares
(see docs/reference/stores.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mcache.contract.store import MAX_KEY_BYTES, NO_VALUE, CasToken, NoValueType, Store, StoreTraits
from mcache.contract.store_helpers import MiB, check_delta, check_size, too_large_message
from mcache.stores.memory.store import MemoryStore
from mcache.stores.tiered.store import TieredStore
from mcache.stores.url import from_url

if TYPE_CHECKING:
    from mcache.stores.memcached.store import MemcachedStore
    from mcache.stores.redis.cluster import ClusterRedisStore
    from mcache.stores.redis.sentinel import SentinelRedisStore
    from mcache.stores.redis.store import RedisStore
    from mcache.stores.sql.store import SqlStore

__all__ = [
    "MAX_KEY_BYTES",
    "NO_VALUE",
    "CasToken",
    "ClusterRedisStore",
    "MemcachedStore",
    "MemoryStore",
    "MiB",
    "NoValueType",
    "RedisStore",
    "SentinelRedisStore",
    "SqlStore",
    "Store",
    "StoreTraits",
    "TieredStore",
    "check_delta",
    "check_size",
    "from_url",
    "too_large_message",
]

_NEED_A_DRIVER = {
    "MemcachedStore": "mcache.stores.memcached.store",
    "RedisStore": "mcache.stores.redis.store",
    "SentinelRedisStore": "mcache.stores.redis.sentinel",
    "ClusterRedisStore": "mcache.stores.redis.cluster",
    "SqlStore": "mcache.stores.sql.store",
}


def __getattr__(name: str) -> Any:
    """Import a store whose driver may be absent only when it is named."""
    module = _NEED_A_DRIVER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
