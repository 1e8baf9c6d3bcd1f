"""The durable store's operations, written once as sans-I/O steps for both drivers.

Each ``*_steps`` method validates its arguments, yields the statements it needs
(:class:`Statement`) and turns their answers into the :class:`~mcache.contract.store.Store`
contract's: :class:`~mcache.stores.sql.store.SqlStore` runs them on a DB-API
connection per thread, :class:`~mcache.stores.sql.async_store.AsyncSqlStore`
awaits them on psycopg's async connections (see :mod:`mcache.sansio.steps`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcache.contract.store import NO_VALUE, CasToken, NoValueType
from mcache.contract.store_helpers import check_delta, check_size
from mcache.errors import NotNumeric, StoreUnavailable
from mcache.model.keys import validate_store_key, validated_keys
from mcache.sansio.steps import Pause, Steps
from mcache.stores.sql.dialects import SCHEMA, SCHEMA_KEY, reserved_row

if TYPE_CHECKING:
    from mcache.clock import Clock
    from mcache.stores.sql.connections import Connections, Connector
    from mcache.stores.sql.dialects import Dialect
    from mcache.stores.sql.upkeep import Upkeep

__all__ = ["ALL", "CHUNK", "COUNT", "ONE", "SqlSteps", "Statement", "new_version"]

CHUNK = 500
"""Keys per statement in the ``*_many`` operations (SQLite allows 32,766 parameters)."""

ONE, ALL, COUNT = "one", "all", "count"
"""What a statement's steps read back: its first row, every row, or the rows it changed."""


@dataclass(slots=True)
class Statement:
    """One SQL statement of a store's steps, and what its steps want back from it."""

    sql: str
    params: Sequence[object] = ()
    answer: str = COUNT


