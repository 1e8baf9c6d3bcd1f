"""Tag names for Django models: what ``depends_on=`` adds and what a model change bumps."""

from __future__ import annotations

from django.db.models import Model

__all__ = ["model_tag", "obj_tag"]


def model_tag(model: type[Model] | Model) -> str:
    """Return the tag of every entry that depends on ``model``'s rows: ``model:app.model``."""
    meta = model._meta.concrete_model._meta  # a proxy's rows are its concrete model's
    return f"model:{meta.app_label}.{meta.model_name}"


def obj_tag(instance: Model) -> str:
    """Return the tag of every entry that depends on this row: ``obj:app.model:pk``."""
    meta = instance._meta.concrete_model._meta
    return f"obj:{meta.app_label}.{meta.model_name}:{instance.pk}"
