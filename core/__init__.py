"""mcache: dog-pile-safe caching on memcached, Redis or an in-process store.

The core imports neither Django nor Flask; the adapters live in ``django_mcache``
and ``flask_mcache``.
"""

from __future__ import annotations

from . import errors
from .api import NO_VALUE, NoValueType, Store
from .clock import FakeClock, SystemClock
from .keys import make_key

__all__ = [
    "NO_VALUE",
    "FakeClock",
    "NoValueType",
    "Store",
    "SystemClock",
    "errors",
    "make_key",
]

__version__ = "0.1.0"
