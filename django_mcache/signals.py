"""ORM signals that bump model and object tags (see :mod:`django_mcache.invalidation`).

Connected in ``AppConfig.ready``: ``post_save``, ``post_delete`` and
``m2m_changed`` (both sides of the relation), for ``settings.MCACHE_MODELS``
("app_label.model" names; every model when unset) less
``settings.MCACHE_EXCLUDE_MODELS`` (sessions, admin log entries, content types
and permissions by default: they change often and no page is built from them).
``post_init`` remembers each row's foreign keys, so a change of relation bumps
the old related row as well as the new one.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_init, post_save

from .invalidation import bump, instance_tags
from .tags import model_tag

__all__ = ["connect"]

DEFAULT_EXCLUDED = (
    "sessions.session",
    "admin.logentry",
    "contenttypes.contenttype",
    "auth.permission",
)
_FKS = "_mcache_related"


def _label(model: Any) -> str:
    meta = model._meta
    return f"{meta.app_label}.{meta.model_name}"


def _tracked(model: Any) -> bool:
    label = _label(model)
    included = getattr(settings, "MCACHE_MODELS", None)
    if included is not None and label not in {m.lower() for m in included}:
        return False
    excluded = getattr(settings, "MCACHE_EXCLUDE_MODELS", DEFAULT_EXCLUDED)
    return label not in {m.lower() for m in excluded}


def _remember_related(sender: Any, instance: Model, **kwargs: Any) -> None:
    fields = [f.attname for f in instance._meta.concrete_fields if f.many_to_one]
    if fields:
        instance.__dict__[_FKS] = {name: instance.__dict__.get(name) for name in fields}


def _saved(
    sender: Any, instance: Model, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    if raw or not _tracked(sender):
        return
    bump(instance_tags(instance, instance.__dict__.get(_FKS)), using)
    _remember_related(sender, instance)


def _deleted(sender: Any, instance: Model, using: str = "default", **kwargs: Any) -> None:
    if _tracked(sender):
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
    if action not in {"post_add", "post_remove", "post_clear"}:
        return
    tags = {model_tag(sender)} if _tracked(sender) else set()
    if _tracked(type(instance)):
        tags |= instance_tags(instance)
    if _tracked(model):
        label = _label(model)
        tags.add(model_tag(model))
        tags.update(f"obj:{label}:{pk}" for pk in pk_set or ())
    bump(tags, using)


def connect() -> None:
    """Connect the receivers (idempotent: each has a dispatch uid)."""
    post_init.connect(_remember_related, dispatch_uid="mcache_post_init")
    post_save.connect(_saved, dispatch_uid="mcache_post_save")
    post_delete.connect(_deleted, dispatch_uid="mcache_post_delete")
    m2m_changed.connect(_m2m_changed, dispatch_uid="mcache_m2m_changed")
