"""Tiers on an event loop: the tiered store's steps, each tier's call awaited on its own twin.

:class:`AsyncTieredStore` awaits a tier with an async twin (memory, memcached,
Redis) on the loop and calls one without (the durable tier) in a worker thread,
so a hit in a hot tier that has a twin never leaves the loop, however slow the
cold tier.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcache.contract.stepped_twin import SteppedTwin
from mcache.sansio.steps import aperform, arun_steps, twin_of

if TYPE_CHECKING:
    from mcache.stores.tiered.store import Expiring, TieredStore

__all__ = ["AsyncTieredStore"]


class AsyncTieredStore(SteppedTwin):
    """:class:`~mcache.contract.store.AsyncStore` over the async twins of a
    :class:`TieredStore`'s tiers."""

    store: TieredStore
    _perform = staticmethod(aperform)  # each tier's call: on its twin, or in a thread

    async def get_many_expiring(self, keys: Iterable[str]) -> Expiring:
        return await arun_steps(self.store.get_many_expiring_steps(keys), aperform)

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        return await arun_steps(self.store.stats_steps(), aperform)

    async def close(self) -> None:
        """Close the running loop's connections of every tier that has a twin."""
        for tier in (self.store.hot, self.store.cold):
            twin = twin_of(tier)
            if twin is not None:
                await twin.close()
