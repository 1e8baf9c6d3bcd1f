"""Counters a database could not take at web load, kept in the cache's store.

Every page view as an ``UPDATE`` is a write per request; memcached's atomic
``incr`` is a microsecond on a server that is there anyway. Keys carry a class
prefix (``c`` here) so the stats report can tell them from cache entries. Counts
are only as durable as the store, which is why view counts are handed back to the
database with :meth:`ViewCounter.flush`. See docs/how-to/counters.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from mcache.contract.store import NO_VALUE
from mcache.contract.store_helpers import stored_count
from mcache.errors import StoreUnavailable
from mcache.model.keys import make_key
from mcache.sansio.steps import Steps, StoreCall, aperform, arun_steps, one, perform, run_steps

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts

__all__ = ["ROBOTS", "Counter", "ViewCounter", "counter_key", "is_robot"]

ROBOTS = ("bot", "crawler", "spider", "slurp", "curl", "wget", "python-requests")
"""User-agent substrings of visits that are not online visitors (both adapters' default)."""


def is_robot(user_agent: str, robots: Iterable[str] = ROBOTS) -> bool:
    """Return whether a visit with ``user_agent`` is a robot's; an empty agent is one too."""
    agent = user_agent.lower()
    return not agent or any(robot.lower() in agent for robot in robots)


_RETRIES = 5


def counter_key(cache: CacheParts, kind: str, *parts: object, hash_tag: bool = False) -> str:
    """Return ``{ns}:{kind}:…`` for a counter: readable, memcached-safe, namespaced.
    ``hash_tag`` braces the parts' key, so keys extending it share a Redis Cluster slot."""
    digest_key = make_key("", *parts)
    prefix = f"{cache.namespace}:{kind}" if cache.namespace else kind
    return f"{prefix}:{{{digest_key}}}" if hash_tag else f"{prefix}:{digest_key}"


def bump_steps(
    parts: CacheParts,
    key: str,
    delta: int,
    ttl: int = 0,
    seed: Callable[[], int] | None = None,
    on_seeded: Callable[[int], object] | None = None,
) -> Steps[int]:
    """Add ``delta`` to a counter, creating it (from ``seed()`` or 0) if missing.

    The incr → add → incr loop: ``incr`` never creates a key, and of several
    callers that find it missing exactly one ``add`` wins (and calls
    ``on_seeded(seed)``); the others ``incr`` again, so no first increment is
    lost. A store that is down counts nothing and answers ``seed()`` or 0, logged.
    As steps: the one algorithm both the sync and the async counters run.
    """
    store = parts.store
    if (
        delta > 0
        and seed is None
        and on_seeded is None
        and store.traits.leases
        and store.creates_counters  # type: ignore[attr-defined]
    ):
        # One command where the server can create what it counts (memcached's ``ma … N``).
        made = StoreCall(store, "incr_creating", (key, delta, ttl))
        return (yield from parts.store_steps("counter", one(made), 0))

    def attempts() -> Steps[int | None]:
        for _ in range(_RETRIES):
            if delta:
                counted = yield StoreCall(store, "incr", (key, delta))
            else:
                counted = stored_count((yield StoreCall(store, "get", (key,))))
            if counted is not None:
                return counted  # type: ignore[no-any-return]
            base = seed() if seed is not None else 0
            if (yield StoreCall(store, "add", (key, b"%d" % (base + delta), ttl))):
                if on_seeded is not None:
                    on_seeded(base)
                return base + delta
        raise StoreUnavailable(
            f"counter {key!r} vanished between incr and add {_RETRIES} times in a row"
        )

    counted = yield from parts.store_steps("counter", attempts(), None)
    if counted is None:  # nothing counted: the seed's count is the best there is
        return seed() if seed is not None else 0
    return counted


class Counter:
    """An atomic counter: ``incr`` returns the new count; a missing key counts from 0."""

    def __init__(self, parts: CacheParts, name: str, ttl: int = 0) -> None:
        self.parts = parts
        self.name = name
        self.ttl = ttl
        self.key = counter_key(parts, "c", name)

    def __repr__(self) -> str:
        return f"Counter({self.name!r})"

    def incr(self, delta: int = 1) -> int:
        """Add ``delta`` (>= 0) and return the new count."""
        return run_steps(bump_steps(self.parts, self.key, delta, self.ttl), perform)

    async def aincr(self, delta: int = 1) -> int:
        """Await :meth:`incr` (on the store's async twin: no thread)."""
        return await arun_steps(bump_steps(self.parts, self.key, delta, self.ttl), aperform)

    def decr(self, delta: int = 1) -> int:
        """Subtract ``delta``, flooring at 0, and return the new count."""
        count = self.parts.store_call("counter", lambda: self.parts.store.decr(self.key, delta), 0)
        return count or 0

    def value(self) -> int:
        """Return the count (0 when missing)."""
        data = self.parts.store_call("counter", lambda: self.parts.store.get(self.key), NO_VALUE)
        return stored_count(data) or 0

    def reset(self) -> None:
        """Forget the count."""
        self.parts.store_call("counter", lambda: self.parts.store.delete(self.key), False)


class ViewCounter:
    """View counts per object, seeded from the database, written back in batches.

    ``initial(ident)`` reads the persisted count (e.g. a ``views`` column) when the
    cache has none; ``flush(write_back)`` hands ``write_back(ident, delta)`` the
    views counted since the last flush, so the database gets one write per object
    per period instead of one per view. A flush claims each delta by moving the
    object's *baseline* with ``gets``/``cas``, so racing flushes never write the
    same views twice (docs/how-to/counters.md).
    """

    def __init__(self, parts: CacheParts, name: str, initial: Callable[[Any], int] | None = None,
                 ttl: int = 0, push_interval: float = 5.0) -> None:  # fmt: skip
        self.parts = parts
        self.name = name
        self.initial = initial or (lambda ident: 0)
        self.ttl = ttl
        self.push_interval = push_interval
        self.dirty_key = counter_key(parts, "c", name, "dirty")
        self._dirty: dict[Hashable, None] = {}  # in the order viewed (a set's is the hash's)
        self._lock = threading.Lock()
        self._next_push = 0.0

    def __repr__(self) -> str:
        return f"ViewCounter({self.name!r})"

    @staticmethod
    def ident(obj: Any) -> Hashable:
        """Return what identifies ``obj``: a model instance's pk, else the object itself."""
        pk = getattr(obj, "pk", None)
        ident = pk if pk is not None and hasattr(obj, "_meta") else obj
        _encode_ident(ident)  # refuse what could not be written back, before counting
        return ident

    def key(self, obj: Any) -> str:
        """Return the count's store key for ``obj``."""
        return counter_key(self.parts, "c", self.name, self.ident(obj))

    def _baseline_key(self, ident: Hashable) -> str:
        return counter_key(self.parts, "c", self.name, "saved", ident)

    def _set_baseline(self, ident: Hashable, value: int) -> None:
        key = self._baseline_key(ident)
        self.parts.store_call(
            "counter", lambda: self.parts.store.set(key, b"%d" % value, self.ttl), None
        )

    def _count(self, ident: Hashable, delta: int) -> int:
        counting = bump_steps(
            self.parts, self.key(ident), delta, self.ttl,
            seed=lambda: int(self.initial(ident)),
            on_seeded=lambda base: self._set_baseline(ident, base),
        )  # fmt: skip
        return run_steps(counting, perform)

    def incr(self, obj: Any, delta: int = 1) -> int:
        """Count ``delta`` views of ``obj``; return its new count."""
        ident = self.ident(obj)
        count = self._count(ident, delta)
        with self._lock:
            self._dirty[ident] = None
        if self.parts.clock.monotonic() >= self._next_push:
            self.push()
        return count

    def value(self, obj: Any) -> int:
        """Return ``obj``'s count, seeding it from ``initial`` when the cache has none."""
        return self.values([obj])[self.ident(obj)]

    def values(self, objs: Iterable[Any]) -> dict[Hashable, int]:
        """Return the counts of many objects in one ``get_many`` (seeding the missing)."""
        idents = [self.ident(obj) for obj in objs]
        keys = {self.key(ident): ident for ident in idents}
        found = self.parts.store_call("counter", lambda: self.parts.store.get_many(keys), {})
        counts: dict[Hashable, int] = {}
        for key, ident in keys.items():
            count = stored_count(found.get(key))
            counts[ident] = self._count(ident, 0) if count is None else count
        return counts

    def push(self) -> None:
        """Record this process's viewed objects in the store, for any process's flush."""
        self._next_push = self.parts.clock.monotonic() + self.push_interval
        with self._lock:
            dirty, self._dirty = self._dirty, {}
        if not dirty:
            return
        line = "".join(f"{_encode_ident(ident)}\n" for ident in dirty).encode()
        store = self.parts.store

        def record() -> bool:
            return (
                store.append(self.dirty_key, line)
                or store.add(self.dirty_key, line, 0)
                or (store.append(self.dirty_key, line))
            )

        if not self.parts.store_call("counter", record, False):
            with self._lock:  # keep them for the next push rather than lose them
                self._dirty.update(dirty)
            self.parts.failures.warning(
                "counter.dirty", "view counter %r could not record viewed objects", self.name
            )

    def pending(self) -> dict[Hashable, int]:
        """Return the views counted since the last flush, by object."""
        self.push()
        data = self.parts.store_call("counter", lambda: self.parts.store.get(self.dirty_key), b"")
        idents = _decode_idents(data if isinstance(data, bytes) else b"")
        found = {ident: self._delta(ident) for ident in dict.fromkeys(idents)}
        return {ident: delta[0] for ident, delta in found.items() if delta}

    def _delta(self, ident: Hashable) -> tuple[int, int, Any] | None:
        """Return ``(delta, count, cas token of the baseline)`` for one object, or None."""
        store = self.parts.store
        count = stored_count(store.get(self.key(ident)))
        if count is None:
            return None
        baseline, token = store.gets(self._baseline_key(ident))
        if stored_count(baseline) is None:  # evicted: the database holds the truth
            self._set_baseline(ident, int(self.initial(ident)))
            baseline, token = store.gets(self._baseline_key(ident))
        saved = stored_count(baseline)
        if saved is None or count <= saved:
            return None
        return count - saved, count, token

    def flush(self, write_back: Callable[[Hashable, int], object]) -> int:
        """Call ``write_back(ident, delta)`` for each object viewed since the last flush;
        return how many were written (one whose ``write_back`` raises keeps its delta)."""
        self.push()
        written, failed = 0, []
        for ident in dict.fromkeys(self._take_dirty()):
            outcome = self.parts.store_call(
                "counter", lambda i=ident: self._flush_one(i, write_back), None
            )
            if outcome is None:
                failed.append(ident)
            written += bool(outcome)
        if failed:
            with self._lock:
                self._dirty.update(dict.fromkeys(failed))
            self.push()
        return written

    def _flush_one(
        self, ident: Hashable, write_back: Callable[[Hashable, int], object]
    ) -> bool | None:
        """Claim one object's delta (cas on its baseline), then write it back; None on failure."""
        store = self.parts.store
        for _ in range(_RETRIES):
            found = self._delta(ident)
            if found is None:
                return False
            delta, count, token = found
            if store.cas(self._baseline_key(ident), b"%d" % count, token, self.ttl):
                break
        else:
            return None
        try:
            write_back(ident, delta)
        except Exception as error:
            store.decr(self._baseline_key(ident), delta)  # give the delta back
            self.parts.failures.warning(
                "counter.write_back", "write_back(%r) failed: %r", ident, error
            )
            return None
        return True

    def _take_dirty(self) -> list[Hashable]:
        """Empty the store's list of viewed objects atomically (gets/cas) and return it."""
        store = self.parts.store

        def take() -> list[Hashable]:
            for _ in range(_RETRIES):
                data, token = store.gets(self.dirty_key)
                if data is NO_VALUE:
                    return []
                if store.cas(self.dirty_key, b"", token, 0):
                    return _decode_idents(data)  # type: ignore[arg-type]
            return []

        return self.parts.store_call("counter", take, [])


def _encode_ident(ident: Hashable) -> str:
    if isinstance(ident, bool) or type(ident) not in (int, str) or "\n" in str(ident):
        raise TypeError(
            f"view counter objects must be identified by an int or a str, got {ident!r}"
        )
    return f"i{ident}" if isinstance(ident, int) else f"s{ident}"


def _decode_idents(data: bytes) -> list[Hashable]:
    idents: list[Hashable] = []
    for line in data.decode(errors="replace").split("\n"):
        if line[:1] == "i" and line[1:].lstrip("-").isdigit():
            idents.append(int(line[1:]))
        elif line[:1] == "s":
            idents.append(line[1:])
    return idents
