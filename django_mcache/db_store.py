"""A durable store on one of the site's databases: ``LOCATION "db:<alias>"``.

A cache that must survive restarts needs no new server: its table (``table``
option, default ``mcache``; made on first use or by ``manage.py
mcache_createtable``) lives in ``DATABASES[alias]`` (PostgreSQL or SQLite), on
connections of its own in autocommit, never the request's, whose transaction
would hide a lock or an entry from other processes until the commit.
"""

from __future__ import annotations

from typing import Any

from mcache.errors import ConfigError
from mcache.stores.sql.dialects import Dialect, postgres, sqlite

__all__ = ["DB_SCHEME", "DjangoDatabaseConnector"]

DB_SCHEME = "db:"
VENDORS = ("postgresql", "sqlite")


class DjangoDatabaseConnector:
    """Opens autocommit connections from ``DATABASES[alias]``, for one table."""

    def __init__(self, alias: str, table: str = "mcache") -> None:
        from django.db import connections
        from django.db.utils import Error

        if alias not in connections.settings:
            known = ", ".join(sorted(connections.settings)) or "none"
            raise ConfigError(
                f"LOCATION 'db:{alias}' names no database: DATABASES has {known};"
                f" write e.g. 'db:default'"
            )
        wrapper = connections[alias]
        if wrapper.vendor not in VENDORS:
            raise ConfigError(
                f"LOCATION 'db:{alias}': the database is {wrapper.vendor}; the durable store"
                " runs on PostgreSQL or SQLite (a postgresql:// or sqlite:/// LOCATION works"
                " on another server too)"
            )
        self.alias = alias
        self.vendor = wrapper.vendor
        self.dialect: Dialect = postgres(table) if self.vendor == "postgresql" else sqlite(table)
        self.errors: tuple[type[BaseException], ...] = (wrapper.Database.Error, Error)
        self.location = f"db:{alias}#{table}"

    def connect(self) -> Any:
        """Return a new driver connection, in autocommit, from the alias's settings."""
        from django.db import connections

        wrapper = connections.create_connection(self.alias)
        wrapper.ensure_connection()
        wrapper.set_autocommit(True)
        raw = wrapper.connection
        if self.vendor == "sqlite":
            from mcache.stores.sql.sqlite import prepare_connection

            prepare_connection(raw)
        return raw
