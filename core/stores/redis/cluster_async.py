"""Redis Cluster on an event loop: redis.asyncio's cluster client, the same steps.

The twin of a :class:`~mcache.stores.redis.cluster.ClusterRedisStore`: the same
nodes, tag copies placed by the sync store's map, one cluster client per event
loop (see :mod:`.loop_local`). The map is learnt once per loop, by the first
call while the others wait (redis.asyncio's client would start it in each at
once). Its pools refuse a connection over their limit rather than wait for one,
so the twin bounds the commands in flight per loop at ``max_connections`` (else 64).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
        options = {
            **self.store.client_options(ClusterNode, Retry(NoBackoff(), 0)),
            "max_connections": self.max_connections,
        }
        primary = RedisCluster(**options)
        reader = None
        if self.store.replica_reads:
            balancing = LoadBalancingStrategy.ROUND_ROBIN_REPLICAS
            reader = RedisCluster(**options, load_balancing_strategy=balancing)

        async def opening() -> None:
            await primary.initialize()
            if reader is not None:
                await reader.initialize()

        return LoopClient(primary, reader, self.max_connections, opening=opening)
