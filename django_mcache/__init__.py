"""Django adapter for mcache: cache backend, cached views, template tags, ORM invalidation.

``invalidate_model`` and ``invalidate_obj`` are importable from here; they load
Django's ORM on first use, not when this package is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache import lazy_exports

if TYPE_CHECKING:
    from django_mcache.invalidation import invalidate_model, invalidate_obj

__all__ = ["invalidate_model", "invalidate_obj"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "invalidate_model": "django_mcache.invalidation",
        "invalidate_obj": "django_mcache.invalidation",
    },
)
