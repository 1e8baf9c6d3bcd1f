"""``FreshReadSession``: SQLAlchemy reads from the replica, except where only the primary is right.

Replica-lag routing (``docs/how-to/read-replicas.md``) for SQLAlchemy sites, the twin of Django's
:class:`django_mcache.routers.FreshReadRouter`. With ``MCACHE_REPLICA_BIND``
(the replica: an ``Engine`` or a database URL) in the app's config, a session
made with ``sessionmaker(primary_engine, class_=FreshReadSession)`` sends a
``SELECT`` to the replica unless

- a cache rebuild is under way that a tag bumped within
  ``MCACHE_REPLICATION_LAG`` seconds set off (:func:`mcache.read_primary`):
  the entry must not be rebuilt from a replica that has not replayed the
  change yet;
- the model it reads changed within the lag (its ``model:<table>`` tag, as
  :func:`flask_mcache.sqlalchemy.watch` bumps it): the request after a form
  post finds the row the post wrote;
- this session wrote in its current transaction (read your own writes).

Everything else (flushes, ``INSERT``/``UPDATE``/``DELETE``, ``text()`` whose
nature cannot be told) goes to the session's own bind, the primary. Outside
an app context, or in an app without ``MCACHE_REPLICA_BIND``, it is a plain
session on the primary.
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

    @classmethod
    def from_config(cls, app: Flask, cache: Cache) -> FreshReads:
        """Return the app's routing from ``MCACHE_REPLICA_BIND`` (``init_app`` asks only
        when it is set).

        A value that is neither an ``Engine`` nor a database URL SQLAlchemy
        understands fails here, at ``init_app``, naming the key.
        """
        bind = app.config["MCACHE_REPLICA_BIND"]
        if isinstance(bind, Engine):
            return cls(bind, cache)
        if not isinstance(bind, str):
            raise ConfigError(
                "MCACHE_REPLICA_BIND must be the replica's Engine or database URL, such as"
                f" 'postgresql+psycopg://app@replica/shop', got {bind!r}"
            )
        try:
            return cls(create_engine(bind), cache)
        except (ArgumentError, ImportError) as error:
            raise ConfigError(
                f"MCACHE_REPLICA_BIND {bind!r} is not a database URL SQLAlchemy can use: {error}"
            ) from None


def fresh_reads_of(app: Flask) -> FreshReads | None:
    """Return ``app``'s replica routing, if it has one."""
    return app.extensions.get(_EXTENSION)  # type: ignore[no-any-return]


def install(app: Flask, cache: Cache) -> None:
    """Set up ``app``'s replica routing from its ``MCACHE_REPLICA_BIND`` (``init_app``)."""
    app.extensions[_EXTENSION] = FreshReads.from_config(app, cache)


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
