"""mcache: dog-pile-safe caching on memcached, Redis or an in-process store.

The core imports neither Django nor Flask; the adapters live in ``django_mcache``
and ``flask_mcache``.
"""

from __future__ import annotations

from . import errors
from .api import NO_VALUE, NoValueType, Store
from .cache import Cache
from .clock import FakeClock, SystemClock
from .codec import Codec
from .entry import Entry
from .fresh_reads import read_primary
from .keys import make_key
from .lock import Lock
from .refreshers import Refresher, ThreadPoolRefresher

__all__ = [
    "NO_VALUE",
    "Cache",
    "Codec",
    "Entry",
    "FakeClock",
    "Lock",
    "NoValueType",
    "Refresher",
    "Store",
    "SystemClock",
    "ThreadPoolRefresher",
    "errors",
    "make_key",
    "read_primary",
]

__version__ = "0.1.0"
