"""View counters of model rows, seeded from the database column that persists them."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db.models import Model

from mcache.features.counters import ViewCounter

from .aliases import counters_alias
from .tags import label_of

__all__ = ["view_counter"]

_SEED_FIELDS = ("views", "view_count")


def view_counter(
    model: type[Model] | Model, *, field: str | None = None, cache: str | None = None
) -> ViewCounter:
    """Return the view counter of ``model``'s rows (one per model and cache).

    A row's count starts from its ``field`` column: the argument, else
    ``settings.MCACHE_VIEW_COUNT_FIELDS["app_label.model"]``, else a field named
    ``views`` or ``view_count`` if the model has one, else 0. ``flush`` it from a
    periodic task to write the counts back.
    """
    concrete = model._meta.concrete_model  # a proxy model's rows are its concrete model's
    label = label_of(concrete)
    field = field or _configured_field(label) or _detected_field(concrete._meta)
    initial = None if field is None else partial(_seed, concrete, field)
    return caches[counters_alias(cache)].view_counter(f"views:{label}", initial)


def _configured_field(label: str) -> str | None:
    fields = getattr(settings, "MCACHE_VIEW_COUNT_FIELDS", {})
    return {k.lower(): v for k, v in fields.items()}.get(label)


def _detected_field(meta: Any) -> str | None:
    names = {f.name for f in meta.get_fields()}
    return next((name for name in _SEED_FIELDS if name in names), None)


def _seed(model: type[Model], field: str, pk: Any) -> int:
    """Return the row's persisted count: where its view counter starts."""
    value = model._default_manager.filter(pk=pk).values_list(field, flat=True).first()
    return int(value or 0)
