"""Bumping model tags when rows change, correctly around transactions.

A change is bumped at write time, to stop hits on the old data at once, and
again when its transaction commits, to kill entries rebuilt meanwhile from the
still committed old data; while bumps are pending, nothing is stored
(:func:`may_store`), as django-cacheops does. See docs/how-to/orm-invalidation.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import connections, models, router, transaction
from django.db.models.base import ModelState

from mcache.logs import FailureLog

from .aliases import cache_alias
from .tags import label_of, model_tag, obj_tag

__all__ = [
    "TaggedManager",
    "TaggedQuerySet",
    "bump",
    "instance_tags",
    "invalidate_model",
    "invalidate_obj",
    "may_store",
]

_failures = FailureLog()


def _core() -> Any:
    """Return the core cache the ORM bumps go to (``MCACHE_CACHE``, default "default")."""
    return getattr(caches[cache_alias()], "mcache", None)


def _invalidate(core: Any, tags: Iterable[str]) -> None:
    core.invalidate(*tags)


def bump(tags: Iterable[str], using: str = "default") -> None:
    """Bump ``tags`` now and, inside a transaction on ``using``, again after it commits
    (in one callback per transaction: a loop of 200 saves costs one more bump, not 200)."""
    tags = set(tags)
    core = _core()
    if not tags or core is None:
        return
    _invalidate(core, tags)
    connection = connections[using]
    if not _in_transaction(connection):
        return
    pending = _pending_callback(connection)
    if pending is None:
        pending = _AfterCommit(core, using)
        transaction.on_commit(pending, using=using, robust=True)
    pending.tags |= tags


class _AfterCommit:
    """The one after-commit bump of a transaction's tags."""

    mcache_bump = True

    def __init__(self, core: Any, using: str) -> None:
        self.core, self.using, self.tags = core, using, set()

    def __call__(self) -> None:
        _invalidate(self.core, self.tags)


def _pending_callback(connection: Any) -> _AfterCommit | None:
    """Return our callback still waiting for this connection's commit, if any (Django
    drops rolled-back callbacks, so ``run_on_commit`` holds exactly what is pending)."""
    for entry in getattr(connection, "run_on_commit", ()):
        if getattr(entry[1], "mcache_bump", False):
            return entry[1]
    return None


def _in_transaction(connection: Any) -> bool:
    """Return whether ``connection`` is inside a transaction the application opened.

    ``TestCase``'s atomic blocks, never committed, are left out (as Django's
    ``durable`` check does), or no test would cache anything.
    """
    blocks = getattr(connection, "atomic_blocks", None)
    if blocks is None:
        return connection.in_atomic_block
    return any(not getattr(block, "_from_testcase", False) for block in blocks)


def may_store() -> bool:
    """Return False while this thread's transaction has uncommitted writes that bumped tags."""
    for connection in connections.all(initialized_only=True):
        if _in_transaction(connection) and _pending_callback(connection) is not None:
            return False
    return True


def related_fields(model: type[models.Model]) -> list[Any]:
    """Return the columns that point at other rows: foreign keys and one-to-ones."""
    return [
        f for f in model._meta.concrete_fields if f.is_relation and (f.many_to_one or f.one_to_one)
    ]


def instance_tags(instance: models.Model, old_related: dict[str, Any] | None = None) -> set[str]:
    """Return every tag a change of ``instance`` bumps.

    Its model's and its own (and, under multi-table inheritance, its parents'),
    what it declares (a ``cache_tags()`` method, or
    ``settings.MCACHE_MODEL_TAGS["app_label.model"](instance)``), and the object
    tags of the rows its foreign keys point at, before and after the change.
    """
    tags = {model_tag(instance), obj_tag(instance)}
    for parent in instance._meta.get_parent_list():
        tags |= {model_tag(parent), f"obj:{label_of(parent)}:{instance.pk}"}
    tags |= _declared_tags(instance)
    before = _as_it_was(instance, old_related)
    if before is not None:  # a post moved to another blog: the old blog's declared tags too
        try:
            tags |= _declared_tags(before)
        except Exception as error:  # the old row gone, a tag function assuming the new one…
            _failures.warning(
                "invalidation.old_tags",
                "declared tags of %s as it was before the change could not be computed (%r);"
                " only its current ones are bumped",
                label_of(instance),
                error,
            )
    for field in related_fields(type(instance)):
        label = label_of(field.related_model)
        for value in (instance.__dict__.get(field.attname), (old_related or {}).get(field.attname)):
            if value is not None:
                tags.add(f"obj:{label}:{value}")
    return tags


