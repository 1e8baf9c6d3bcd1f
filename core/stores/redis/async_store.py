"""The Redis store on an event loop: redis-py's asyncio client, the same steps.

:class:`AsyncRedisStore` performs the very steps a
:class:`~mcache.stores.redis.store.RedisStore` performs (:mod:`mcache.stores.redis.steps`),
awaiting each command on the running loop instead of blocking a thread.
An asyncio connection belongs to the loop that opened it, so the twin keeps one
client per event loop, each on a *blocking* pool of at most ``max_connections``
(else 64): a burst waits up to ``socket_timeout`` for a free connection rather
than opening one per request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import redis.asyncio
from redis.commands.core import AsyncScript

from mcache.contract.loop_local import LoopLocal
from mcache.contract.stepped_twin import SteppedTwin
from mcache.errors import ConfigError
from mcache.sansio.steps import arun_steps
from mcache.stores.redis.steps import Command, Pipelined, Scripted

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mcache.contract.store import StaleClaim
    from mcache.stores.redis.store import RedisStore

__all__ = ["DEFAULT_MAX_CONNECTIONS", "AsyncRedisStore", "LoopClient"]

DEFAULT_MAX_CONNECTIONS = 64
"""Connections per event loop when the store's ``max_connections`` is not set."""


class LoopClient:
    """One event loop's clients (the primary's, the replicas' reader) and their scripts.

    ``slots`` bounds the commands in flight, for clients whose pools refuse a
    connection over their limit instead of waiting for one (Sentinel's, a
    cluster's): a burst waits here, so the bound holds and nothing fails.
    ``opening`` (a cluster learning its slot map) is awaited once, by the first
    command, while the others wait: clients that would each start it on first
    use must not run it twice at once.
    """

    def __init__(
        self,
        client: Any,
        reader: Any = None,
        slots: int | None = None,
        also_close: tuple[Any, ...] = (),
        opening: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.reader = client if reader is None else reader
        self.slots = None if slots is None else asyncio.Semaphore(slots)
        self.scripts: dict[str, AsyncScript] = {}
        self._also_close = also_close
        self.opening = opening
        self._opened = asyncio.Lock()

    async def open(self) -> None:
        """Run ``opening`` once (again after a failure), one caller at a time."""
        async with self._opened:
            if self.opening is not None:
                await self.opening()
                self.opening = None

    async def close(self) -> None:
        await self.client.aclose()
        if self.reader is not self.client:
            await self.reader.aclose()
        for other in self._also_close:
            await other.aclose()

    def script(self, source: str) -> AsyncScript:
        script = self.scripts.get(source)
        if script is None:
            script = self.scripts[source] = self.client.register_script(source)
        return script


class AsyncRedisStore(SteppedTwin):
    """:class:`~mcache.contract.store.AsyncStore` on the database of a :class:`RedisStore`."""

    def __init__(self, store: RedisStore) -> None:
        super().__init__(store)
        self.max_connections = store.max_connections or DEFAULT_MAX_CONNECTIONS
        self._clients: LoopLocal[LoopClient] = LoopLocal(self._new_client, LoopClient.close)

    @property
    def claims_in_read(self) -> bool:
        """As the sync store's (see :class:`~mcache.contract.store.ClaimsStale`)."""
        return self.store.claims_in_read

    def _new_client(self) -> LoopClient:
        """Make the running loop's client (a blocking pool: a burst waits for a connection)."""
        options = self.store.connection_options
        if options is None:
            raise ConfigError(
                f"{self.store!r} was given its client, so it has no async twin: make it from a URL"
            )
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            self.store.url,
            **{**options, "max_connections": self.max_connections},
            timeout=options["socket_timeout"],
        )
        return LoopClient(redis.asyncio.Redis.from_pool(pool))

    async def _perform(self, operation: Command | Scripted | Pipelined) -> Any:
        """Perform one operation of the steps on the running loop's client."""
        here = await self._clients.get()
        try:
            if here.opening is not None:
                await here.open()
            async with here.slots or contextlib.nullcontext():
                if type(operation) is Command:
                    return await operation.call(here.reader if operation.reader else here.client)
                if type(operation) is Scripted:
                    return await here.script(operation.source)(operation.keys, operation.args)
                client = here.reader if operation.reader else here.client  # type: ignore[union-attr]
                pipe = client.pipeline(transaction=False)
                operation.fill(pipe)  # type: ignore[union-attr]
                return await pipe.execute()
        except self.store._FAILURES as error:
            raise self.store.translated(error, getattr(operation, "key", "")) from error

    # -- the AsyncStore contract: the sync store's steps, awaited ----------------------------

    async def get_many_claiming(self, keys: list[str], claim: StaleClaim) -> dict[str, bytes]:
        return await arun_steps(self.store.get_many_claiming_steps(keys, claim), self._perform)

    async def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int | None]]:
        return await arun_steps(self.store.get_many_expiring_steps(keys), self._perform)

    async def pfadd(self, key: str, member: bytes, ttl: int) -> bool:
        return await arun_steps(self.store.pfadd_steps(key, member, ttl), self._perform)

    async def pfcount(self, keys: list[str]) -> int:
        return await arun_steps(self.store.pfcount_steps(keys), self._perform)

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        """The sync store's, in a worker thread: an operator's rare call (``mcache_stats``),
        which Sentinel and Cluster answer for every server of the topology."""
        return await asyncio.to_thread(self.store.stats)

    async def close(self) -> None:
        """Close the running loop's connections; the next call on this loop reconnects."""
        await self._clients.close()
