"""``FreshReadSession``: SQLAlchemy reads from the replica, except where only the primary is right.

Replica-lag routing (``docs/how-to/read-replicas.md``) for SQLAlchemy sites, the twin of Django's
:class:`django_mcache.routers.FreshReadRouter`. A ``SELECT`` goes to the replica
(``MCACHE_REPLICA_BIND``) unless a rebuild set off by a recent bump is under way
(:func:`mcache.read_primary`), its model changed within ``MCACHE_REPLICATION_LAG``
(its ``model:<table>`` tag), or this session wrote in its transaction (read your own
writes). Everything else, and everything outside an app with a replica, goes to the
session's own bind, the primary.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session
from sqlalchemy.sql import Select

from mcache import Cache, read_primary
from mcache.errors import ConfigError
from mcache.web import ChangeTimes

__all__ = ["FreshReadSession", "FreshReads", "fresh_reads_of"]

_EXTENSION = "mcache.fresh_reads"
_WROTE = "mcache_wrote_in"  # session.info: the transaction this session last wrote in


class FreshReads:
    """An app's replica and what routing needs to know of recent changes."""

    def __init__(self, replica: Engine, cache: Cache) -> None:
        self.replica = replica
        self.cache = cache
        self.changes = ChangeTimes(cache.parts.replication_lag_ms)


def fresh_reads_of(app: Flask) -> FreshReads | None:
    """Return ``app``'s replica routing, if it has one."""
    return app.extensions.get(_EXTENSION)  # type: ignore[no-any-return]


def install(app: Flask, cache: Cache) -> None:
    """Set up ``app``'s replica routing from its ``MCACHE_REPLICA_BIND`` (``init_app`` calls it
    when that is set): a value no ``Engine`` can be made of fails here, naming the key."""
    bind = app.config["MCACHE_REPLICA_BIND"]
    if not isinstance(bind, Engine | str):
        raise ConfigError(
            "MCACHE_REPLICA_BIND must be the replica's Engine or database URL, such as"
            f" 'postgresql+psycopg://app@replica/shop', got {bind!r}"
        )
    try:
        replica = bind if isinstance(bind, Engine) else create_engine(bind)
    except (ArgumentError, ImportError) as error:
        raise ConfigError(
            f"MCACHE_REPLICA_BIND {bind!r} is not a database URL SQLAlchemy can use: {error}"
        ) from None
    app.extensions[_EXTENSION] = FreshReads(replica, cache)


class FreshReadSession(Session):
    """A session on the primary (its ``bind``) whose safe reads go to the app's replica."""

    def get_bind(self, mapper: Any = None, *, clause: Any = None, **kw: Any) -> Any:
        """Return the connectable for one statement: the replica or the primary (see the module).

        SQLAlchemy's own hook, overridden as its docs show for horizontal routing.
        """
        primary = super().get_bind(mapper, clause=clause, **kw)
        routing = fresh_reads_of(current_app) if has_app_context() else None
        if routing is None:
            return primary
        transaction = self.get_transaction()
        if self._flushing:
            self.info[_WROTE] = transaction
            return primary
        if not isinstance(clause, Select) or read_primary():
            return primary
        if transaction is not None and self.info.get(_WROTE) is transaction:
            return primary  # this session's own uncommitted (or just flushed) writes
        if mapper is not None and routing.changes.changed_within_lag(
            routing.cache.tags, f"model:{mapper.local_table.name}"
        ):
            return primary
        return routing.replica
