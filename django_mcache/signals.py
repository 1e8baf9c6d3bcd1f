"""ORM signals that bump model and object tags (see :mod:`django_mcache.invalidation`).

Connected in ``AppConfig.ready`` per tracked model (``sender=``), so that
excluded models keep Django's fast deletes and pay nothing on load;
``post_init`` only for models with foreign keys, to remember them, so a change
of relation bumps the old related row too. See docs/how-to/orm-invalidation.md.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_init, post_save

from .invalidation import bump, instance_tags, related_fields
from .tags import label_of, model_tag

__all__ = ["connect", "tracked"]

DEFAULT_EXCLUDED = (
    "sessions.session",
    "admin.logentry",
    "contenttypes.contenttype",
    "auth.permission",
)
_FKS = "_mcache_related"
_CLEARED = "_mcache_cleared"


def tracked(model: Any) -> bool:
    """Return whether changes to ``model``'s rows bump tags (MCACHE_MODELS / _EXCLUDE_MODELS)."""
    label = label_of(model)
    included = getattr(settings, "MCACHE_MODELS", None)
    if included is not None and label not in {m.lower() for m in included}:
        return False
    excluded = getattr(settings, "MCACHE_EXCLUDE_MODELS", DEFAULT_EXCLUDED)
    return label not in {m.lower() for m in excluded}


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
    """Connect the receivers for every tracked model (idempotent: dispatch uids)."""
    for model in apps.get_models(include_auto_created=True):
        if model._meta.auto_created:  # an m2m through table: its changes come as m2m_changed
            m2m_changed.connect(_m2m_changed, sender=model, dispatch_uid=f"mcache_m2m_{model}")
            continue
        if not tracked(model):
            continue
        uid = f"mcache_{model._meta.label_lower}"
        post_save.connect(_saved, sender=model, dispatch_uid=f"{uid}_save")
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"{uid}_delete")
        if related_fields(model):
            post_init.connect(_remember_related, sender=model, dispatch_uid=f"{uid}_init")
    for model in apps.get_models():  # explicit through models are models of their own
        for field in model._meta.local_many_to_many:
            through = field.remote_field.through
            if not through._meta.auto_created:
                m2m_changed.connect(
                    _m2m_changed, sender=through, dispatch_uid=f"mcache_m2m_{through}"
                )
