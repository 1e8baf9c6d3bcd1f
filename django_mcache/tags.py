"""Tag names for Django models: what ``depends_on=`` adds and what a model change bumps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.db.models import Manager, Model, QuerySet

__all__ = ["Dependencies", "DependsOn", "model_tag", "obj_tag"]

DependsOn = type[Model] | Model | QuerySet | Manager | str | Iterable[Any] | None
"""What ``depends_on=`` takes: models, rows, querysets, ``"app_label.Model"`` strings, lists."""


def label_of(model: type[Model] | Model) -> str:
    """Return ``app_label.model`` of the concrete model (a proxy's rows are its model's)."""
    meta = model._meta.concrete_model._meta
    return f"{meta.app_label}.{meta.model_name}"


def model_tag(model: type[Model] | Model) -> str:
    """Return the tag of every entry that depends on ``model``'s rows: ``model:app.model``."""
    return f"model:{label_of(model)}"


def obj_tag(instance: Model) -> str:
    """Return the tag of every entry that depends on this row: ``obj:app.model:pk``."""
    return f"obj:{label_of(instance)}:{instance.pk}"


class Dependencies:
    """What a ``depends_on=`` names, checked where it is written, as tag names.

    It takes a model (``Product``), an instance (``product``: that row alone), a
    queryset or manager (its model), an ``"app_label.Model"`` string, or a list
    of those; anything else fails at once, naming what it got. A string names
    a model the app registry must know, so a typo fails too instead of never
    invalidating; while the registry is still loading (a module imported by a
    model), strings are looked up at the first use instead.
    """

    def __init__(self, depends_on: Any, owner: str) -> None:
        self.owner = owner
        self._tags: list[str] = []
        self._labels: list[str] = []
        for item in _items(depends_on):
            if isinstance(item, str):
                self._labels.append(self._checked_label(item))
            else:
                self._tags.append(self._tag_of(item))
        if apps.ready:
            self.tags()

    def tags(self) -> tuple[str, ...]:
        """Return the tags, looking up the models named by strings the first time."""
        if self._labels:
            self._tags.extend(model_tag(self._model_named(label)) for label in self._labels)
            self._labels = []
        return tuple(dict.fromkeys(self._tags))

    def _tag_of(self, item: Any) -> str:
        if isinstance(item, Model):
            if item.pk is None:
                raise TypeError(
                    f"{self.owner}: depends_on got an unsaved {type(item).__name__} (no pk yet):"
                    " only a saved row has changes to follow; pass the model instead"
                )
            return obj_tag(item)
        if isinstance(item, type) and issubclass(item, Model):
            return model_tag(item)
        if isinstance(item, QuerySet | Manager):
            return model_tag(item.model)
        raise TypeError(
            f"{self.owner}: depends_on takes a model (Product), an instance (product), a"
            f" queryset, an 'app_label.Model' string or a list of them; got"
            f" {type(item).__name__} {item!r}"
        )

    def _checked_label(self, label: str) -> str:
        app_label, dot, name = label.partition(".")
        if not (app_label and dot and name) or "." in name:
            raise TypeError(
                f"{self.owner}: depends_on={label!r} is not an 'app_label.Model' string;"
                " write e.g. depends_on='catalog.Product' or pass the model itself"
            )
        return label

    def _model_named(self, label: str) -> type[Model]:
        try:
            return apps.get_model(label)
        except LookupError as error:
            raise TypeError(f"{self.owner}: depends_on={label!r}: {error}") from None


def _items(depends_on: Any) -> list[Any]:
    """Return ``depends_on`` as a list of single items (one model is not iterated)."""
    if depends_on is None:
        return []
    if isinstance(depends_on, list | tuple | set | frozenset):
        return list(depends_on)
    return [depends_on]
