"""Tag bumps from SQLAlchemy sessions, as the Django adapter's ORM signals do.

``mcache.watch_sqlalchemy(target)`` bumps each changed row's ``model:<table>``,
``obj:<table>:<pk>`` and foreign-key tags at flush (no fresh hit on the old data) and
again at commit (nor on what another request rebuilt from it meanwhile); until the
commit, ``get_or_build`` in that thread stores nothing, since the data may yet be rolled
back. See docs/how-to/sqlalchemy-invalidation.md.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from flask import current_app
from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from mcache import Cache
from mcache.errors import ConfigError
from mcache.wording import a

from .fresh_reads import FreshReadSession

__all__ = [
    "FreshReadSession",
    "dependency_tags",
    "model_tag",
    "obj_tag",
    "row_tags",
    "watch",
    "watched_tags",
]

_TAGS = "mcache_tags"
WATCHING = "mcache.sqlalchemy_watched"
"""The app's extension key set once ``watch_sqlalchemy`` listens on one of its sessions."""
_local = threading.local()


def model_tag(cls: Any) -> str:
    """Return the tag of every entry depending on a mapped class's rows: ``model:<table>``."""
    return f"model:{inspect(cls).local_table.name}"


def obj_tag(table: str, pk: Iterable[Any]) -> str:
    """Return the tag of one row: ``obj:<table>:<pk>`` (composite keys joined by ``-``)."""
    return f"obj:{table}:{'-'.join(str(p) for p in pk)}"


def dependency_tags(depends_on: Any, owner: str) -> list[str]:
    """Return the tags ``depends_on=`` names: a mapped class's ``model_tag``, a row's
    ``obj_tag``, or those of each item of a list: the tags :func:`watch` bumps, so a
    page depending on them follows every commit that changes them (no tag typed by
    hand, none mistyped). Anything else fails at once, naming what it got."""
    items = (
        list(depends_on) if isinstance(depends_on, list | tuple | set | frozenset) else [depends_on]
    )
    tags = []
    for item in items:
        found = inspect(item, raiseerr=False)
        if found is None or isinstance(item, str):
            raise TypeError(
                f"{owner}: depends_on takes SQLAlchemy mapped classes (Product), rows"
                f" (product) or a list of them; got {type(item).__name__} {item!r}"
                + ("; for a tag by name use tags=" if isinstance(item, str) else "")
            )
        if isinstance(item, type):
            tags.append(model_tag(item))
            continue
        if found.identity is None:
            raise TypeError(
                f"{owner}: depends_on got {a(type(item).__name__)} row not yet flushed (no"
                " primary key): only a stored row has changes to follow; pass its class instead"
            )
        tags.append(obj_tag(found.mapper.local_table.name, found.identity))
    return list(dict.fromkeys(tags))


def row_tags(obj: Any) -> set[str]:
    """Return the tags a change of ``obj`` bumps: its model's, its own, its related rows'."""
    state = inspect(obj)
    mapper = state.mapper
    table = mapper.local_table.name
    tags = {f"model:{table}"}
    identity = state.identity or mapper.primary_key_from_instance(obj)
    if identity and all(p is not None for p in identity):
        tags.add(obj_tag(table, identity))
    for column in mapper.local_table.columns:
        for key in column.foreign_keys:
            attr = mapper.get_property_by_column(column).key
            history = state.attrs[attr].history
            for value in (*history.added, *history.deleted, *history.unchanged):
                if value is not None:
                    tags.add(obj_tag(key.column.table.name, [value]))
    return tags


def _pending() -> weakref.WeakSet[Session]:
    """Return this thread's sessions with flushed, uncommitted changes (a session dropped
    without ending its transaction leaves with the garbage collector, not stuck here)."""
    pending = getattr(_local, "sessions", None)
    if pending is None:
        pending = _local.sessions = weakref.WeakSet()
    return pending


def may_store() -> bool:
    """Return False while a session of this thread has flushed changes not yet committed."""
    return not len(_pending())


def watched_tags(tags: Iterable[str], owner: str) -> Iterable[str]:
    """Return the ``depends_on=`` tags of ``owner`` if the current app bumps them, else raise
    ``ConfigError``: with no session watched, no commit bumps them, and the cached value
    would stay as it is after every change (silently stale)."""
    if not current_app.extensions.get(WATCHING):
        raise ConfigError(
            f"{owner} with depends_on= follows SQLAlchemy commits, but this app watches no"
            " session, so no commit would make it stale: call"
            " mcache.watch_sqlalchemy(Session) (your sessionmaker, scoped_session or"
            " Flask-SQLAlchemy's db) when the app is set up, or name tags= you invalidate"
            " yourself"
        )
    return tags


def watch(target: Any, cache: Callable[[], Cache]) -> None:
    """Listen on ``target``'s session events; ``cache()`` returns the cache to bump."""
    if hasattr(target, "session") and not isinstance(target, Session):  # Flask-SQLAlchemy's db
        target = target.session
    if hasattr(target, "session_factory"):  # a scoped_session
        target = target.session_factory

    def after_flush(session: Session, context: Any) -> None:
        # Here new rows have their keys and every row still has its change history.
        flushed: set[str] = set()
        for obj in (*session.new, *session.dirty, *session.deleted):
            if obj in session.dirty and not session.is_modified(obj):
                continue
            flushed |= row_tags(obj)
        if flushed:
            session.info.setdefault(_TAGS, set()).update(flushed)
            cache().invalidate(*flushed)
            _pending().add(session)

    def after_commit(session: Session) -> None:
        if session.in_nested_transaction():
            return  # a savepoint released: the outer transaction is still open
        tags = session.info.pop(_TAGS, None)
        _pending().discard(session)
        if tags:
            cache().invalidate(*tags)

    def after_transaction_end(session: Session, transaction: Any) -> None:
        # The outermost transaction ended (committed, rolled back, or the session
        # closed without either). A savepoint rolling back keeps its tags: one
        # bump too many at commit is harmless, one too few is a stale page.
        if transaction.parent is None and not transaction.nested:
            session.info.pop(_TAGS, None)
            _pending().discard(session)

    event.listen(target, "after_flush", after_flush)
    event.listen(target, "after_transaction_end", after_transaction_end)
    event.listen(target, "after_commit", after_commit)
