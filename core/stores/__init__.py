"""Stores: where mcache keeps its bytes.

``MemoryStore`` needs nothing; ``MemcachedStore`` needs pymemcache and
``RedisStore`` redis-py, so those two are imported on first use and a project
that never names them does not need their drivers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .memory import MemoryStore
from .tiered import TieredStore
from .url import from_url

if TYPE_CHECKING:
    from .memcached import MemcachedStore
    from .redis import RedisStore

__all__ = ["MemcachedStore", "MemoryStore", "RedisStore", "TieredStore", "from_url"]


def __getattr__(name: str) -> Any:
    if name == "MemcachedStore":
        from .memcached import MemcachedStore

        return MemcachedStore
    if name == "RedisStore":
        from .redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
