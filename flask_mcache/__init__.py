"""Flask extension for mcache: ``MCache(app)`` or ``MCache()`` + ``init_app(app)``.

``MCache`` lives in :mod:`flask_mcache.extension`, imported the first time it is
asked for, so importing this package and one of its modules from two threads at
once cannot deadlock (see :func:`mcache.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache import lazy_exports

if TYPE_CHECKING:
    from flask_mcache.extension import MCache, current_cache

__all__ = ["MCache", "current_cache"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    # current_cache: what a queued rebuild job names its cache by ("flask_mcache:current_cache")
    {"MCache": "flask_mcache.extension", "current_cache": "flask_mcache.extension"},
)
