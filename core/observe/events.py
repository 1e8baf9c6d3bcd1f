"""Observers: what a ``Cache`` does, told as it happens to whatever watches it.

The stats counters (:mod:`mcache.observe.stats`) add up across processes every few
seconds; metrics exporters and a debug panel need the same events sooner and finer:
each with its key, each build around its run (so a span holds its queries), each call
with its round trips. With no :class:`Observer` attached they cost a call one truthiness
check. Key families (``page``, ``fragment``, a ``@cached`` function's name, ``other``)
keep label cardinality bounded (see docs/how-to/prometheus.md).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mcache.clock import Clock
from mcache.errors import ConfigError
from mcache.logs import FailureLog
from mcache.memo import BoundedMemo
from mcache.sansio.call_record import CURRENT_CALL, CallRecord

if TYPE_CHECKING:
    from mcache.sansio.steps import Steps

__all__ = [
    "CURRENT_CALL",
    "MAX_FUNCTION_FAMILIES",
    "BuildWatch",
    "CallRecord",
    "Observer",
    "Origin",
    "observed_call",
    "observers_named",
    "quietly",
]

MAX_FUNCTION_FAMILIES = 200
"""Function names a cache labels by their own name; later ones count as ``other``."""

_FAMILY_MEMO = 4096
_PREFIXES = (("view.", "page"), ("block.", "fragment"), ("jinja.", "fragment"))


class Origin:
    """Which cache an event came from, and the key family of one of its keys."""

    def __init__(self, namespace: str, label: str) -> None:
        self.namespace = namespace
        self.label = label
        """The cache's name in metrics: its Django alias or Flask name, else its namespace."""
        self.functions: set[str] = set()
        self.cached_functions: dict[str, Any] = {}
        """This process's ``@cached`` functions by name: what an operator may refresh."""
        self._families: BoundedMemo[str, str] = BoundedMemo(_FAMILY_MEMO)

    def add_function(self, readable: str, function: Any = None) -> None:
        """Label the entries of a ``@cached`` function (its key's readable prefix) by its name."""
        if function is not None:
            self.cached_functions[readable] = function
        if len(self.functions) < MAX_FUNCTION_FAMILIES:
            self.functions.add(readable)
            self._families.clear()

    def readable(self, key: str) -> str:
        """Return the readable part of a store key: without the namespace and the digest."""
        if self.namespace and key.startswith(self.namespace + ":"):
            key = key[len(self.namespace) + 1 :]
        return key.rpartition(":")[0]

    def family(self, key: str | None) -> str:
        """Return the key family of ``key``: page, fragment, a function's name, or other."""
        if key is None:
            return "other"
        return self._families.get(key) or self._families.remember(
            key, self._family_of(self.readable(key))
        )

    def _family_of(self, readable: str) -> str:
        for prefix, family in _PREFIXES:
            if readable.startswith(prefix):
                return family
        return readable if readable in self.functions else "other"


class Observer:
    """What watches a cache; every hook does nothing until a subclass says otherwise.

    Hooks run on the caller's thread, inside the call they report, so they
    must be quick and must not raise: an observer's error is logged and
    dropped, never the caller's.
    """

    watches_calls = True
    """Whether the observer is told of calls (:meth:`called`). One that only counts says
    False: no call is recorded for it, and a near hit keeps its one-frame path."""

    def attached(self, stats: Any) -> None:
        """The observer now watches the cache whose counters are ``stats`` (a
        :class:`mcache.observe.stats.CacheStats`: its store, its keys, its origin)."""

    def counted(self, origin: Origin, event: str, key: str | None, count: int) -> None:
        """``count`` events named as :data:`mcache.observe.stats.COUNTERS` (``hits``, …) for
        ``key``."""

    def build_started(self, origin: Origin, key: str) -> Any:
        """A build of ``key`` starts; what is returned comes back to :meth:`build_ended`."""
        return None

    def build_ended(
        self, origin: Origin, key: str, started: Any, outcome: str, seconds: float
    ) -> None:
        """The build ended: built, uncacheable, error, stale-served or cancelled."""

    def called(self, origin: Origin, call: CallRecord) -> None:
        """A call of the cache's API (``get_or_build``, ``get``, ``set``, …) returned."""

    def exiting(self) -> None:
        """The process is exiting: hand over what is held (counts not yet in the store),
        as the cache's own counters do, or a short-lived process takes them with it."""

    def flush_steps(self, stats: Any) -> Steps[None]:
        """The cache whose counters are ``stats`` flushes them: add what is held for it to
        the store, as steps on the flushing caller's driver (an async caller's awaits the
        store's twin). A failure is the observer's to log: a request never sees it."""
        yield from ()


