"""Stores: where mcache keeps its bytes, and what a store of your own needs.

Each store is imported the first time it is named (``MemoryStore`` needs nothing; the
others need their drivers: pymemcache, redis-py, psycopg), so a project that never
names one does not need its driver, and no import of this package waits on another
thread's (see :func:`mcache.lazy_exports`). A store of your own implements ``Store``
(``mcache.Store``), declares its ``StoreTraits`` and may use the small helpers every
store here shares (see docs/reference/stores.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache import lazy_exports
from mcache.contract.store import MAX_KEY_BYTES, NO_VALUE, CasToken, NoValueType, Store, StoreTraits
from mcache.contract.store_helpers import MiB, check_delta, check_size, too_large_message

if TYPE_CHECKING:
    from mcache.stores.memcached.store import MemcachedStore
    from mcache.stores.memory.store import MemoryStore
    from mcache.stores.redis.cluster import ClusterRedisStore
    from mcache.stores.redis.sentinel import SentinelRedisStore
    from mcache.stores.redis.store import RedisStore
    from mcache.stores.sql.store import SqlStore
    from mcache.stores.tiered.store import TieredStore
    from mcache.stores.url import from_url

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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "MemcachedStore": "mcache.stores.memcached.store",
        "MemoryStore": "mcache.stores.memory.store",
        "ClusterRedisStore": "mcache.stores.redis.cluster",
        "SentinelRedisStore": "mcache.stores.redis.sentinel",
        "RedisStore": "mcache.stores.redis.store",
        "SqlStore": "mcache.stores.sql.store",
        "TieredStore": "mcache.stores.tiered.store",
        "from_url": "mcache.stores.url",
    },
)
