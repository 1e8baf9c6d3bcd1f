"""The plain operations of a ``Cache`` (``get``, ``set``, ``add``, ``delete``, ``incr``, …).

Each is written once, as steps (:mod:`mcache.sansio.steps`), and offered twice: called
(``get``) and awaited (``aget``, on the store's async twin where it has one,
so an ASGI view's cache calls never leave the event loop). Both follow the
cache's fail-open policy: a store failure is logged once per interval and
answered as a miss, or as a write that did not happen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from mcache.contract.store import NO_VALUE
from mcache.engine.options import TagsArg, seconds, tag_list
from mcache.errors import MCacheError, StoreUnavailable, ValueTooLarge
from mcache.model.keys import make_key
from mcache.observe.events import observed_call
from mcache.sansio.steps import Steps, StoreCall, aperform, arun_steps, perform, run_steps
from mcache.wording import counted

if TYPE_CHECKING:
    from mcache.contract.store import Store
    from mcache.engine.build import Builder
    from mcache.engine.parts import CacheParts
    from mcache.engine.reading import Reader
    from mcache.logs import FailureLog
    from mcache.memo import BoundedMemo
    from mcache.model.codec import Codec
    from mcache.model.near import NearCopy
    from mcache.model.tags import Tags
    from mcache.observe.stats import CacheStats
    from mcache.purge.sender import Purger

__all__ = ["PlainOperations"]

_NO_TAGS: list[str] = []  # read-only

T = TypeVar("T")
Key = str | tuple[Any, ...]
"""A cache key: a string, or a tuple of call parameters."""


class PlainOperations:
    """``get``/``set``/… and their ``a``-prefixed awaitable twins, for :class:`mcache.Cache`."""

    if TYPE_CHECKING:
        store: Store
        codec: Codec
        counts: CacheStats
        reader: Reader
        builder: Builder
        failures: FailureLog
        parts: CacheParts
        tags: Tags
        namespace: str
        default_ttl: int
        purger: Purger | None
        _keys: BoundedMemo[str, str]

    # -- driving, observed when something watches ---------------------------------------------

    def _run(
        self, operation: str, key: Key | None, steps: Steps[T], tags: list[str] = _NO_TAGS
    ) -> T:
        counts = self.counts
        if not counts.call_watchers:
            value = run_steps(steps, perform)
        else:
            watchers, origin, named = counts.call_watchers, counts.origin, self._named(key)
            with observed_call(watchers, origin, operation, named, tags, counts.clock):
                value = run_steps(steps, perform)
        counts.flush_if_due()  # after the call, in its driver: never inside its steps
        return value

    async def _arun(
        self, operation: str, key: Key | None, steps: Steps[T], tags: list[str] = _NO_TAGS
    ) -> T:
        counts = self.counts
        if not counts.call_watchers:
            value = await arun_steps(steps, aperform)
        else:
            watchers, origin, named = counts.call_watchers, counts.origin, self._named(key)
            with observed_call(watchers, origin, operation, named, tags, counts.clock):
                value = await arun_steps(steps, aperform)
        await counts.aflush_if_due()  # on the store's async twin: the loop never blocks
        return value

    def _named(self, key: Key | None) -> str:
        """Return the store key an observer is told of (``*`` for a call on several keys)."""
        try:
            return "*" if key is None else self._store_key(key)
        except Exception:  # the call itself will report the bad key
            return repr(key)[:80]

    # -- keys and ttls: every call's, derived the same way --------------------------------------

    def _store_key(self, key: Key) -> str:
        if type(key) is str:  # the usual key: derived once, then looked up
            return self._keys.get(key) or self._keys.remember(key, make_key(self.namespace, key))
        return make_key(self.namespace, *(key if isinstance(key, tuple) else (key,)))

    def _ttl(self, ttl: float | None) -> int:
        if ttl is None:
            return self.default_ttl
        if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
            return -1  # already expired: a set stores nothing readable, as Django's timeout=0
        return seconds(ttl, "ttl")

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: Key, default: Any = NO_VALUE) -> Any:
        """Return the cached value, or ``default`` (``NO_VALUE`` unless given) on a miss.

        An entry written by ``get_or_build`` counts while it is fresh and its
        tags are unchanged; a stale one is a miss here (only ``get_or_build``,
        which rebuilds it, may serve it stale).
        """
        return self._run("get", key, self.get_steps(key, default))

    async def aget(self, key: Key, default: Any = NO_VALUE) -> Any:
        """Await :meth:`get`."""
        return await self._arun("aget", key, self.get_steps(key, default))

    def peek(self, key: Key, default: Any = NO_VALUE, tags: TagsArg = None) -> Any:
        """:meth:`get` for a read that builds nothing when it misses: a hit counts, a miss
        does not (a HEAD answered from the page a GET stored, or sent on). ``tags``: those
        ``get_or_build`` stored the entry with; given, the entry is read as its hit reads it
        (with their versions in one round trip, or from the near cache)."""
        return self._run("get", key, self._peek_steps(key, default, tags))

    async def apeek(self, key: Key, default: Any = NO_VALUE, tags: TagsArg = None) -> Any:
        """Await :meth:`peek`."""
        return await self._arun("aget", key, self._peek_steps(key, default, tags))

    def near_copy(self, key: Key, tags: TagsArg) -> NearCopy | None:
        """Return the near tier's copy of ``key``'s entry when ``get_or_build(key,
        tags=tags)`` would hit it there (counted as a hit), else None, and always None
        without a near tier. For a reader that sends what it derives from the entry and
        keeps that with the copy (``NearCopy.derived``: the edge's answer), rather than
        copying the value on every hit as :meth:`peek` does: the copy's ``entry.value``
        is the kept value itself, never to be changed."""
        if self.parts.near is None:
            return None
        return self.builder.near_copy(self._store_key(key), tags, None)

    def _peek_steps(self, key: Key, default: Any, tags: TagsArg) -> Steps[Any]:
        if tags is None:
            return (yield from self.get_steps(key, default, count_miss=False))
        steps = self.builder.fresh_value_steps(self._store_key(key), tag_list(tags))
        value = yield from steps
        return default if value is NO_VALUE else value

    def get_steps(self, key: Key, default: Any, count_miss: bool = True) -> Steps[Any]:
        """:meth:`get`, as steps: for an adapter that composes it into steps of its own."""
        store_key = self._store_key(key)
        value = yield from self._read_steps(store_key)
        if value is not NO_VALUE:
            self.counts.add("hits", key=store_key)
            return value
        if count_miss:
            self.counts.add("misses", key=store_key)
        return default

    def _read_steps(self, store_key: str) -> Steps[Any]:
        """Return the current value under ``store_key``, or ``NO_VALUE`` (nothing counted)."""
        data = yield from self._guarded_steps("get", "get", (store_key,), NO_VALUE)
        if data is NO_VALUE:
            return NO_VALUE
        return (yield from self.reader.plain_steps(store_key, data))

    def get_many(self, keys: Iterable[Key]) -> dict[Key, Any]:
        """Return the cached values of the keys found, in one round trip per server."""
        return self._run("get_many", None, self._get_many_steps(keys))

    async def aget_many(self, keys: Iterable[Key]) -> dict[Key, Any]:
        """Await :meth:`get_many`."""
        return await self._arun("aget_many", None, self._get_many_steps(keys))

    def _get_many_steps(self, keys: Iterable[Key]) -> Steps[dict[Key, Any]]:
        by_store_key = {self._store_key(key): key for key in keys}
        found = yield from self._guarded_steps("get_many", "get_many", (list(by_store_key),), {})
        values = yield from self.reader.plain_many_steps(found)
        self.counts.add("hits", len(values))
        self.counts.add("misses", len(by_store_key) - len(values))
        return {by_store_key[store_key]: value for store_key, value in values.items()}

    # -- writes ---------------------------------------------------------------------------------

    def set(self, key: Key, value: Any, ttl: float | None = None) -> bool:
        """Cache ``value``; ``False`` when it could not be stored (logged, never raised)."""
        return self._run("set", key, self._set_steps(key, value, ttl))

    async def aset(self, key: Key, value: Any, ttl: float | None = None) -> bool:
        """Await :meth:`set`."""
        return await self._arun("aset", key, self._set_steps(key, value, ttl))

    def _set_steps(self, key: Key, value: Any, ttl: float | None) -> Steps[bool]:
        store_key = self._store_key(key)
        arguments = (store_key, self.codec.dumps(value, store_key), self._ttl(ttl))
        stored = yield from self._guarded_steps("set", "set", arguments, False, (store_key,))
        return stored is not False

    def set_many(self, items: Mapping[Key, Any], ttl: float | None = None) -> list[Key]:
        """Cache several values; return the keys that could not be stored."""
        return self._run("set_many", None, self._set_many_steps(items, ttl))

    async def aset_many(self, items: Mapping[Key, Any], ttl: float | None = None) -> list[Key]:
        """Await :meth:`set_many`."""
        return await self._arun("aset_many", None, self._set_many_steps(items, ttl))

    def _set_many_steps(self, items: Mapping[Key, Any], ttl: float | None) -> Steps[list[Key]]:
        by_store_key = {self._store_key(key): key for key in items}
        encoded = {sk: self.codec.dumps(items[k], sk) for sk, k in by_store_key.items()}
        failed = yield from self._guarded_steps(
            "set_many", "set_many", (encoded, self._ttl(ttl)), list(encoded), list(encoded)
        )
        if failed:
            self.failures.warning("store.set_many", "%s not cached", counted(len(failed), "value"))
        return [by_store_key[sk] for sk in failed]

    def add(self, key: Key, value: Any, ttl: float | None = None) -> bool:
        """Cache ``value`` only if the key is absent; ``True`` when this call stored it."""
        return self._run("add", key, self._add_steps(key, value, ttl))

    async def aadd(self, key: Key, value: Any, ttl: float | None = None) -> bool:
        """Await :meth:`add`."""
        return await self._arun("aadd", key, self._add_steps(key, value, ttl))

    def _add_steps(self, key: Key, value: Any, ttl: float | None) -> Steps[bool]:
        store_key = self._store_key(key)
        data = self.codec.dumps(value, store_key)
        seconds = self._ttl(ttl)
        arguments = (store_key, data, seconds)
        if (yield from self._guarded_steps("add", "add", arguments, False, (store_key,))):
            return True
        replace = self.builder.writer.replace_unreadable_steps(store_key, data, seconds)
        return (yield from self.parts.store_steps("add", replace, False))

    def unwrap(self, key: Key, ttl: float | None = None) -> bool:
        """Store an entry's int value plainly, so ``incr`` can count it; ``True`` if done.

        Only a fresh, untagged ``get_or_build`` entry holding an ``int`` is
        replaced, and only if it is still there (``cas``): a delete or a newer
        write since, tags the entry must keep checking, or staleness all win.
        What Django's ``get_or_set`` of a number needs.
        """
        return self._run("unwrap", key, self.unwrap_steps(key, ttl))

    async def aunwrap(self, key: Key, ttl: float | None = None) -> bool:
        """Await :meth:`unwrap`."""
        return await self._arun("aunwrap", key, self.unwrap_steps(key, ttl))

    def unwrap_steps(self, key: Key, ttl: float | None) -> Steps[bool]:
        """:meth:`unwrap`, as steps: for an adapter that composes it into steps of its own."""
        store_key, seconds = self._store_key(key), self._ttl(ttl)
        try:
            unwrap = self.builder.writer.unwrap_steps(store_key, seconds)
            return (yield from self.parts.store_steps("set", unwrap, False))
        finally:
            self.parts.wrote((store_key,))  # after the write: a read racing it keeps nothing

    def delete(self, key: Key) -> bool:
        """Remove a cached value; ``True`` when it existed."""
        return self._run("delete", key, self.delete_steps(key))

    async def adelete(self, key: Key) -> bool:
        """Await :meth:`delete`."""
        return await self._arun("adelete", key, self.delete_steps(key))

    def delete_steps(self, key: Key) -> Steps[bool]:
        """:meth:`delete`, as steps: for a driver of its own (a simulation's scheduler)."""
        arguments = (self._store_key(key),)
        return (yield from self._guarded_steps("delete", "delete", arguments, False, arguments))

    def delete_many(self, keys: Iterable[Key]) -> None:
        """Remove several cached values."""
        self._run("delete_many", None, self._delete_many_steps(keys))

    async def adelete_many(self, keys: Iterable[Key]) -> None:
        """Await :meth:`delete_many`."""
        await self._arun("adelete_many", None, self._delete_many_steps(keys))

    def _delete_many_steps(self, keys: Iterable[Key]) -> Steps[None]:
        store_keys = [self._store_key(key) for key in keys]
        arguments = (store_keys,)
        yield from self._guarded_steps("delete_many", "delete_many", arguments, None, store_keys)

    def incr(self, key: Key, delta: int = 1) -> int | None:
        """Add ``delta`` (negative subtracts, flooring at 0) to a cached int; ``None`` when missing.

        The key must hold an ``int`` set through this cache (stored as decimal text),
        or be missing; anything else raises :class:`~mcache.errors.NotNumeric`.
        """
        return self._run("incr", key, self._incr_steps(key, delta))

    async def aincr(self, key: Key, delta: int = 1) -> int | None:
        """Await :meth:`incr`."""
        return await self._arun("aincr", key, self._incr_steps(key, delta))

    def _incr_steps(self, key: Key, delta: int) -> Steps[int | None]:
        method = "incr" if delta >= 0 else "decr"
        arguments = (self._store_key(key), abs(delta))
        return (yield from self._guarded_steps("incr", method, arguments, None, arguments[:1]))

    def touch(self, key: Key, ttl: float | None = None) -> bool:
        """Give a cached value a new TTL; ``False`` when it is missing (or stale: see ``get``)."""
        return self._run("touch", key, self._touch_steps(key, ttl))

    async def atouch(self, key: Key, ttl: float | None = None) -> bool:
        """Await :meth:`touch`."""
        return await self._arun("atouch", key, self._touch_steps(key, ttl))

    def _touch_steps(self, key: Key, ttl: float | None) -> Steps[bool]:
        store_key, seconds = self._store_key(key), self._ttl(ttl)
        if (yield from self._read_steps(store_key)) is NO_VALUE:
            return False
        arguments = (store_key, seconds)
        return (yield from self._guarded_steps("touch", "touch", arguments, False, (store_key,)))

    def clear(self) -> bool:
        """Flush the whole store (every namespace on it), as Django's ``cache.clear()`` does;
        return whether it did (False: the store could not be reached, which is logged)."""
        return self._run("clear", None, self._clear_steps())

    async def aclear(self) -> bool:
        """Await :meth:`clear`."""
        return await self._arun("aclear", None, self._clear_steps())

    def _clear_steps(self) -> Steps[bool]:
        # a store's flush returns None; the fallback says it failed
        return (yield from self._guarded_steps("clear", "flush", (), False, None)) is not False

    def invalidate(self, *tags: str) -> dict[str, int]:
        """Bump ``tags``: every entry carrying any of them is stale from now on.

        Returns the new versions, or ``{}`` when the store could not be reached
        (logged: the caller's write must not fail because the cache is down).
        """
        return run_steps(self.invalidate_steps(tags), perform)

    async def ainvalidate(self, *tags: str) -> dict[str, int]:
        """:meth:`invalidate`, awaited on the store's async twin (no thread hop)."""
        return await arun_steps(self.invalidate_steps(tags), aperform)

    def invalidate_steps(self, tags: tuple[str, ...]) -> Steps[dict[str, int]]:
        """:meth:`invalidate`, as steps: for a driver of its own (a simulation's scheduler)."""
        try:
            return (yield from self.tags.bump_steps(tags))
        except MCacheError as error:
            self.parts.store_failed("invalidate", error)
            return {}
        finally:  # the caches in front too, even when the store is down: the data changed
            if self.purger is not None:
                self.purger.purge(self.tags.label(tag) for tag in tags)

    # -- the fail-open policy -------------------------------------------------------------------

    def _guarded_steps(
        self,
        operation: str,
        method: str,
        arguments: tuple[Any, ...],
        fallback: T,
        writes: Iterable[str] | Literal[False] | None = False,
    ) -> Steps[T]:
        """``store.<method>(*arguments)``; on a store failure, log (once per interval)
        and return ``fallback``. ``writes``: the keys it writes (None: every key), whose
        near copies go, whether it succeeded or not."""
        try:
            return (yield StoreCall(self.store, method, arguments))
        except (StoreUnavailable, ValueTooLarge) as error:
            self.parts.store_failed(operation, error)
            return fallback
        finally:
            if writes is not False:
                self.parts.wrote(writes)