class SqlSteps:
    """The :class:`~mcache.contract.store.Store` contract in one SQL table, as steps (see the
    module)."""

    connector: Connector
    dialect: Dialect
    connections: Connections
    upkeep: Upkeep
    clock: Clock
    max_value_size: int
    counts: dict[str, int]

    def now_ms(self) -> int:
        return int(self.clock.time() * 1000)

    def _expires_at(self, ttl: int, now_ms: int) -> int:
        return 0 if ttl == 0 else now_ms + ttl * 1000

    def _row(self, key: str, value: bytes, ttl: int, now_ms: int) -> tuple[object, ...]:
        size = len(key) + len(value)
        return (key, value, new_version(), self._expires_at(ttl, now_ms), now_ms // 1000, size)

    # -- the table ----------------------------------------------------------------------------

    def ensure_table_steps(self) -> Steps[None]:
        """Create the table and its indexes if missing; refuse a table of another layout."""
        table, *indexes = self.dialect.create
        yield from self._create_steps(table)
        yield from self._check_schema_steps()  # before the indexes, which name its columns
        for index in indexes:
            yield from self._create_steps(index)

    def _create_steps(self, statement: str) -> Steps[None]:
        for attempt in range(3):
            try:
                yield Statement(statement)
                return
            except StoreUnavailable:  # PostgreSQL: processes creating it at once collide
                if attempt == 2 or self.connections.is_down():
                    raise
            yield Pause(0.05 * (attempt + 1))

    def _check_schema_steps(self) -> Steps[None]:
        table, where = self.dialect.table, self.connector.location
        try:
            row = yield Statement(self.dialect.schema, (SCHEMA_KEY,), ONE)
        except StoreUnavailable as error:
            raise StoreUnavailable(
                f"table {table!r} in {where} is not an mcache table ({error.__cause__});"
                " name another with the table option, or drop it"
            ) from error
        if row is None:
            yield Statement(self.dialect.add, reserved_row(SCHEMA_KEY, SCHEMA, 0, self.now_ms()))
        elif bytes(row[1]) != SCHEMA:
            raise StoreUnavailable(
                f"table {table!r} in {where} has mcache schema {bytes(row[1])!r}; this"
                f" version reads {SCHEMA!r}: name another table with the table option"
            )

    # -- the Store contract ------------------------------------------------------------------

    def get_steps(self, key: str) -> Steps[bytes | NoValueType]:
        validate_store_key(key)
        row = yield Statement(self.dialect.get, (key, self.now_ms()), ONE)
        self.counts["cmd_get"] += 1
        if row is None:
            self.counts["get_misses"] += 1
            return NO_VALUE
        self.counts["get_hits"] += 1
        self.upkeep.used(key)
        return bytes(row[0])

    def get_many_steps(self, keys: Iterable[str]) -> Steps[dict[str, bytes]]:
        found = yield from self.get_many_expiring_steps(keys)
        return {key: value for key, (value, _ttl) in found.items()}

    def get_many_expiring_steps(self, keys: Iterable[str]) -> Steps[dict[str, tuple[bytes, int]]]:
        keys = list(dict.fromkeys(keys))
        validated_keys(keys)
        found: dict[str, tuple[bytes, int]] = {}
        now_ms = self.now_ms()
        for chunk in _chunks(keys):
            sql = self.dialect.get_many(len(chunk))
            for key, value, expires_at in (yield Statement(sql, (*chunk, now_ms), ALL)):
                left = 0 if expires_at == 0 else max(1, math.ceil((expires_at - now_ms) / 1000))
                found[key] = (bytes(value), left)
        self.counts["cmd_get"] += len(keys)
        self.counts["get_hits"] += len(found)
        self.counts["get_misses"] += len(keys) - len(found)
        self.upkeep.used(*found)
        return found

    def set_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[None]:
        validate_store_key(key)
        if len(value) > self.max_value_size or ttl < 0:
            yield from self.delete_steps(key)
            check_size(key, value, self.max_value_size)
            return
        yield Statement(self.dialect.upsert(1), self._row(key, value, ttl, self.now_ms()))
        self.counts["cmd_set"] += 1
        self.upkeep.wrote(1)

    def set_many_steps(self, items: Mapping[str, bytes], ttl: int = 0) -> Steps[list[str]]:
        failed = [key for key, value in items.items() if len(value) > self.max_value_size]
        validated_keys(items)
        gone = failed if ttl >= 0 else list(items)
        if gone:
            yield from self.delete_many_steps(gone)
        rows = [(k, v) for k, v in items.items() if k not in gone]
        now_ms = self.now_ms()
        for chunk in _chunks(rows):
            params = [field for k, v in chunk for field in self._row(k, v, ttl, now_ms)]
            yield Statement(self.dialect.upsert(len(chunk)), params)
        self.counts["cmd_set"] += len(rows)
        self.upkeep.wrote(len(rows))
        return failed

    def add_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        now_ms = self.now_ms()
        if ttl < 0:
            return (yield Statement(self.dialect.exists, (key, now_ms), ONE)) is None
        row = (*self._row(key, value, ttl, now_ms), now_ms)
        added = yield Statement(self.dialect.add, row)
        self.counts["cmd_set"] += 1
        self.upkeep.wrote(1)
        return bool(added == 1)

    def append_steps(self, key: str, value: bytes) -> Steps[bool]:
        return (yield from self._joined_steps(self.dialect.append, key, value))

    def prepend_steps(self, key: str, value: bytes) -> Steps[bool]:
        return (yield from self._joined_steps(self.dialect.prepend, key, value))

    def _joined_steps(self, sql: str, key: str, value: bytes) -> Steps[bool]:
        """Join ``value`` to a live row's (``Dialect.append`` or ``prepend``), keeping its
        expiry; never past ``max_value_size``."""
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        params = (value, new_version(), len(value), key, self.now_ms(), len(value))
        changed = yield Statement(sql, (*params, self.max_value_size))
        return bool(changed == 1)

    def replace_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        """Write over a live row only; an oversize value leaves the key empty, as ``set``."""
        validate_store_key(key)
        if len(value) > self.max_value_size or ttl < 0:
            existed = yield from self.delete_steps(key)
            check_size(key, value, self.max_value_size)
            return existed
        now_ms = self.now_ms()
        _key, _value, version, expires_at, used_at, size = self._row(key, value, ttl, now_ms)
        params = (value, version, expires_at, used_at, size, key, now_ms)
        replaced = (yield Statement(self.dialect.replace, params)) == 1
        self.counts["cmd_set"] += 1
        self.upkeep.wrote(1)
        return bool(replaced)

    def incr_steps(self, key: str, delta: int, op: str) -> Steps[int | None]:
        """``incr`` (wrapping at 2**64) or ``decr`` (flooring at 0); ``None`` when missing."""
        validate_store_key(key)
        check_delta(delta)
        now_ms = self.now_ms()
        sql = self.dialect.incr if op == "incr" else self.dialect.decr
        row = yield Statement(sql, (delta, new_version(), key, now_ms), ONE)
        if row is not None:
            return int(bytes(row[0]))
        if (yield Statement(self.dialect.exists, (key, now_ms), ONE)) is not None:
            raise NotNumeric(f"cannot {op} {key!r}: its value is not a decimal integer")
        return None

    def incr_many_steps(self, deltas: Mapping[str, int]) -> Steps[dict[str, int | None]]:
        counts: dict[str, int | None] = {}
        for key, delta in deltas.items():
            counts[key] = yield from self.incr_steps(key, delta, "incr")
        return counts

    def gets_steps(self, key: str) -> Steps[tuple[bytes | NoValueType, CasToken | None]]:
        validate_store_key(key)
        row = yield Statement(self.dialect.gets, (key, self.now_ms()), ONE)
        return (NO_VALUE, None) if row is None else (bytes(row[0]), int(row[1]))

    def cas_steps(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> Steps[bool]:
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        if type(token) is not int:
            return False
        now_ms = self.now_ms()
        if ttl < 0:
            return bool((yield Statement(self.dialect.cas_delete, (key, token, now_ms))) == 1)
        _key, _value, version, expires_at, used_at, size = self._row(key, value, ttl, now_ms)
        params = (value, version, expires_at, used_at, size, key, now_ms, token)
        stored = (yield Statement(self.dialect.cas, params)) == 1
        self.upkeep.wrote(1)
        return bool(stored)

    def delete_steps(self, key: str) -> Steps[bool]:
        validate_store_key(key)
        row = yield Statement(self.dialect.delete, (key,), ONE)
        return row is not None and (row[0] == 0 or row[0] > self.now_ms())

    def delete_many_steps(self, keys: Iterable[str]) -> Steps[None]:
        keys = list(dict.fromkeys(keys))
        validated_keys(keys)
        for chunk in _chunks(keys):
            yield Statement(self.dialect.delete_many(len(chunk)), chunk)

    def touch_steps(self, key: str, ttl: int) -> Steps[bool]:
        validate_store_key(key)
        if ttl < 0:
            return (yield from self.delete_steps(key))
        now_ms = self.now_ms()
        params = (self._expires_at(ttl, now_ms), key, now_ms)
        return bool((yield Statement(self.dialect.touch, params)) == 1)

    def flush_steps(self) -> Steps[None]:
        yield Statement(self.dialect.flush)


def answered(statement: Statement, cursor: Any) -> Any:
    """What a DB-API cursor that ran ``statement`` answers it."""
    if statement.answer == ONE:
        return cursor.fetchone()
    if statement.answer == ALL:
        return cursor.fetchall()
    return cursor.rowcount


def new_version() -> int:
    """Return a random 63-bit version: unique among a key's writes, even across forks."""
    return int.from_bytes(os.urandom(8), "big") >> 1


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]
