"""A database connection per thread, per process, for the durable stores.

A cache is read from every request thread at once. Sharing one connection
would queue them; a pool costs a checkout per call. One autocommit connection
per thread (Django's own model) costs neither, and autocommit matters: a lock
or a write must be visible to other processes at once, never held back by a
transaction the request happens to be in.

After ``fork`` a child must not touch its parent's sockets: connections are
kept per process id, and a parent's are left alone (never closed from the
child, which would end the parent's session). A connection that fails is
dropped; one that cannot be opened marks the database down for
``dead_timeout`` seconds, during which calls fail at once instead of each
waiting on a connect.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from mcache.clock import Clock, system_clock
from mcache.errors import StoreUnavailable
from mcache.stores.sql.dialects import Dialect

__all__ = ["Connections", "Connector"]


class Connector(Protocol):
    """How to open a connection to one database, and what its failures look like."""

    dialect: Dialect
    location: str
    """Where the table lives, without a password: for messages and ``stats()``."""
    errors: tuple[type[BaseException], ...]
    """The driver's errors: all of them mean the store could not do what it was asked."""

    def connect(self) -> Any:
        """Return a new DB-API connection in autocommit mode, ready for the dialect."""
        ...


class Connections:
    """This thread's connection to a connector's database, opened on first use."""

    def __init__(
        self, connector: Connector, dead_timeout: float, clock: Clock = system_clock
    ) -> None:
        """``clock``: what ``dead_timeout`` is counted on (the store's)."""
        self.connector = connector
        self.clock = clock
        self.dead_timeout = dead_timeout
        self._local = threading.local()
        self._down_until = 0.0
        self._inherited: list[Any] = []  # a parent's connections, kept from garbage collection

    def cursor(self) -> Any:
        """Return this thread's cursor, connecting first if needed."""
        local = self._local
        if getattr(local, "pid", None) == os.getpid():
            return local.cursor
        if getattr(local, "connection", None) is not None:
            self._inherited.append(local.connection)
        self.refuse_while_down()
        try:
            connection = self.connector.connect()
        except self.connector.errors as error:
            self.mark_down()
            raise StoreUnavailable(f"{self.connector.location}: {error}") from error
        local.connection, local.cursor, local.pid = connection, connection.cursor(), os.getpid()
        return local.cursor

    def is_down(self) -> bool:
        """Return whether the database failed to connect within the last ``dead_timeout``."""
        return self._down_until > self.clock.monotonic()

    def mark_down(self) -> None:
        """Note a failed connect: calls fail at once for ``dead_timeout`` seconds."""
        self._down_until = self.clock.monotonic() + self.dead_timeout

    def refuse_while_down(self) -> None:
        """Raise :class:`StoreUnavailable` at once while the database is marked down."""
        if self.is_down():
            raise StoreUnavailable(
                f"{self.connector.location} is down (retrying within {self.dead_timeout:g} s)"
            )

    def execute(self, sql: str, params: Sequence[object]) -> Any:
        """Run one statement on this thread's connection and return its cursor."""
        cursor = self.cursor()
        try:
            cursor.execute(sql, params)
        except self.connector.errors as error:
            self.drop()
            raise StoreUnavailable(f"{self.connector.location}: {error}") from error
        return cursor

    def drop(self) -> None:
        """Close this thread's connection after a failure; the next call opens another."""
        local = self._local
        connection = getattr(local, "connection", None)
        ours = getattr(local, "pid", None) == os.getpid()
        local.connection = local.cursor = local.pid = None
        if connection is not None and ours:
            with contextlib.suppress(Exception):  # already broken: nothing more to do
                connection.close()

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        if getattr(self._local, "pid", None) == os.getpid():
            self.drop()