def _declared_tags(instance: models.Model) -> set[str]:
    """The tags ``instance`` declares: its ``cache_tags()`` and ``MCACHE_MODEL_TAGS``'s."""
    tags: set[str] = set()
    declared = getattr(instance, "cache_tags", None)
    if callable(declared):
        tags.update(declared())
    extra = _configured_tags().get(label_of(instance))
    if extra is not None:
        tags.update(extra(instance))
    return tags


def _as_it_was(instance: models.Model, old_related: dict[str, Any] | None) -> models.Model | None:
    """Return a copy of ``instance`` with its foreign keys as they were, or None if none moved.

    Only a key that pointed at a row and now points elsewhere counts: one that
    was empty (a row being created, a form filling it in) had no old target
    whose pages could show the row. Related rows are not carried over, so the
    copy's declared tags read the rows it used to point at (a query each).
    """
    moved = {
        attname: value
        for attname, value in (old_related or {}).items()
        if value is not None and value != instance.__dict__.get(attname)
    }
    if moved:  # rare: most saves keep their keys, and pay nothing below
        for field in instance._meta.concrete_fields:
            if field.remote_field and getattr(field.remote_field, "parent_link", False):
                moved.pop(field.attname, None)
    if not moved:
        return None
    before = type(instance).__new__(type(instance))
    before.__dict__.update(instance.__dict__)
    before._state = ModelState()
    before._state.db, before._state.adding = instance._state.db, instance._state.adding
    before.__dict__.update(moved)
    return before


def _configured_tags() -> dict[str, Any]:
    configured = getattr(settings, "MCACHE_MODEL_TAGS", {})
    return {label.lower(): tags for label, tags in configured.items()}


def invalidate_model(model: type[models.Model] | models.Model, using: str | None = None) -> None:
    """Make every entry that depends on ``model``'s rows stale (for writes without signals)."""
    bump([model_tag(model)], using or router.db_for_write(model))


def invalidate_obj(instance: models.Model, using: str | None = None) -> None:
    """Make every entry that depends on this row, or on its model, stale."""
    bump(
        instance_tags(instance), using or instance._state.db or router.db_for_write(type(instance))
    )


class TaggedQuerySet(models.QuerySet):
    """A QuerySet whose bulk writes, which send no signals, bump their tags too.

    ``update()`` reads the rows it is about to change first (one more query, and
    one after it when the model declares tags), so it bumps what saves would:
    each row's tags, its old and new related rows and declared tags.
    ``bulk_create``/``bulk_update`` know their rows.
    """

    def update(self, **kwargs: Any) -> int:
        tags = {model_tag(self.model)}
        changed = [f for f in related_fields(self.model) if f.attname in kwargs or f.name in kwargs]
        pks = []
        if _declares_tags(self.model):
            for obj in self:
                tags |= instance_tags(obj)
                pks.append(obj.pk)
        else:
            for row in self.values_list("pk", *(f.attname for f in changed)):
                tags.add(f"obj:{label_of(self.model)}:{row[0]}")
                for field, value in zip(changed, row[1:], strict=True):
                    if value is not None:
                        tags.add(f"obj:{label_of(field.related_model)}:{value}")
        count = super().update(**kwargs)
        for field in changed:
            value = kwargs.get(field.attname, kwargs.get(field.name))
            if hasattr(value, "resolve_expression"):
                continue  # F(), Case(…) (bulk_update's): known only to the database
            value = getattr(value, "pk", value)
            if value is not None:
                tags.add(f"obj:{label_of(field.related_model)}:{value}")
        if pks:  # the rows as they are now declare tags of their own (a new blog's, say)
            for obj in self.model._base_manager.using(self.db).filter(pk__in=pks):
                tags |= _declared_tags(obj)
        bump(tags, self.db)
        return count

    def bulk_create(self, objs: Iterable[models.Model], *args: Any, **kwargs: Any) -> Any:
        created = super().bulk_create(objs, *args, **kwargs)
        bump({model_tag(self.model)}.union(*(instance_tags(obj) for obj in created)), self.db)
        return created

    def bulk_update(self, objs: Iterable[models.Model], *args: Any, **kwargs: Any) -> Any:
        objs = list(objs)
        updated = super().bulk_update(objs, *args, **kwargs)
        bump({model_tag(self.model)}.union(*(instance_tags(obj) for obj in objs)), self.db)
        return updated


def _declares_tags(model: type[models.Model]) -> bool:
    return callable(getattr(model, "cache_tags", None)) or label_of(model) in _configured_tags()


TaggedManager = models.Manager.from_queryset(TaggedQuerySet)