class BuildWatch:
    """One build as its observers follow it: started, then ended once with its outcome."""

    __slots__ = ("clock", "key", "observers", "origin", "started", "tokens")

    def __init__(self, observers: list[Observer], origin: Origin, key: str, clock: Clock) -> None:
        self.observers, self.origin, self.key = list(observers), origin, key
        self.clock = clock
        self.started = clock.monotonic() if observers else 0.0  # none: nothing to time
        self.tokens = [quietly(o.build_started, origin, key) for o in observers]

    def end(self, outcome: str) -> None:
        """Tell every observer the build ended with ``outcome`` (in reverse order of starting)."""
        seconds = self.clock.monotonic() - self.started
        for observer, token in reversed(list(zip(self.observers, self.tokens, strict=True))):
            quietly(observer.build_ended, self.origin, self.key, token, outcome, seconds)


@contextmanager
def observed_call(
    observers: list[Observer],
    origin: Origin,
    operation: str,
    key: str,
    tags: list[str],
    clock: Clock,
) -> Iterator[CallRecord]:
    """Record the call run in the block and hand it to ``observers`` when it returns or
    raises, timed on ``clock`` (the cache's)."""
    record = CallRecord(operation, key, list(tags))
    token = CURRENT_CALL.set(record)
    started = clock.monotonic()
    try:
        yield record
    finally:
        record.seconds = clock.monotonic() - started
        CURRENT_CALL.reset(token)
        for observer in observers:
            quietly(observer.called, origin, record)


_FAILURES = FailureLog()


def quietly(hook: Any, *args: Any) -> Any:
    """Call an observer's hook; its failure is its own, logged once a minute, never raised."""
    try:
        return hook(*args)
    except Exception as error:
        _FAILURES.warning("observer", "a cache observer failed: %r", error)
        return None


def observers_named(metrics: Any) -> list[Observer]:
    """Return the observers ``metrics`` names: ``"prometheus"``, ``"opentelemetry"``,
    ``"families"`` (counts per key family for the dashboard's chart), observers.

    Each exporter is imported only when named, so ``import mcache`` pulls in
    neither; a missing library fails here, at start-up, naming the extra.
    """
    if isinstance(metrics, str | Observer):
        metrics = [metrics]
    try:
        named = list(metrics)
    except TypeError:
        raise ConfigError(
            f"metrics must be a list such as ['prometheus', 'opentelemetry'], got {metrics!r}"
        ) from None
    for item in named:
        if not isinstance(item, Observer) and item not in (*_EXPORTERS, "families"):
            raise ConfigError(
                f"metrics: unknown {item!r}; write 'prometheus', 'opentelemetry', 'families'"
                " or an mcache.observe.events.Observer"
            )
    return [_observer(item) for item in named]


def _observer(item: str | Observer) -> Observer:
    if isinstance(item, Observer):
        return item
    if item == "families":  # one per cache: it writes to its cache's store
        return importlib.import_module(".families", __package__).FamilyCounts()
    return _exporter(item)


_EXPORTERS = {  # name (its module and extra): its observer class, the library it needs
    "prometheus": ("PrometheusMetrics", "prometheus_client"),
    "opentelemetry": ("OpenTelemetryMetrics", "opentelemetry-api"),
}
_MADE: dict[str, Observer] = {}
_MADE_LOCK = threading.Lock()


def _exporter(name: str) -> Observer:
    """Return the process's exporter ``name``, made once: every cache shares it (a Prometheus
    registry refuses two metrics of one name), on the library's default registry or providers.
    """
    kind, library = _EXPORTERS[name]
    with _MADE_LOCK:
        if name not in _MADE:
            try:
                _MADE[name] = getattr(importlib.import_module(f".{name}", __package__), kind)()
            except ImportError as error:
                raise ConfigError(
                    f"metrics: {name!r} needs {library} ({error.name} is not installed):"
                    f' pip install "mcache[{name}]"'
                ) from None
        return _MADE[name]
