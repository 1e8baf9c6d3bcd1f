"""The SQL a durable store speaks, in PostgreSQL's and SQLite's words.

One table holds every entry::

    key         the store key (primary key; byte order, so lookups never collate)
    value       the bytes
    version     a random 63-bit number, new on every write: ``gets``/``cas``
    expires_at  milliseconds since the epoch; 0 = never. Checked on every read,
                so an expired row is invisible before the sweep deletes it
    used_at     seconds since the epoch, roughly when last read or written:
                the approximate LRU order eviction follows
    size        bytes of key and value, for the size bound

Indexes: ``expires_at`` (rows that expire only) for the sweep, ``used_at`` for
eviction, and ``(version, size)``, whose leading column is uniformly random, so
a range of it is a uniform sample from which the sweep estimates the table's
size without counting it.

Two rows are the store's own, under keys no cache key can take (they begin
with a space): the schema version, and the marker of the process sweeping now.
Their ``used_at`` is :data:`RESERVED_USE`, so eviction never picks them.
"""

from __future__ import annotations

import dataclasses
import functools
import re

__all__ = [
    "RESERVED_USE",
    "SCHEMA",
    "SCHEMA_KEY",
    "UPKEEP_KEY",
    "Dialect",
    "postgres",
    "reserved_row",
    "sqlite",
]

SCHEMA = b"1"
"""The table layout this code reads; a table holding another is refused, named."""
SCHEMA_KEY = " mcache schema"
UPKEEP_KEY = " mcache upkeep"
RESERVED_USE = 2**62
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_LIVE = "(expires_at = 0 OR expires_at > %s)"
_COLUMNS = "key, value, version, expires_at, used_at, size"
_REPLACE = (
    "UPDATE {t} SET value = %s, version = %s, expires_at = %s, used_at = %s, size = %s"
    " WHERE key = %s AND {live}"
)
_UPSERT = (
    "INSERT INTO {t} ({columns}) VALUES {rows} ON CONFLICT (key) DO UPDATE SET"
    " value = excluded.value, version = excluded.version, expires_at = excluded.expires_at,"
    " used_at = excluded.used_at, size = excluded.size"
)


def reserved_row(key: str, value: bytes, expires_at: int, now_ms: int) -> tuple[object, ...]:
    """Return the parameters of :attr:`Dialect.add` for one of the store's own rows."""
    return (key, value, 0, expires_at, RESERVED_USE, 0, now_ms)


def check_table_name(name: str) -> str:
    """Return ``name`` if it is a plain SQL identifier; raise ValueError otherwise."""
    if not _TABLE.fullmatch(name):
        raise ValueError(
            f"table name {name!r} must be letters, digits and underscores (at most 63),"
            " not starting with a digit"
        )
    return name


def _statement(sql: str) -> functools.cached_property[str]:
    """A statement of :class:`Dialect`, written with ``%s``: its own, made on first use."""
    return functools.cached_property(lambda dialect: dialect._(sql))


def _own(field: str) -> functools.cached_property[str]:
    """A statement a :class:`Dialect` is given in its database's words, as ``field``."""
    return functools.cached_property(lambda dialect: dialect._(getattr(dialect, field)))


def _joining(first: str, second: str) -> functools.cached_property[str]:
    """The update that joins ``first`` and ``second`` (the value, and the ``%s`` given) in the
    dialect's words, over a live row only and never past the size given last."""
    sql = (
        "UPDATE {t} SET value = {joined}, version = %s, size = size + %s"
        " WHERE key = %s AND {live} AND length(value) + %s <= %s"
    )
    return functools.cached_property(
        lambda dialect: dialect._(sql.replace("{joined}", dialect.concat.format(first, second)))
    )


