"""The PostgreSQL store: a :class:`~mcache.stores.sql.store.SqlStore` over psycopg 3.

``postgresql://user:password@host:5432/db?table=mcache`` names the database and
the table. Statements are prepared on first use (``prepare=false`` for a
pooler that cannot keep them) but planned for each call's arguments (see
``CUSTOM_PLANS``), and each carries a ``statement_timeout`` of ``timeout``
seconds, so a database that hangs fails a call instead of a page.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from mcache.errors import ConfigError
from mcache.stores.sql.dialects import Dialect, postgres

__all__ = ["DEFAULT_MAX_CONNECTIONS", "PostgresConnector"]

DEFAULT_MAX_CONNECTIONS = 10
"""Connections per event loop of the async twin when ``max_connections`` is not set: a
database's own limit (100 by default) is shared by every process of every site."""

CUSTOM_PLANS = "-c plan_cache_mode=force_custom_plan"
"""Plan each prepared statement for its arguments. A cache table starts empty, and a
generic plan cached then (a sequential scan of a few rows) would go on scanning the
table once it holds millions: 16 ms a read at 100,000 rows, seen in bench_durable."""


class PostgresConnector:
    """Opens autocommit psycopg connections to one database, for one table."""

    errors: tuple[type[BaseException], ...] = (psycopg.Error,)

    def __init__(
        self,
        url: str,
        table: str = "mcache",
        *,
        timeout: float = 2.0,
        connect_timeout: float = 2.0,
        prepare: bool = True,
        max_connections: int | None = None,
    ) -> None:
        max_connections = DEFAULT_MAX_CONNECTIONS if max_connections is None else max_connections
        if max_connections < 1:
            raise ConfigError(
                f"postgresql: max_connections must be >= 1 (connections per event loop),"
                f" got {max_connections!r}"
            )
        self.url = url
        self.dialect: Dialect = postgres(table)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.prepare = prepare
        self.max_connections = max_connections
        self.location = f"{_without_password(url)}#{table}"

    def connect(self) -> Any:
        """Return a new autocommit connection with the statement timeout set."""
        return psycopg.connect(self.url, **self._options())

    async def aconnect(self) -> Any:
        """Return a new async connection like :meth:`connect`'s, for the async twin."""
        return await psycopg.AsyncConnection.connect(self.url, **self._options())

    def _options(self) -> dict[str, Any]:
        return {
            "autocommit": True,
            "prepare_threshold": 0 if self.prepare else None,
            "connect_timeout": max(2, round(self.connect_timeout)),
            "options": f"-c statement_timeout={int(self.timeout * 1000)} {CUSTOM_PLANS}",
        }


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
