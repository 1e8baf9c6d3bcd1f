"""Redis behind Sentinel on an event loop: redis.asyncio's Sentinel client, the same steps.

The twin of a :class:`~mcache.stores.redis.sentinel.SentinelRedisStore`: the same
sentinels and service, followed across failovers, with sentinel and server
clients per event loop (see :mod:`.loop_local`). redis.asyncio's Sentinel pools
refuse a connection over their limit rather than wait for one, so the twin
bounds the commands in flight per loop at ``max_connections`` (else 64).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import redis.asyncio.sentinel
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from mcache.stores.redis.async_store import AsyncRedisStore, LoopClient

if TYPE_CHECKING:
    from mcache.stores.redis.sentinel import SentinelRedisStore

__all__ = ["AsyncSentinelRedisStore"]


class AsyncSentinelRedisStore(AsyncRedisStore):
    """:class:`~mcache.contract.store.AsyncStore` on the primary (and replicas) the sentinels
    name."""

    store: SentinelRedisStore

    def _new_client(self) -> LoopClient:
        sentinel, primary, replica = self.store.clients(
            redis.asyncio.sentinel.Sentinel, Retry(NoBackoff(), 0)
        )
        return LoopClient(primary, replica, self.max_connections, tuple(sentinel.sentinels))
