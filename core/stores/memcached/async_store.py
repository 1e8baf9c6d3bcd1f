"""The memcached store on an event loop: the same steps, awaited on asyncio connections.

:class:`AsyncMemcachedStore`, a :class:`~mcache.stores.memcached.store.MemcachedStore`'s
async twin, performs the blocking store's own steps (:mod:`mcache.stores.memcached.steps`:
one ring, replicas, failover and server health, shared) on asyncio connections
(:mod:`mcache.stores.memcached.aio_connection`), a pool per server and loop
(:class:`~.loop_local.LoopLocal`). One thing still blocks the loop: probing a server marked
dead, once per ``dead_timeout``, with a blocking client (``connect_timeout`` and a ``stats``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcache.contract.loop_local import LoopLocal
from mcache.contract.stepped_twin import SteppedTwin
from mcache.contract.store import LeaseBid
from mcache.sansio.steps import arun_steps
from mcache.stores.memcached.aio_connection import AioPool
from mcache.stores.memcached.node import Node
from mcache.stores.memcached.stats import stats_report
from mcache.stores.memcached.steps import FetchOwners, NodeCall

if TYPE_CHECKING:
    from mcache.stores.memcached.store import MemcachedStore

__all__ = ["AsyncMemcachedStore"]


class _LoopPools(dict[Node, AioPool]):
    """One event loop's connection pools, one per server, made on first use."""

    def __missing__(self, node: Node) -> AioPool:
        pool = self[node] = AioPool(node.server, node.options)
        return pool

    async def close(self) -> None:
        for pool in self.values():
            pool.close()


class AsyncMemcachedStore(SteppedTwin):
    """:class:`~mcache.contract.store.AsyncStore` on the servers of a :class:`MemcachedStore`."""

    def __init__(self, store: MemcachedStore) -> None:
        super().__init__(store)
        self._pools: LoopLocal[_LoopPools] = LoopLocal(_LoopPools, _LoopPools.close)

    async def _perform(self, operation: NodeCall | FetchOwners) -> Any:
        """Perform one command of the steps on the running loop's connections."""
        pools = await self._pools.get()
        if type(operation) is NodeCall:
            return await _on_node(pools, operation)
        groups = operation.groups  # type: ignore[union-attr]
        calls = [NodeCall(node, "get_many", (group,)) for node, group in groups.items()]
        replies = await asyncio.gather(*(_on_node(pools, c) for c in calls), return_exceptions=True)
        found: dict[str, bytes] = {}
        retry: list[str] = []
        for group, reply in zip(groups.values(), replies, strict=True):
            if isinstance(reply, BaseException):
                if not isinstance(reply, Exception):
                    raise reply
                retry += group
            else:
                found.update(reply)
        return found, retry

    # -- the AsyncStore contract: the blocking store's steps, awaited -------------------------

    async def get_many_leasing(self, keys: list[str], bid: LeaseBid) -> dict[str, bytes]:
        return await arun_steps(self.store.get_many_leasing_steps(keys, bid), self._perform)

    async def claim_stale(self, key: str, token: int, bid: LeaseBid) -> None:
        await arun_steps(self.store.claim_stale_steps(key, token, bid), self._perform)

    async def release_lease(self, key: str, token: int, ttl: int | None = None) -> bool:
        return await arun_steps(self.store.release_lease_steps(key, token, ttl), self._perform)

    async def keep_lease(self, key: str, token: int, ttl: int) -> bool:
        return await arun_steps(self.store.keep_lease_steps(key, token, ttl), self._perform)

    async def leased_write(self, key: str, value: bytes, token: int, ttl: int) -> bool:
        return await arun_steps(
            self.store.leased_write_steps(key, value, token, ttl), self._perform
        )

    async def incr_many_creating(
        self, deltas: Mapping[str, int], initial: Mapping[str, int]
    ) -> dict[str, int]:
        return await arun_steps(self.store.incr_many_creating_steps(deltas, initial), self._perform)

    async def incr_creating(self, key: str, delta: int, ttl: int = 0) -> int:
        return await arun_steps(self.store.incr_creating_steps(key, delta, ttl), self._perform)

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        return stats_report(await arun_steps(self.store.stats_of_all_steps(""), self._perform))

    async def close(self) -> None:
        """Close the running loop's connections; the next call on this loop reconnects."""
        await self._pools.close()


async def _on_node(pools: _LoopPools, call: NodeCall) -> Any:
    """Run one command on a server, translating failures as the blocking store does."""
    node = call.node
    try:
        result = await pools[node].run(call.command, call.args)
    except Exception as error:
        raise node.failure(error, call.key) from error
    node.answered()
    return result