@dataclasses.dataclass(frozen=True)
class Dialect:
    """Every statement the store runs, for one database and one table.

    Statements are written with ``%s`` placeholders and translated once to the
    driver's ``paramstyle``; where the two databases differ only the differing
    pieces are given (``create``, ``incr``, ``decr``, and ``concat``, how two byte strings
    join, written with ``{0}`` and ``{1}``).
    """

    name: str
    table: str
    create: tuple[str, ...]
    incr_sql: str
    decr_sql: str
    concat: str
    placeholder: str = "%s"

    def _(self, sql: str) -> str:
        sql = sql.format(t=self.table, live=_LIVE, columns=_COLUMNS)
        return sql if self.placeholder == "%s" else sql.replace("%s", self.placeholder)

    get = _statement("SELECT value FROM {t} WHERE key = %s AND {live}")

    def get_many(self, count: int) -> str:
        return self._(
            f"SELECT key, value, expires_at FROM {{t}} WHERE key IN ({_marks(count)}) AND {{live}}"
        )

    gets = _statement("SELECT value, version FROM {t} WHERE key = %s AND {live}")

    def upsert(self, count: int) -> str:
        rows = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * count)
        return self._(_UPSERT.replace("{rows}", rows))

    # Insert, or replace a row that has expired: one winner among racing callers.
    add = _statement(
        _UPSERT.replace("{rows}", "(%s, %s, %s, %s, %s, %s)")
        + " WHERE {t}.expires_at <> 0 AND {t}.expires_at <= %s"
    )

    append = _joining("value", "%s")
    prepend = _joining("%s", "value")
    incr = _own("incr_sql")
    decr = _own("decr_sql")

    exists = _statement("SELECT 1 FROM {t} WHERE key = %s AND {live}")

    replace = _statement(_REPLACE)
    cas = _statement(_REPLACE + " AND version = %s")

    cas_delete = _statement("DELETE FROM {t} WHERE key = %s AND version = %s AND {live}")

    delete = _statement("DELETE FROM {t} WHERE key = %s RETURNING expires_at")

    def delete_many(self, count: int) -> str:
        return self._(f"DELETE FROM {{t}} WHERE key IN ({_marks(count)})")

    touch = _statement("UPDATE {t} SET expires_at = %s WHERE key = %s AND {live}")

    flush = _statement(f"DELETE FROM {{t}} WHERE key <> '{SCHEMA_KEY}'")

    # -- upkeep -------------------------------------------------------------------------

    schema = _statement(f"SELECT {_COLUMNS} FROM {{t}} WHERE key = %s")

    sweep_expired = _statement(
        "DELETE FROM {t} WHERE key IN (SELECT key FROM {t}"
        " WHERE expires_at > 0 AND expires_at <= %s ORDER BY expires_at LIMIT %s)"
    )

    def mark_used(self, count: int) -> str:
        return self._(
            f"UPDATE {{t}} SET used_at = %s WHERE key IN ({_marks(count)}) AND used_at < %s"
        )

    evict = _statement(
        "DELETE FROM {t} WHERE key IN (SELECT key FROM {t}"
        f" WHERE used_at < {RESERVED_USE} ORDER BY used_at LIMIT %s)"
    )

    # Rows and bytes among the rows whose random version is below a bound.
    sample = _statement(
        f"SELECT count(*), coalesce(sum(size), 0) FROM {{t}}"
        f" WHERE version < %s AND used_at < {RESERVED_USE}"
    )

    count_all = _statement(
        f"SELECT count(*), coalesce(sum(size), 0) FROM {{t}} WHERE used_at < {RESERVED_USE}"
    )


def _marks(count: int) -> str:
    return ", ".join(["%s"] * count)


def _indexes(table: str) -> tuple[str, ...]:
    return (
        f"CREATE INDEX IF NOT EXISTS {table}_expiring ON {table} (expires_at) WHERE expires_at > 0",
        f"CREATE INDEX IF NOT EXISTS {table}_used ON {table} (used_at)",
        f"CREATE INDEX IF NOT EXISTS {table}_sample ON {table} (version, size)",
    )


def postgres(table: str) -> Dialect:
    """PostgreSQL: bytea values, keys compared byte by byte (``COLLATE "C"``)."""
    check_table_name(table)
    counted = (
        "UPDATE {t} SET value = convert_to(({number})::text, 'SQL_ASCII'), version = %s"
        " WHERE key = %s AND {live} AND encode(value, 'escape') ~ '^[0-9]{{1,20}}$'"
        " RETURNING value"
    )
    number = "encode(value, 'escape')::numeric"
    return Dialect(
        name="postgresql",
        table=table,
        create=(
            f'CREATE TABLE IF NOT EXISTS {table} (key text COLLATE "C" PRIMARY KEY,'
            " value bytea NOT NULL, version bigint NOT NULL, expires_at bigint NOT NULL,"
            " used_at bigint NOT NULL, size integer NOT NULL)",
            *_indexes(table),
        ),
        incr_sql=counted.replace("{number}", f"mod({number} + %s, 18446744073709551616)"),
        decr_sql=counted.replace("{number}", f"greatest({number} - %s, 0)"),
        concat="{0} || {1}",
    )


def sqlite(table: str) -> Dialect:
    """SQLite: blob values; counting by ``mcache_count``, a function the connection registers."""
    check_table_name(table)
    counted = (
        "UPDATE {t} SET value = mcache_count(value, %s, '{op}'), version = %s"
        " WHERE key = %s AND {live} AND mcache_count(value, 0, 'incr') IS NOT NULL"
        " RETURNING value"
    )
    return Dialect(
        name="sqlite",
        table=table,
        create=(
            f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value BLOB NOT NULL,"
            " version INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
            " used_at INTEGER NOT NULL, size INTEGER NOT NULL)",
            *_indexes(table),
        ),
        incr_sql=counted.replace("{op}", "incr"),
        decr_sql=counted.replace("{op}", "decr"),
        concat="CAST({0} || {1} AS BLOB)",
        placeholder="?",
    )
