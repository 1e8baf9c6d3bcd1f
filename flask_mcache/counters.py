"""View counts of SQLAlchemy rows: seeded once from their column, written back in batches.

What ``django_mcache.counters`` does for Django models, for mapped classes: a row's
count lives in the cache under ``views:<table>`` and is seeded from its ``views`` (or
``view_count``, or ``MCACHE_VIEW_COUNT_FIELDS``'s) column, and ``MCache.flush_view_counts``
writes it back with one ``UPDATE`` per row viewed, not one write per view. Each read or
write uses a session of its own (from ``watch_sqlalchemy``'s target, else ``db``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, current_app

from mcache import Cache
from mcache.errors import ConfigError
from mcache.features.counters import ViewCounter

__all__ = ["flush_view_counts", "is_row", "model_view_counter", "row_ident", "use_sessions"]

SEED_COLUMNS = ("views", "view_count")
_SESSIONS = "mcache.sqlalchemy"


def is_row(obj: Any) -> bool:
    """Return whether ``obj`` is a SQLAlchemy mapped instance (or mapped class)."""
    mapper = getattr(type(obj) if not isinstance(obj, type) else obj, "__mapper__", None)
    return mapper is not None


def use_sessions(app: Flask, target: Any) -> None:
    """Read and write view counts through ``target``'s sessions (a sessionmaker, ``db``, …)."""
    app.extensions[_SESSIONS] = target


def row_ident(row: Any) -> int | str:
    """Return what identifies a saved row's count: its primary key (JSON text when composite)."""
    from sqlalchemy import inspect

    identity = inspect(row).identity
    if identity is None:
        raise ValueError(f"views of {row!r} can be counted once it is saved (it has no key yet)")
    if len(identity) == 1 and type(identity[0]) in (int, str):
        return identity[0]
    return json.dumps(list(identity), default=str)


def model_view_counter(cache: Cache, model: Any, field: str | None = None) -> ViewCounter:
    """Return the view counter of a mapped class's rows (or of the class of a row)."""
    mapper = _mapper(model)
    field = field or _field(mapper)
    initial = None if field is None else _reader(mapper, field)
    return cache.view_counter(f"views:{mapper.local_table.name}", initial)


def flush_view_counts(cache: Cache, models: tuple[Any, ...]) -> int:
    """Add the views counted since the last flush to each model's column; return rows written."""
    written = 0
    for model in models:
        mapper = _mapper(model)
        field = _field(mapper)
        if field is None:
            table = mapper.local_table.name
            raise ConfigError(
                f"flush_view_counts: {mapper.class_.__name__} has no views or view_count column;"
                f" name one with MCACHE_VIEW_COUNT_FIELDS = {{{table!r}: '<column>'}}"
            )
        counter = model_view_counter(cache, mapper.class_, field)
        written += counter.flush(_writer(mapper, field))
    return written


def _writer(mapper: Any, field: str) -> Callable[[Hashable, int], None]:
    """Return ``write_back(ident, delta)``: one UPDATE adding ``delta`` to the row's column."""
    from sqlalchemy import update

    column = mapper.columns[field]

    def write_back(ident: Hashable, delta: int) -> None:
        statement = (
            update(mapper.local_table)
            .where(*_where(mapper, ident))
            .values({column.name: column + delta})
        )
        with _session() as session, session.begin():
            session.execute(statement)

    return write_back


def _mapper(model: Any) -> Any:
    from sqlalchemy import inspect

    found = inspect(model, raiseerr=False)
    mapper = getattr(found, "mapper", None)
    if mapper is None:
        raise TypeError(f"expected a SQLAlchemy mapped class or row, got {model!r}")
    return mapper


def _field(mapper: Any) -> str | None:
    """Return the column a mapped class's counts go to: the configured one, else a seed column."""
    configured = current_app.config.get("MCACHE_VIEW_COUNT_FIELDS") or {}
    return configured.get(mapper.local_table.name) or next(
        (name for name in SEED_COLUMNS if name in mapper.columns), None
    )


def _where(mapper: Any, ident: Hashable) -> list[Any]:
    values = (
        json.loads(ident) if isinstance(ident, str) and len(mapper.primary_key) > 1 else [ident]
    )
    return [column == value for column, value in zip(mapper.primary_key, values, strict=True)]


def _reader(mapper: Any, field: str) -> Callable[[Hashable], int]:
    from sqlalchemy import select

    column = mapper.columns[field]

    def initial(ident: Hashable) -> int:
        with _session() as session:
            value = session.execute(select(column).where(*_where(mapper, ident))).scalar()
        return int(value or 0)

    return initial


@contextmanager
def _session() -> Iterator[Any]:
    """Yield a new session from the app's session source; closed (never committed) after."""
    target = current_app.extensions.get(_SESSIONS) or current_app.extensions.get("sqlalchemy")
    if target is None:
        raise ConfigError(
            "view counts of SQLAlchemy rows need a session to read and write their column:"
            " call mcache.watch_sqlalchemy(db or sessionmaker) in the app's setup"
        )
    if hasattr(target, "session") and not callable(target):  # Flask-SQLAlchemy's db
        target = target.session
    factory = getattr(target, "session_factory", target)  # a scoped_session's sessionmaker
    with factory() as session:
        yield session
