"""ORM signals that bump model and object tags (see :mod:`django_mcache.invalidation`).

Connected in ``AppConfig.ready`` per tracked model (``sender=``), so that
excluded models keep Django's fast deletes and pay nothing on load;
``post_init`` only for models with foreign keys, to remember them, so a change
of relation bumps the old related row too. ``m2m_changed`` only on the tables of
the many-to-many relations whose changes bump a tag something may read
(:func:`watched`): while a receiver listens to a relation's table, Django runs
one more query before each ``add()`` (to send the ids it adds), and a relation
nobody follows must cost what Django alone costs. Connected at start-up in
every process alike, never at a first read: a process that writes a relation
and never reads it (a task worker, a shell) must bump it all the same, and
Django gives no other hook on such a write. See docs/how-to/orm-invalidation.md.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_init, post_save

from .following import excluded, label_of, tracked
from .invalidation import bump, instance_tags, related_fields
from .tags import model_tag

__all__ = ["connect", "reconnect", "tracked", "watched"]

_FKS = "_mcache_related"
_CLEARED = "_mcache_cleared"


def watched(field: Any) -> bool:
    """Return whether changes of the many-to-many ``field``'s rows bump tags.

    They do when its table is not excluded and is tracked itself (every table is,
    when ``MCACHE_MODELS`` is unset) or one of the two models it relates is: the
    tags such a change bumps are the table's and those of its tracked ends, so a
    relation between models nobody tracks bumps nothing anyone reads.
    """
    through = field.remote_field.through
    if excluded(label_of(through)):
        return False
    return tracked(through) or tracked(field.model) or tracked(field.related_model)


def _remember_related(sender: Any, instance: Model, **kwargs: Any) -> None:
    deferred = instance.get_deferred_fields()
    instance.__dict__[_FKS] = {
        f.attname: instance.__dict__.get(f.attname)
        for f in related_fields(sender)
        if f.attname not in deferred  # unknown: only the new row gets bumped
    }


def _saved(
    sender: Any, instance: Model, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    if not raw:
        bump(instance_tags(instance, instance.__dict__.get(_FKS)), using)
        if related_fields(sender):
            _remember_related(sender, instance)


def _deleted(sender: Any, instance: Model, using: str = "default", **kwargs: Any) -> None:
    bump(instance_tags(instance, instance.__dict__.get(_FKS)), using)


def _m2m_changed(
    sender: Any,
    instance: Model,
    action: str,
    reverse: bool,
    model: Any,
    pk_set: set[Any] | None,
    using: str = "default",
    **kwargs: Any,
) -> None:
    if action == "pre_clear":  # the rows losing the relation are unknown after the clear
        instance.__dict__[_CLEARED] = _related_pks(sender, instance, model, reverse)
        return
    if action not in {"post_add", "post_remove", "post_clear"}:
        return
    if action == "post_clear":
        pk_set = instance.__dict__.pop(_CLEARED, set())
    tags = {model_tag(sender)}
    if tracked(type(instance)):
        tags |= instance_tags(instance)
    if tracked(model):
        tags.add(model_tag(model))
        tags.update(f"obj:{label_of(model)}:{pk}" for pk in pk_set or ())
    bump(tags, using)


def _related_pks(through: Any, instance: Model, model: Any, reverse: bool) -> set[Any]:
    """Return the pks of the ``model`` rows related to ``instance`` through ``through``."""
    keys = [f for f in through._meta.concrete_fields if f.is_relation and f.many_to_one]
    mine = label_of(instance)
    source = [f for f in keys if label_of(f.related_model) == mine]
    target = [f for f in keys if label_of(f.related_model) == label_of(model)]
    if len(source) != 1 or len(target) != 1 or source == target:  # a relation to the same model
        source, target = (keys[1:2], keys[0:1]) if reverse else (keys[0:1], keys[1:2])
    rows = through._default_manager.filter(**{source[0].attname: instance.pk})
    return set(rows.values_list(target[0].attname, flat=True))


def connect() -> None:
    """Connect the receivers the settings ask for and disconnect the others (idempotent:
    dispatch uids), so that ``override_settings(MCACHE_MODELS=…)`` holds as start-up does."""
    for model in apps.get_models():  # explicit through models are models of their own
        uid = f"mcache_{model._meta.label_lower}"
        wanted = tracked(model)
        remembers = wanted and bool(related_fields(model))
        _attach(post_save, _saved, model, f"{uid}_save", wanted)
        _attach(post_delete, _deleted, model, f"{uid}_delete", wanted)
        _attach(post_init, _remember_related, model, f"{uid}_init", remembers)
        for field in model._meta.local_many_to_many:
            through = field.remote_field.through  # an auto-created one's changes come only here
            uid = f"mcache_m2m_{through._meta.label_lower}"
            _attach(m2m_changed, _m2m_changed, through, uid, watched(field))


def reconnect(setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: follow a test's new MCACHE_MODELS, _EXCLUDE_MODELS
    or DATABASE_ROUTERS."""
    if setting in {"MCACHE_MODELS", "MCACHE_EXCLUDE_MODELS", "DATABASE_ROUTERS"}:
        connect()


def _attach(signal: Any, receiver: Any, sender: Any, uid: str, wanted: bool) -> None:
    if wanted:
        signal.connect(receiver, sender=sender, dispatch_uid=uid)
    else:
        signal.disconnect(sender=sender, dispatch_uid=uid)
