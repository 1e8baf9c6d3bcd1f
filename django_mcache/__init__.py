"""Django adapter for mcache: cache backend, cached views, template tags, ORM invalidation.

``invalidate_model`` and ``invalidate_obj`` are importable from here; they load
Django's ORM on first use, not when this package is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["invalidate_model", "invalidate_obj"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import invalidation

        return getattr(invalidation, name)
    raise AttributeError(f"module 'django_mcache' has no attribute {name!r}")
