"""The PostgreSQL store on an event loop: psycopg's async connections, the same steps.

:class:`AsyncSqlStore` awaits the very steps a PostgreSQL
:class:`~mcache.stores.sql.store.SqlStore` performs (:mod:`mcache.stores.sql.steps`) on
the running loop's :class:`LoopConnections`: at most the connector's
``max_connections``, opened by the statements that need them and kept idle for
the next. A failed connect marks the database down for ``dead_timeout``, as the
sync store does. SQLite (whose driver blocks) and a Django ``db:`` alias have no
twin: async callers reach those through a worker thread.

Why not psycopg_pool's ``AsyncConnectionPool``: its maintenance tasks take a
cancellation for a failed connect and go on, so a loop that ends without
closing the pool first (``asyncio.run`` cancels tasks before finalizing, and
asgiref runs a loop per Flask request) never finishes ending. Connections
opened by the statements themselves leave nothing running on the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcache.contract.loop_local import LoopLocal
from mcache.contract.stepped_twin import SteppedTwin
from mcache.errors import StoreUnavailable
from mcache.sansio.steps import Pause, arun_steps
from mcache.stores.sql.steps import ALL, ONE, Statement

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mcache.stores.sql.store import SqlStore

__all__ = ["AsyncSqlStore", "LoopConnections"]


class LoopConnections:
    """One event loop's connections: at most ``limit``, opened on demand, idle ones reused."""

    def __init__(self, connect: Callable[[], Awaitable[Any]], limit: int) -> None:
        self._connect = connect
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[Any] = []
        self.opened = 0
        """Connections opened on this loop so far."""
        self.ready = asyncio.Lock()
        """Held while this loop makes the table ready (once per process)."""

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A connection for one statement: an idle one, or a new one while under the limit.

        Raises what connecting raised, as :class:`ConnectFailed`; a connection
        whose statement failed or was cancelled is closed, not reused.
        """
        async with self._slots:
            connection = self._idle.pop() if self._idle else None
            if connection is None:
                try:
                    connection = await self._connect()
                except Exception as error:
                    raise ConnectFailed(error) from error
                self.opened += 1
            try:
                yield connection
            except BaseException:
                with contextlib.suppress(Exception):  # already broken: nothing more to do
                    await connection.close()
                raise
            self._idle.append(connection)

    async def close(self) -> None:
        """Close the idle connections (those in use close when their statements end)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            with contextlib.suppress(Exception):
                await connection.close()


class ConnectFailed(Exception):
    """Opening a connection failed: the database is down, or refuses us."""


class AsyncSqlStore(SteppedTwin):
    """:class:`~mcache.contract.store.AsyncStore` on the table of a PostgreSQL :class:`SqlStore`."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store)
        self._loops: LoopLocal[LoopConnections] = LoopLocal(
            self._new_connections, LoopConnections.close
        )

    def _new_connections(self) -> LoopConnections:
        connector: Any = self.store.connector
        return LoopConnections(connector.aconnect, connector.max_connections)

    async def connections(self) -> LoopConnections:
        """The running loop's connections."""
        return await self._loops.get()

    async def _perform(self, operation: Statement | Pause) -> Any:
        """Perform one operation of the steps on a connection of the running loop."""
        if type(operation) is not Statement:
            return await operation.arun()
        store = self.store
        here = await self._loops.get()
        try:
            if not store.table_ready:
                await self._make_ready(here)
            return await self._execute(here, operation)
        except StoreUnavailable:
            store.table_ready = False
            raise

    async def _make_ready(self, here: LoopConnections) -> None:
        """Make the table ready, once per process, while this loop's other callers wait."""
        async with here.ready:
            if self.store.table_ready:
                return

            async def unready(operation: Statement | Pause) -> Any:
                if type(operation) is not Statement:
                    return await operation.arun()
                return await self._execute(here, operation)

            await arun_steps(self.store.ensure_table_steps(), unready)
            self.store.table_ready = True

    async def _execute(self, here: LoopConnections, statement: Statement) -> Any:
        down = self.store.connections
        down.refuse_while_down()
        where = self.store.connector.location
        try:
            async with here.connection() as connection:
                cursor = await connection.execute(statement.sql, statement.params)
                if statement.answer == ONE:
                    return await cursor.fetchone()
                if statement.answer == ALL:
                    return await cursor.fetchall()
                return cursor.rowcount
        except ConnectFailed as failed:
            down.mark_down()
            raise StoreUnavailable(f"{where}: {failed.__cause__}") from failed.__cause__
        except self.store.connector.errors as error:
            raise StoreUnavailable(f"{where}: {error}") from error

    # -- the AsyncStore contract: the sync store's steps, awaited ----------------------------

    async def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        return await arun_steps(self.store.get_many_expiring_steps(keys), self._perform)

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        """The sync store's, in a worker thread: its size estimate is several statements
        and a rare call (``mcache_stats``), not worth a second copy."""
        return await asyncio.to_thread(self.store.stats)

    async def close(self) -> None:
        """Close the running loop's connections; the next call on this loop opens others."""
        await self._loops.close()
