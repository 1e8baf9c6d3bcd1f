"""Which models' changes bump tags, and what ``depends_on=`` may therefore follow.

Every model is followed unless ``MCACHE_MODELS`` lists others or
``MCACHE_EXCLUDE_MODELS`` lists it; the ORM signals that bump the tags are connected by
the ``django_mcache`` app (``AppConfig.ready``). A ``depends_on=`` naming a model no
change bumps, or in a site without the app, would keep its value as it is after every
save, so it fails where it is written instead (:func:`check_followed`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Model

from .aliases import routes_fresh_reads

__all__ = [
    "AUTH_RELATIONS",
    "DEFAULT_EXCLUDED",
    "check_followed",
    "excluded",
    "label_of",
    "tracked",
]

DEFAULT_EXCLUDED = (
    "sessions.session",
    "admin.logentry",
    "contenttypes.contenttype",
    "auth.permission",
)
AUTH_RELATIONS = ("auth.group_permissions", "auth.user_groups", "auth.user_user_permissions")
"""Left out too unless ``FreshReadRouter`` routes reads (they depend on every tracked
model's tag): who may do what belongs in the per-visitor parts of pages, rendered for each
request, so nothing cached is taken to read these relations' tags, and following them
would cost a query on each ``add()``."""


def label_of(model: type[Model] | Model) -> str:
    """Return ``app_label.model`` of the concrete model (a proxy's rows are its model's)."""
    meta = model._meta.concrete_model._meta
    return f"{meta.app_label}.{meta.model_name}"


def tracked(model: Any) -> bool:
    """Return whether changes to ``model``'s rows bump tags (MCACHE_MODELS / _EXCLUDE_MODELS)."""
    label = label_of(model)
    included = getattr(settings, "MCACHE_MODELS", None)
    if included is not None and label not in {m.lower() for m in included}:
        return False
    return not excluded(label)


def excluded(label: str) -> bool:
    """Return whether ``label``'s changes are left out (``MCACHE_EXCLUDE_MODELS``)."""
    names = getattr(settings, "MCACHE_EXCLUDE_MODELS", None)
    if names is None:
        names = DEFAULT_EXCLUDED if routes_fresh_reads() else DEFAULT_EXCLUDED + AUTH_RELATIONS
    return label in {m.lower() for m in names}


def check_followed(owner: str, models: Iterable[type[Model]]) -> None:
    """Raise ``ImproperlyConfigured`` unless a change to each of ``models`` bumps its tags:
    ``owner``'s ``depends_on=`` would otherwise never make its value stale."""
    if not apps.is_installed("django_mcache"):
        raise ImproperlyConfigured(
            f"{owner}(depends_on=...) is made stale by the ORM signals of the django_mcache"
            " app, which is not in INSTALLED_APPS: no save would ever make it stale. Add"
            " 'django_mcache' to INSTALLED_APPS (or name tags= you invalidate yourself)."
        )
    ignored = sorted({label_of(model) for model in models if not tracked(model)})
    if ignored:
        raise ImproperlyConfigured(
            f"{owner}(depends_on=...) follows {', '.join(ignored)}, whose changes bump no tag"
            " (MCACHE_MODELS does not list it, or MCACHE_EXCLUDE_MODELS does): no save would"
            " ever make it stale. List it in MCACHE_MODELS and out of MCACHE_EXCLUDE_MODELS."
        )
