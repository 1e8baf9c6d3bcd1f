"""mcache: dog-pile-safe caching on memcached, Redis or an in-process store.

The core imports neither Django nor Flask; the adapters live in ``django_mcache``
and ``flask_mcache``.
"""

from __future__ import annotations

from mcache import errors
from mcache.cache import Cache
from mcache.clock import FakeClock, SystemClock
from mcache.contract.store import NO_VALUE, NoValueType, Store, StoreTraits
from mcache.engine.fresh_reads import read_primary
from mcache.engine.lock import Lock
from mcache.features.counters import Counter, ViewCounter
from mcache.features.memoize import Memoized
from mcache.features.raw_keys import RawKeys
from mcache.features.visitors import OnlineCounter, VisitorCounter
from mcache.model.codec import Codec
from mcache.model.entry import Entry
from mcache.model.keys import make_key
from mcache.observe.events import CallRecord, Observer, Origin
from mcache.refreshers import Refresher, ThreadPoolRefresher

__all__ = [
    "NO_VALUE",
    "Cache",
    "CallRecord",
    "Codec",
    "Counter",
    "Entry",
    "FakeClock",
    "Lock",
    "Memoized",
    "NoValueType",
    "Observer",
    "OnlineCounter",
    "Origin",
    "RawKeys",
    "Refresher",
    "Store",
    "StoreTraits",
    "SystemClock",
    "ThreadPoolRefresher",
    "ViewCounter",
    "VisitorCounter",
    "errors",
    "make_key",
    "read_primary",
]

__version__ = "0.1.0"
