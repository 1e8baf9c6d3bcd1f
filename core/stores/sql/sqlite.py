"""The SQLite store: a :class:`~mcache.stores.sql.store.SqlStore` in a file on this host.

``sqlite:///cache.db`` (relative to the working directory) or
``sqlite:////var/cache/site/cache.db`` (absolute), as SQLAlchemy writes them.
The file is shared by every process on the host: it runs in WAL mode, so
readers never wait for the writer, and a writer waits up to ``timeout``
seconds for another (SQLite lets one write at a time). ``synchronous=NORMAL``
keeps what was committed across a crash of the process, though not always the
last writes across a power cut: the trade a cache makes.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from mcache.contract.store_helpers import counted
from mcache.stores.sql.dialects import Dialect, sqlite

__all__ = ["SqliteConnector", "check_version", "prepare_connection"]

MIN_VERSION = (3, 35, 0)
"""``UPDATE … RETURNING``; Python's own SQLite has been newer since 2021."""


class SqliteConnector:
    """Opens autocommit connections to one SQLite file, for one table."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, path: str, table: str = "mcache", *, timeout: float = 5.0) -> None:
        self.path = path
        self.dialect: Dialect = sqlite(table)
        self.timeout = timeout
        self.location = f"sqlite:///{path}#{table}"

    def connect(self) -> Any:
        """Return a new connection in WAL mode with ``mcache_count`` registered."""
        connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        use_wal(connection, self.timeout)
        connection.execute("PRAGMA synchronous=NORMAL")
        prepare_connection(connection)
        return connection


def use_wal(connection: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode (it stays so), waiting up to ``timeout`` for the lock.

    Switching the journal mode needs an exclusive lock, and SQLite answers
    "database is locked" at once, without its busy handler, when other
    connections open the same new file meanwhile (the first processes of a
    site starting together): so ask, and retry until the mode is WAL.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def prepare_connection(connection: sqlite3.Connection) -> None:
    """Register what the store's statements call on an SQLite connection."""
    connection.create_function("mcache_count", 3, _count, deterministic=True)


def _count(value: object, delta: int, op: str) -> bytes | None:
    if not isinstance(value, bytes | str):
        return None
    number = counted(value.encode() if isinstance(value, str) else value, delta, op)
    return None if number is None else str(number).encode()


def check_version() -> str | None:
    """Return why this Python's SQLite cannot hold the store, or None."""
    if sqlite3.sqlite_version_info < MIN_VERSION:
        wanted = ".".join(map(str, MIN_VERSION))
        return f"SQLite {sqlite3.sqlite_version} is older than {wanted} (UPDATE … RETURNING)"
    return None
