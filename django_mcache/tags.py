"""Tag names for Django models: what ``depends_on=`` adds and what a model change bumps."""

from __future__ import annotations

from django.db.models import Model

__all__ = ["model_tag"]


def model_tag(model: type[Model] | Model) -> str:
    """Return the tag every cached entry that depends on ``model``'s rows carries."""
    meta = model._meta
    return f"model:{meta.app_label}.{meta.model_name}"
