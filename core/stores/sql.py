"""A durable store: one table of PostgreSQL or SQLite, with memcached's semantics.

Every operation is one statement in autocommit, so each is atomic on its own
and visible to every process at once: ``add`` is an insert that replaces only
an expired row (``ON CONFLICT … DO UPDATE … WHERE``: of racing callers one
wins), ``incr`` an update that never creates, ``gets``/``cas`` compare the
random version every write sets (so a delete and a re-insert never pass for
the same value). Expired rows are invisible at once and deleted later, in
bounded batches, by :class:`~mcache.stores.sql_upkeep.Upkeep`, which also
keeps the table under ``max_bytes`` by evicting the least recently used rows.
The table is created on first use (see :mod:`mcache.stores.sql_dialects`).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..api import NO_VALUE, CasToken, NoValueType
from ..clock import Clock, system_clock
from ..errors import ConfigError, NotNumeric, StoreUnavailable, ValueTooLarge
from ..keys import validate_store_key
from .base import MiB, check_delta, too_large_message
from .sql_connections import Connections, Connector
from .sql_dialects import SCHEMA, SCHEMA_KEY, reserved_row
from .sql_upkeep import Upkeep

__all__ = ["SqlStore"]

CHUNK = 500
"""Keys per statement in the ``*_many`` operations (SQLite allows 32,766 parameters)."""


class SqlStore:
    """One table of a relational database behind the :class:`~mcache.api.Store` contract."""

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
        self.connections = Connections(connector, dead_timeout)
        self.upkeep = Upkeep(self, sweep_interval, sweep_batch, sweep_thread)
        self._ready_in: int | None = None  # the process that checked the table
        self._ready_lock = threading.Lock()
        self._started = time.time()
        self.counts = {"get_hits": 0, "get_misses": 0, "cmd_get": 0, "cmd_set": 0}

    def __repr__(self) -> str:
        return f"SqlStore({self.connector.location!r}, max_bytes={self.max_bytes})"

    # -- running statements ----------------------------------------------------------------

    def run(self, sql: str, params: Sequence[object] = ()) -> Any:
        """Run one statement (the table made ready first); return the cursor."""
        if self._ready_in != os.getpid():
            self.ensure_table()
        try:
            return self.connections.execute(sql, params)
        except StoreUnavailable:
            self._ready_in = None  # a dropped table is made again on the next call
            raise

    def ensure_table(self) -> None:
        """Create the table and its indexes if missing; refuse a table of another layout."""
        with self._ready_lock:
            if self._ready_in == os.getpid():
                return
            table, *indexes = self.dialect.create
            self._create(table)
            self._check_schema()  # before the indexes, which name the columns it checks
            for index in indexes:
                self._create(index)
            self._ready_in = os.getpid()

    def _create(self, statement: str) -> None:
        for attempt in range(3):
            try:
                self.connections.execute(statement, ())
                return
            except StoreUnavailable:  # PostgreSQL: processes creating it at once collide
                if attempt == 2 or self.connections.is_down():
                    raise
                time.sleep(0.05 * (attempt + 1))

    def _check_schema(self) -> None:
        table, where = self.dialect.table, self.connector.location
        try:
            row = self.connections.execute(self.dialect.schema, (SCHEMA_KEY,)).fetchone()
        except StoreUnavailable as error:
            raise StoreUnavailable(
                f"table {table!r} in {where} is not an mcache table ({error.__cause__});"
                " name another with the table option, or drop it"
            ) from error
        if row is None:
            row = reserved_row(SCHEMA_KEY, SCHEMA, 0, self.now_ms())
            self.connections.execute(self.dialect.add, row)
        elif bytes(row[1]) != SCHEMA:
            raise StoreUnavailable(
                f"table {table!r} in {where} has mcache schema {bytes(row[1])!r}; this"
                f" version reads {SCHEMA!r}: name another table with the table option"
            )

    def now_ms(self) -> int:
        return int(self.clock.time() * 1000)

    def _expires_at(self, ttl: int, now_ms: int) -> int:
        return 0 if ttl == 0 else now_ms + ttl * 1000

    def _row(self, key: str, value: bytes, ttl: int, now_ms: int) -> tuple[object, ...]:
        size = len(key) + len(value)
        return (key, value, new_version(), self._expires_at(ttl, now_ms), now_ms // 1000, size)

    def _check_size(self, key: str, value: bytes) -> None:
        if len(value) > self.max_value_size:
            raise ValueTooLarge(too_large_message(key, len(value), self.max_value_size))

    # -- the Store contract ------------------------------------------------------------------

    def get(self, key: str) -> bytes | NoValueType:
        """Return the value stored under ``key``, or ``NO_VALUE``."""
        validate_store_key(key)
        row = self.run(self.dialect.get, (key, self.now_ms())).fetchone()
        self.counts["cmd_get"] += 1
        if row is None:
            self.counts["get_misses"] += 1
            return NO_VALUE
        self.counts["get_hits"] += 1
        self.upkeep.used(key)
        return bytes(row[0])

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist."""
        return {key: value for key, (value, _ttl) in self.get_many_expiring(keys).items()}

    def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """Return ``{key: (value, seconds left)}`` for the keys that exist (0: no expiry)."""
        keys = list(dict.fromkeys(keys))
        for key in keys:
            validate_store_key(key)
        found: dict[str, tuple[bytes, int]] = {}
        now_ms = self.now_ms()
        for chunk in _chunks(keys):
            sql = self.dialect.get_many(len(chunk))
            for key, value, expires_at in self.run(sql, (*chunk, now_ms)).fetchall():
                left = 0 if expires_at == 0 else max(1, math.ceil((expires_at - now_ms) / 1000))
                found[key] = (bytes(value), left)
        self.counts["cmd_get"] += len(keys)
        self.counts["get_hits"] += len(found)
        self.counts["get_misses"] += len(keys) - len(found)
        self.upkeep.used(*found)
        return found

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value``; an oversize value raises and leaves the key empty."""
        validate_store_key(key)
        if len(value) > self.max_value_size or ttl < 0:
            self.delete(key)
            self._check_size(key, value)
            return
        self.run(self.dialect.upsert(1), self._row(key, value, ttl, self.now_ms()))
        self.counts["cmd_set"] += 1
        self.upkeep.wrote(1)

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values, a few hundred per statement; return the keys not stored."""
        failed = [key for key, value in items.items() if len(value) > self.max_value_size]
        for key in items:
            validate_store_key(key)
        gone = failed if ttl >= 0 else list(items)
        if gone:
            self.delete_many(gone)
        rows = [(k, v) for k, v in items.items() if k not in gone]
        now_ms = self.now_ms()
        for chunk in _chunks(rows):
            params = [field for k, v in chunk for field in self._row(k, v, ttl, now_ms)]
            self.run(self.dialect.upsert(len(chunk)), params)
        self.counts["cmd_set"] += len(rows)
        self.upkeep.wrote(len(rows))
        return failed

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store only if absent (or expired): of racing callers exactly one wins."""
        validate_store_key(key)
        self._check_size(key, value)
        now_ms = self.now_ms()
        if ttl < 0:
            return self.run(self.dialect.exists, (key, now_ms)).fetchone() is None
        cursor = self.run(self.dialect.add, (*self._row(key, value, ttl, now_ms), now_ms))
        self.counts["cmd_set"] += 1
        self.upkeep.wrote(1)
        return bool(cursor.rowcount == 1)

    def append(self, key: str, value: bytes) -> bool:
        """Append to an existing value; ``False`` when missing (or past the size limit)."""
        validate_store_key(key)
        self._check_size(key, value)
        params = (value, new_version(), len(value), key, self.now_ms(), len(value))
        return bool(self.run(self.dialect.append, (*params, self.max_value_size)).rowcount == 1)

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta`` (wrapping at 2**64); ``None`` when missing (never creates)."""
        return self._count(self.dialect.incr, key, delta, "incr")

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Subtract ``delta``, flooring at 0; ``None`` when missing."""
        return self._count(self.dialect.decr, key, delta, "decr")

    def _count(self, sql: str, key: str, delta: int, op: str) -> int | None:
        validate_store_key(key)
        check_delta(delta)
        now_ms = self.now_ms()
        row = self.run(sql, (delta, new_version(), key, now_ms)).fetchone()
        if row is not None:
            return int(bytes(row[0]))
        if self.run(self.dialect.exists, (key, now_ms)).fetchone() is not None:
            raise NotNumeric(f"cannot {op} {key!r}: its value is not a decimal integer")
        return None

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        """Increment several keys; ``None`` for the missing ones."""
        return {key: self.incr(key, delta) for key, delta in deltas.items()}

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return ``(value, version)``; ``(NO_VALUE, None)`` when missing."""
        validate_store_key(key)
        row = self.run(self.dialect.gets, (key, self.now_ms())).fetchone()
        return (NO_VALUE, None) if row is None else (bytes(row[0]), int(row[1]))

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Store only if the row still has the version :meth:`gets` returned."""
        validate_store_key(key)
        self._check_size(key, value)
        if type(token) is not int:
            return False
        now_ms = self.now_ms()
        if ttl < 0:
            return bool(self.run(self.dialect.cas_delete, (key, token, now_ms)).rowcount == 1)
        _key, _value, version, expires_at, used_at, size = self._row(key, value, ttl, now_ms)
        params = (value, version, expires_at, used_at, size, key, token, now_ms)
        stored = self.run(self.dialect.cas, params).rowcount == 1
        self.upkeep.wrote(1)
        return bool(stored)

    def delete(self, key: str) -> bool:
        """Delete ``key``; ``True`` when it existed (and had not expired)."""
        validate_store_key(key)
        row = self.run(self.dialect.delete, (key,)).fetchone()
        return row is not None and (row[0] == 0 or row[0] > self.now_ms())

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys, a few hundred per statement."""
        keys = list(dict.fromkeys(keys))
        for key in keys:
            validate_store_key(key)
        for chunk in _chunks(keys):
            self.run(self.dialect.delete_many(len(chunk)), chunk)

    def touch(self, key: str, ttl: int) -> bool:
        """Give an existing key a new TTL (0: no expiry, negative: expire it now)."""
        validate_store_key(key)
        if ttl < 0:
            return self.delete(key)
        now_ms = self.now_ms()
        params = (self._expires_at(ttl, now_ms), key, now_ms)
        return bool(self.run(self.dialect.touch, params).rowcount == 1)

    def flush(self) -> None:
        """Delete every row but the schema's."""
        self.run(self.dialect.flush)

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
            "uptime": int(time.time() - self._started),
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


def new_version() -> int:
    """Return a random 63-bit version: unique among a key's writes, even across forks."""
    return int.from_bytes(os.urandom(8), "big") >> 1


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
