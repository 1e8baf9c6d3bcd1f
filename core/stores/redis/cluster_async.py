"""Redis Cluster on an event loop: redis.asyncio's cluster client, the same steps.

The twin of a :class:`~mcache.stores.redis.cluster.ClusterRedisStore` learns
the slot map from the same nodes, follows ``MOVED`` the same way and sends a
read of several slots as one cluster pipeline (one request per node, in one
round). Tag copies are placed by the sync store's map, which both drivers
share (:class:`~mcache.contract.store.Colocating`); a hit is still one request to one
node. Each event loop has its own cluster client (see :mod:`.loop_local`).

The map is learnt once per loop, by the first call, while the loop's other
calls wait for it (redis.asyncio's client would start it in each of them at
once). While no node answers, each call tries to learn it again (the sync
store tries at most once a second) and fails at once as a miss.

redis.asyncio's cluster pools refuse a connection over their limit rather
than wait for one, so the twin bounds the commands in flight per loop at
``max_connections`` (else 64) itself.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.cluster import LoadBalancingStrategy

from mcache.stores.redis.async_store import AsyncRedisStore, LoopClient

if TYPE_CHECKING:
    from mcache.stores.redis.cluster import ClusterRedisStore

__all__ = ["AsyncClusterRedisStore"]


class AsyncClusterRedisStore(AsyncRedisStore):
    """:class:`~mcache.contract.store.AsyncStore` on a Redis Cluster."""

    store: ClusterRedisStore

    def _new_client(self) -> LoopClient:
        store, address = self.store, self.store.address
        options: dict[str, Any] = {
            **store.timeouts,
            "startup_nodes": [ClusterNode(host, port) for host, port in address.hosts],
            "username": address.username,
            "password": address.password,
            "retry": Retry(NoBackoff(), 0),
            "require_full_coverage": False,
            "max_connections": self.max_connections,
        }
        primary = RedisCluster(**options)
        reader = None
        if store.replica_reads:
            balancing = LoadBalancingStrategy.ROUND_ROBIN_REPLICAS
            reader = RedisCluster(**options, load_balancing_strategy=balancing)

        async def opening() -> None:
            await primary.initialize()
            if reader is not None:
                await reader.initialize()

        return LoopClient(primary, reader, self.max_connections, opening=opening)

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Every node with its role (an operator's call: made in a thread)."""
        return await asyncio.to_thread(self.store.stats)
