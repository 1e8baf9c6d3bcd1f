"""A durable store: one table of PostgreSQL or SQLite, with memcached's semantics.

Every operation is one statement in autocommit, so each is atomic on its own
and visible to every process at once (``add`` replaces only an expired row: of
racing callers one wins). Expired rows are invisible at once and deleted later
by :class:`~mcache.stores.sql.upkeep.Upkeep`, which also keeps the table under
``max_bytes``. See docs/how-to/durable-tier.md#how-it-works-and-what-it-costs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mcache.clock import Clock, system_clock
from mcache.contract.stepped_store import SteppedStore
from mcache.contract.store import StoreTraits
from mcache.contract.store_helpers import MiB, twin_made_once
from mcache.errors import ConfigError, StoreUnavailable
from mcache.sansio.steps import Pause, run_steps
from mcache.stores.sql.connections import Connections, Connector
from mcache.stores.sql.steps import SqlSteps, Statement, answered
from mcache.stores.sql.upkeep import Upkeep

if TYPE_CHECKING:
    from mcache.stores.sql.async_store import AsyncSqlStore

__all__ = ["SqlStore"]


class SqlStore(SqlSteps, SteppedStore):
    """One table of a relational database behind the :class:`~mcache.contract.store.Store` contract:
    :class:`~mcache.stores.sql.steps.SqlSteps` run on one connection per thread."""

    traits = StoreTraits(async_twin=True, incr_many=True, tells_time_left=True)

    def __init__(
        self,
        connector: Connector,
        *,
        max_value_size: int = 1 * MiB,
        max_bytes: int = 1024 * MiB,
        dead_timeout: float = 2.0,
        sweep_interval: float = 60.0,
        sweep_batch: int = 500,
        sweep_thread: bool = True,
        clock: Clock = system_clock,
    ) -> None:
        name = connector.dialect.name
        if max_value_size < 1:
            raise ConfigError(f"{name}: max_value_size must be >= 1, got {max_value_size!r}")
        if max_bytes < 0:
            raise ConfigError(f"{name}: max_bytes must be >= 0 (0: no bound), got {max_bytes!r}")
        if dead_timeout < 0 or sweep_interval <= 0 or sweep_batch < 1:
            raise ConfigError(
                f"{name}: dead_timeout must be >= 0, sweep_interval > 0 and sweep_batch >= 1"
            )
        self.connector = connector
        self.dialect = connector.dialect
        self.max_value_size = max_value_size
        self.max_bytes = max_bytes
        self.clock = clock
        self.connections = Connections(connector, dead_timeout, clock)
        self.upkeep = Upkeep(self, sweep_interval, sweep_batch, sweep_thread)
        self._ready_in: int | None = None  # the process that checked the table
        self._ready_lock = threading.Lock()
        self._started = clock.time()
        self._twin: AsyncSqlStore | None = None
        self.counts = {"get_hits": 0, "get_misses": 0, "cmd_get": 0, "cmd_set": 0}

    def __repr__(self) -> str:
        return f"SqlStore({self.connector.location!r}, max_bytes={self.max_bytes})"

    # -- running statements ----------------------------------------------------------------

    @property
    def table_ready(self) -> bool:
        """Whether this process made (or checked) the table. Either driver unsets it when
        a statement fails, so a table dropped meanwhile is made again by the next call."""
        return self._ready_in == os.getpid()

    @table_ready.setter
    def table_ready(self, ready: bool) -> None:
        self._ready_in = os.getpid() if ready else None

    def run(self, sql: str, params: Sequence[object] = ()) -> Any:
        """Run one statement (the table made ready first); return the cursor."""
        if not self.table_ready:
            self.ensure_table()
        try:
            return self.connections.execute(sql, params)
        except StoreUnavailable:
            self.table_ready = False
            raise

    def ensure_table(self) -> None:
        """Create the table and its indexes if missing; refuse a table of another layout."""
        with self._ready_lock:
            if self.table_ready:
                return
            run_steps(self.ensure_table_steps(), self._perform_unready)
            self.table_ready = True

    def _perform(self, operation: Statement | Pause) -> Any:
        """Perform one operation of the steps on this thread's connection."""
        if type(operation) is Statement:
            return answered(operation, self.run(operation.sql, operation.params))
        return operation.run()

    def _perform_unready(self, operation: Statement | Pause) -> Any:
        """:meth:`_perform` while the table is being made (it need not be ready)."""
        if type(operation) is Statement:
            return answered(operation, self.connections.execute(operation.sql, operation.params))
        return operation.run()

    def asynchronous(self) -> AsyncSqlStore | None:
        """Return the async twin (PostgreSQL's, see :mod:`mcache.stores.sql.async_store`), or
        None (SQLite, a Django ``db:`` alias): async callers then use a worker thread."""
        if self._twin is None and not hasattr(self.connector, "aconnect"):
            return None
        return twin_made_once(self, self._new_twin)

    def _new_twin(self) -> AsyncSqlStore:
        from mcache.stores.sql.async_store import AsyncSqlStore

        return AsyncSqlStore(self)

    # -- the Store contract: the steps, performed ---------------------------------------------

    def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """Return ``{key: (value, seconds left)}`` for the keys that exist (0: no expiry)."""
        return run_steps(self.get_many_expiring_steps(keys), self._perform)

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return memcached's fields for the table (sizes estimated on a large table).

        ``get_hits``/``get_misses`` count this process's reads; ``evictions`` and
        ``reclaimed`` this process's sweeps.
        """
        rows, size, exact = self.upkeep.estimate()
        fields: dict[str, int | float | str] = {
            "engine": self.dialect.name,
            "table": self.dialect.table,
            "pid": os.getpid(),
            "uptime": int(self.clock.time() - self._started),
            "curr_items": rows,
            "bytes": size,
            "estimated": int(not exact),
            "limit_maxbytes": self.max_bytes,
            "evictions": self.upkeep.counts["evicted"],
            "reclaimed": self.upkeep.counts["expired"],
            **self.counts,
        }
        return {self.connector.location: fields}

    def close(self) -> None:
        """Stop the sweep and close this thread's connection; both restart on next use."""
        self.upkeep.stop()
        self.connections.close()
