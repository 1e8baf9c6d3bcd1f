"""What type checkers see of ``mcache``: its names live in its modules (``__init__.py``
imports each on first use, see ``lazy_exports``)."""

from collections.abc import Callable, Mapping
from typing import Any

from mcache import errors as errors
from mcache.cache import Cache as Cache
from mcache.clock import FakeClock as FakeClock
from mcache.clock import SystemClock as SystemClock
from mcache.contract.refresher import Refresher as Refresher
from mcache.contract.store import NO_VALUE as NO_VALUE
from mcache.contract.store import NoValueType as NoValueType
from mcache.contract.store import Store as Store
from mcache.contract.store import StoreTraits as StoreTraits
from mcache.engine.fresh_reads import read_primary as read_primary
from mcache.engine.lock import Lock as Lock
from mcache.features.counters import Counter as Counter
from mcache.features.counters import ViewCounter as ViewCounter
from mcache.features.memoize import Memoized as Memoized
from mcache.features.raw_keys import RawKeys as RawKeys
from mcache.features.visitors import OnlineCounter as OnlineCounter
from mcache.features.visitors import VisitorCounter as VisitorCounter
from mcache.model.codec import Codec as Codec
from mcache.model.entry import Entry as Entry
from mcache.model.keys import make_key as make_key
from mcache.observe.events import CallRecord as CallRecord
from mcache.observe.events import Observer as Observer
from mcache.observe.events import Origin as Origin
from mcache.refreshers.thread import ThreadPoolRefresher as ThreadPoolRefresher

__all__: list[str]
__version__: str

def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]: ...
