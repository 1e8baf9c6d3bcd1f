"""Redis behind Sentinel on an event loop: redis.asyncio's Sentinel client, the same steps.

The twin of a :class:`~mcache.stores.redis.sentinel.SentinelRedisStore` asks
the sentinels for the service's primary as the sync store does (each new
connection goes to the primary they name now, so a failover is followed), and
with ``replica_reads`` sends plain reads to the replicas in turn. Each event
loop has its own sentinel and server clients (see :mod:`.loop_local`).

redis.asyncio's Sentinel pools refuse a connection over their limit rather
than wait for one, so the twin bounds the commands in flight per loop at
``max_connections`` (else 64) itself: a burst waits, and the number of
connections stays bounded.
"""

from __future__ import annotations

import asyncio
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
        store, address = self.store, self.store.address
        connection = {**store.timeouts, "retry": Retry(NoBackoff(), 0)}
        sentinel = redis.asyncio.sentinel.Sentinel(
            list(address.sentinels),
            sentinel_kwargs={**connection, "password": store.sentinel_password},
            **connection,
        )
        servers = {"db": address.db, "username": address.username, "password": address.password}
        primary = sentinel.master_for(address.service, **servers)
        replica = sentinel.slave_for(address.service, **servers) if store.replica_reads else None
        return LoopClient(primary, replica, self.max_connections, tuple(sentinel.sentinels))

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Every server of the service with its role (an operator's call: made in a thread)."""
        return await asyncio.to_thread(self.store.stats)
