"""Bumping model tags when rows change, correctly around transactions.

A change is bumped twice: at write time, and again once the transaction
commits (``transaction.on_commit`` on the write's database alias; Django drops
the callbacks of a savepoint that rolls back):

* the first bump stops fresh hits on the old data at once;
* the second kills any entry that another request rebuilt, from the still
  committed old data, while the transaction was open.

A rollback leaves only the first bump, which merely costs a rebuild. What a
rollback could not undo is an entry built *inside* the writing transaction
from its uncommitted data, so while a connection's transaction has bumps
pending, ``get_or_build`` builds and returns but does not store
(:func:`may_store`, handed to the core cache as ``may_store``), as
django-cacheops does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import connections, models, transaction

from .tags import model_tag, obj_tag

__all__ = [
    "TaggedManager",
    "TaggedQuerySet",
    "bump",
    "instance_tags",
    "invalidate_model",
    "invalidate_obj",
    "may_store",
    "recent_bump",
]

_PENDING = "_mcache_bumps_pending"


def _core() -> Any:
    """Return the core cache the ORM bumps go to (``MCACHE_CACHE``, default "default")."""
    backend = caches[getattr(settings, "MCACHE_CACHE", "default")]
    return getattr(backend, "mcache", None)


_recent: dict[str, int] = {}  # tag -> when this process last bumped it (ms), for the router


def recent_bump(tag: str) -> int | None:
    """Return when this process last bumped ``tag`` (ms since the epoch), if it did."""
    return _recent.get(tag)


def bump(tags: Iterable[str], using: str = "default") -> None:
    """Bump ``tags`` now and, inside a transaction on ``using``, again after it commits."""
    tags = sorted(set(tags))
    core = _core()
    if not tags or core is None:
        return
    versions = core.invalidate(*tags)
    if len(_recent) > 65536:
        _recent.clear()
    _recent.update(versions)
    connection = connections[using]
    if _in_transaction(connection):
        setattr(connection, _PENDING, True)
        transaction.on_commit(lambda: _after_commit(core, tags, using), using=using)


def _after_commit(core: Any, tags: list[str], using: str) -> None:
    _recent.update(core.invalidate(*tags))
    connection = connections[using]
    if not _in_transaction(connection):
        setattr(connection, _PENDING, False)


def _in_transaction(connection: Any) -> bool:
    """Return whether ``connection`` is inside a transaction the application opened.

    The atomic blocks Django's ``TestCase`` wraps each test in are left out, as
    Django's own ``durable`` check does: they are never committed, so treating
    them as transactions would keep every test from caching anything.
    """
    blocks = getattr(connection, "atomic_blocks", None)
    if blocks is None:
        return connection.in_atomic_block
    return any(not getattr(block, "_from_testcase", False) for block in blocks)


def may_store() -> bool:
    """Return False while this thread's transaction has uncommitted writes that bumped tags.

    A connection whose transaction has ended (committed or rolled back) no
    longer counts, and its mark is cleared here.
    """
    for connection in connections.all(initialized_only=True):
        if getattr(connection, _PENDING, False):
            if _in_transaction(connection):
                return False
            setattr(connection, _PENDING, False)
    return True


def instance_tags(instance: models.Model, old_related: dict[str, Any] | None = None) -> set[str]:
    """Return every tag a change of ``instance`` bumps.

    Its model's and its own, what it declares (a ``cache_tags()`` method, or
    ``settings.MCACHE_MODEL_TAGS["app_label.model"](instance)``), and the object
    tags of the rows its foreign keys point at, before and after the change.
    """
    tags = {model_tag(instance), obj_tag(instance)}
    declared = getattr(instance, "cache_tags", None)
    if callable(declared):
        tags.update(declared())
    meta = instance._meta
    extra = _configured_tags().get(f"{meta.app_label}.{meta.model_name}")
    if extra is not None:
        tags.update(extra(instance))
    for field in meta.concrete_fields:
        if field.is_relation and field.many_to_one:
            related = field.related_model._meta
            label = f"{related.app_label}.{related.model_name}"
            for value in (getattr(instance, field.attname), (old_related or {}).get(field.attname)):
                if value is not None:
                    tags.add(f"obj:{label}:{value}")
    return tags


def _configured_tags() -> dict[str, Any]:
    configured = getattr(settings, "MCACHE_MODEL_TAGS", {})
    return {label.lower(): tags for label, tags in configured.items()}


def invalidate_model(model: type[models.Model] | models.Model, using: str = "default") -> None:
    """Make every entry that depends on ``model``'s rows stale (for writes without signals)."""
    bump([model_tag(model)], using)


def invalidate_obj(instance: models.Model, using: str | None = None) -> None:
    """Make every entry that depends on this row, or on its model, stale."""
    bump(instance_tags(instance), using or instance._state.db or "default")


class TaggedQuerySet(models.QuerySet):
    """A QuerySet whose bulk writes, which send no signals, bump their tags too.

    ``update()`` reads the pks it is about to change (one more query) so each
    row's object tag is bumped; ``bulk_create``/``bulk_update`` know their rows.
    """

    def update(self, **kwargs: Any) -> int:
        pks = list(self.values_list("pk", flat=True))
        count = super().update(**kwargs)
        self._bump_rows(pks)
        return count

    def bulk_create(self, objs: Iterable[models.Model], *args: Any, **kwargs: Any) -> Any:
        created = super().bulk_create(objs, *args, **kwargs)
        self._bump_rows([obj.pk for obj in created if obj.pk is not None])
        return created

    def bulk_update(self, objs: Iterable[models.Model], *args: Any, **kwargs: Any) -> Any:
        objs = list(objs)
        updated = super().bulk_update(objs, *args, **kwargs)
        self._bump_rows([obj.pk for obj in objs])
        return updated

    def _bump_rows(self, pks: list[Any]) -> None:
        meta = self.model._meta
        label = f"{meta.app_label}.{meta.model_name}"
        bump([model_tag(self.model), *(f"obj:{label}:{pk}" for pk in pks)], self.db)


TaggedManager = models.Manager.from_queryset(TaggedQuerySet)
