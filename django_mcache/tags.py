"""Tag names for Django models: what ``depends_on=`` adds and what a model change bumps."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.db.models import Manager, Model, QuerySet

from .following import check_followed, label_of

__all__ = ["Dependencies", "DependsOn", "label_of", "model_tag", "obj_tag"]

DependsOn = type[Model] | Model | QuerySet | Manager | str | Iterable[Any] | None
"""What ``depends_on=`` takes: models, rows, querysets, ``"app_label.Model"`` strings, lists."""


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

    def __init__(self, depends_on: Any, owner: str, followed: bool = True) -> None:
        self.owner = owner
        self._tags: list[str] = []
        self._labels: list[str] = []
        self._models: list[type[Model]] = []
        self._unchecked = followed
        """Whether the models are still to be checked as followed (a command invalidating
        a model's tag by hand need not be)."""
        for item in _items(depends_on):
            if isinstance(item, str):
                self._labels.append(self._checked_label(item))
            else:
                self._tags.append(self._tag_of(item))
        if apps.ready:
            self.tags()

    def tags(self) -> tuple[str, ...]:
        """Return the tags, looking up the models named by strings the first time, and
        checking the first time that a change to each of them bumps its tags."""
        if self._labels:
            self._tags.extend(model_tag(self._model_named(label)) for label in self._labels)
            self._labels = []
        if self._unchecked and self._tags:
            check_followed(self.owner, self._models)
            self._unchecked = False
        return tuple(dict.fromkeys(self._tags))

    def _tag_of(self, item: Any) -> str:
        if isinstance(item, Model):
            if item.pk is None:
                raise TypeError(
                    f"{self.owner}: depends_on got an unsaved {type(item).__name__} (no pk yet):"
                    " only a saved row has changes to follow; pass the model instead"
                )
            self._models.append(type(item))
            return obj_tag(item)
        if isinstance(item, type) and issubclass(item, Model):
            self._models.append(item)
            return model_tag(item)
        if isinstance(item, QuerySet | Manager):
            self._models.append(item.model)
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
            model = apps.get_model(label)
        except LookupError as error:
            raise TypeError(f"{self.owner}: depends_on={label!r}: {error}") from None
        self._models.append(model)
        return model


def _items(depends_on: Any) -> list[Any]:
    """Return ``depends_on`` as a list of single items (one model is not iterated)."""
    if depends_on is None:
        return []
    if isinstance(depends_on, list | tuple | set | frozenset):
        return list(depends_on)
    return [depends_on]
