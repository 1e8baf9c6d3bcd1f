"""mcache: dog-pile-safe caching on memcached, Redis or an in-process store.

The core imports neither Django nor Flask; the adapters live in ``django_mcache``
and ``flask_mcache``.

Every name below is imported the first time it is asked for (:func:`lazy_exports`),
so importing this package, or any module of it, from several threads at once cannot
deadlock. Type checkers read the names' types from ``__init__.pyi``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

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


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the ``__getattr__`` and ``__dir__`` of a package that offers names defined in
    its modules: each is imported from its home module (``homes``) the first time it is
    asked for, and listed (by ``dir()``, a REPL, a documentation tool) before it is.

    Why not import them in ``__init__``: CPython takes a module's import lock before its
    package's, so a thread importing ``pkg.a`` while another imports ``pkg`` (whose
    ``__init__`` imports ``pkg.a``) each hold the lock the other needs, and one gets
    ``_DeadlockError`` (CPython's bug report "__import__ is not thread-safe", 2019;
    fixed in 3.15 only). A threaded server importing lazily in its first requests
    meets it. A package that imports none of its own modules gives no such order.
    A home that is the name's own submodule (``mcache.errors``) gives the module.
    """
    module = sys.modules[package]

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        found = importlib.import_module(home)
        value = found if home == f"{package}.{name}" else getattr(found, name)
        setattr(module, name, value)  # asked once: later lookups find it as an attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(module), *homes})

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "errors": "mcache.errors",
        "Cache": "mcache.cache",
        "FakeClock": "mcache.clock",
        "SystemClock": "mcache.clock",
        "NO_VALUE": "mcache.contract.store",
        "NoValueType": "mcache.contract.store",
        "Store": "mcache.contract.store",
        "StoreTraits": "mcache.contract.store",
        "read_primary": "mcache.engine.fresh_reads",
        "Lock": "mcache.engine.lock",
        "Counter": "mcache.features.counters",
        "ViewCounter": "mcache.features.counters",
        "Memoized": "mcache.features.memoize",
        "RawKeys": "mcache.features.raw_keys",
        "OnlineCounter": "mcache.features.visitors",
        "VisitorCounter": "mcache.features.visitors",
        "Codec": "mcache.model.codec",
        "Entry": "mcache.model.entry",
        "make_key": "mcache.model.keys",
        "CallRecord": "mcache.observe.events",
        "Observer": "mcache.observe.events",
        "Origin": "mcache.observe.events",
        "Refresher": "mcache.contract.refresher",
        "ThreadPoolRefresher": "mcache.refreshers.thread",
    },
)
