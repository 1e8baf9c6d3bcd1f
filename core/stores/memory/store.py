"""The embedded store: an in-process dict with memcached's semantics.

It is the default (``memory://``) so that a project runs with no server at all,
and it behaves like memcached in every way the cache logic depends on (atomic
``add``, ``incr`` that never creates, ``cas`` tokens, expiry, an LRU bound in
bytes, the same item size limit), so nothing changes in behaviour when the
project moves to a real memcached.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcache.clock import Clock, system_clock
from mcache.contract.store import NO_VALUE, CasToken, NoValueType, StoreTraits
from mcache.contract.store_helpers import (
    MiB,
    check_delta,
    check_size,
    counted,
    twin_made_once,
)
from mcache.errors import ConfigError, NotNumeric, ValueTooLarge
from mcache.model.keys import validate_store_key, validated_keys

if TYPE_CHECKING:
    from mcache.stores.memory.async_store import AsyncMemoryStore

__all__ = ["MemoryStore"]

ITEM_OVERHEAD = 50
"""Bytes charged per item on top of key and value, close to memcached's item header."""


@dataclass(slots=True)
class _Item:
    value: bytes
    expires_at: float
    cas_unique: int


class MemoryStore:
    """Thread-safe in-process store with memcached semantics and an LRU byte bound."""

    traits = StoreTraits(process_local=True, async_twin=True, incr_many=True, tells_time_left=True)
    """Each process has its own: another process's writes and invalidations never reach it."""

    def __init__(
        self,
        *,
        max_bytes: int = 64 * MiB,
        max_value_size: int = 1 * MiB,
        clock: Clock = system_clock,
    ) -> None:
        if max_bytes <= 0:
            raise ConfigError(f"memory store: max_bytes must be > 0, got {max_bytes!r}")
        if max_value_size <= 0 or max_value_size > max_bytes:
            raise ConfigError(
                f"memory store: max_value_size must be between 1 and max_bytes ({max_bytes}),"
                f" got {max_value_size!r}"
            )
        self.max_bytes = max_bytes
        self.max_value_size = max_value_size
        self._clock = clock
        self._items: OrderedDict[str, _Item] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self._next_cas = 0
        self._started = clock.time()
        self._counts: dict[str, int] = dict.fromkeys(_COUNTER_NAMES, 0)
        self._twin: AsyncMemoryStore | None = None

    def __repr__(self) -> str:
        return f"MemoryStore(max_bytes={self.max_bytes}, max_value_size={self.max_value_size})"

    # -- internals (call with the lock held) -------------------------------------------

    def _expiry(self, ttl: int) -> float:
        return 0.0 if ttl == 0 else self._clock.time() + ttl

    def _live(self, key: str, now: float) -> _Item | None:
        item = self._items.get(key)
        if item is None:
            return None
        if item.expires_at and item.expires_at <= now:
            self._remove(key, item)
            self._counts["reclaimed"] += 1
            return None
        return item

    def _remove(self, key: str, item: _Item) -> None:
        del self._items[key]
        self._bytes -= len(key) + len(item.value) + ITEM_OVERHEAD

    def _store(self, key: str, value: bytes, expires_at: float) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= len(key) + len(old.value) + ITEM_OVERHEAD
        if expires_at and expires_at <= self._clock.time():
            return
        self._next_cas += 1
        self._items[key] = _Item(value, expires_at, self._next_cas)
        self._bytes += len(key) + len(value) + ITEM_OVERHEAD
        self._counts["total_items"] += 1
        self._evict()

    def _evict(self) -> None:
        now = self._clock.time()
        while self._bytes > self.max_bytes and self._items:
            key, item = self._items.popitem(last=False)
            self._bytes -= len(key) + len(item.value) + ITEM_OVERHEAD
            expired = item.expires_at and item.expires_at <= now
            self._counts["reclaimed" if expired else "evictions"] += 1

    def _read(self, keys: list[str], now: float) -> dict[str, bytes]:
        """Return the values of the live ``keys`` as reads do: counted (once for the batch),
        each moved to the LRU's end; an item past its time is reclaimed by :meth:`_live`."""
        found: dict[str, bytes] = {}
        items, live, to_end = self._items, self._live, self._items.move_to_end
        for key in keys:
            item = items.get(key)
            if item is not None and item.expires_at and item.expires_at <= now:
                item = live(key, now)  # past: reclaimed, counted
            if item is not None:
                to_end(key)
                found[key] = item.value
        counts = self._counts
        counts["cmd_get"] += len(keys)
        counts["get_hits"] += len(found)  # the misses are the difference (see stats)
        return found

    # -- the Store contract ---------------------------------------------------------------

    def get(self, key: str) -> bytes | NoValueType:
        """Return the value stored under ``key``, or ``NO_VALUE``."""
        validate_store_key(key)
        with self._lock:
            found = self._read([key], self._clock.time())
        return found.get(key, NO_VALUE)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist."""
        keys = validated_keys(keys)
        with self._lock:
            return self._read(keys, self._clock.time())

    def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int | None]]:
        """Return ``{key: (value, seconds left)}`` for the keys that exist (0: no expiry)."""
        keys = validated_keys(keys)
        found: dict[str, tuple[bytes, int | None]] = {}
        with self._lock:
            now = self._clock.time()
            for key in keys:
                item = self._live(key, now)
                if item is not None:
                    left = math.ceil(item.expires_at - now) if item.expires_at else 0
                    found[key] = (item.value, left)
        return found

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value``; an oversize value raises and leaves the key empty."""
        validate_store_key(key)
        with self._lock:
            self._set(key, value, ttl)

    def _set(self, key: str, value: bytes, ttl: int) -> None:
        """:meth:`set`, under the lock."""
        self._counts["cmd_set"] += 1
        if len(value) > self.max_value_size:
            old = self._items.get(key)
            if old is not None:
                self._remove(key, old)
            check_size(key, value, self.max_value_size)
        self._store(key, value, self._expiry(ttl))

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values; return the keys that were too large to store."""
        failed = []
        for key, value in items.items():
            try:
                self.set(key, value, ttl)
            except ValueTooLarge:
                failed.append(key)
        return failed

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store only if absent."""
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        with self._lock:
            self._counts["cmd_set"] += 1
            if self._live(key, self._clock.time()) is not None:
                return False
            self._store(key, value, self._expiry(ttl))
            return True

    def append(self, key: str, value: bytes) -> bool:
        """Append to an existing value, keeping its TTL."""
        return self._joined(key, lambda old: old + value)

    def prepend(self, key: str, value: bytes) -> bool:
        """Put ``value`` before an existing value, keeping its TTL."""
        return self._joined(key, lambda old: value + old)

    def _joined(self, key: str, join: Callable[[bytes], bytes]) -> bool:
        """Store ``join(old value)`` under an existing key, keeping its TTL."""
        validate_store_key(key)
        with self._lock:
            item = self._live(key, self._clock.time())
            if item is None:
                return False
            joined = join(item.value)
            check_size(key, joined, self.max_value_size)
            self._store(key, joined, item.expires_at)
            return True

    def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store ``value`` only over an existing key; an oversize value raises and leaves
        the key empty, as :meth:`set` does."""
        validate_store_key(key)
        with self._lock:
            if self._live(key, self._clock.time()) is None:
                check_size(key, value, self.max_value_size)
                return False
            self._set(key, value, ttl)
            return True

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta`` to a decimal value (wrapping at 2**64); ``None`` when missing."""
        return self._add_delta(key, delta, "incr")

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Subtract ``delta`` from a decimal value, flooring at 0; ``None`` when missing."""
        return self._add_delta(key, delta, "decr")

    def _add_delta(self, key: str, delta: int, op: str) -> int | None:
        validate_store_key(key)
        check_delta(delta)
        with self._lock:
            item = self._live(key, self._clock.time())
            if item is None:
                self._counts[f"{op}_misses"] += 1
                return None
            number = counted(item.value, delta, op)
            if number is None:
                raise NotNumeric(f"cannot {op} {key!r}: its value is not a decimal integer")
            self._counts[f"{op}_hits"] += 1
            self._store(key, str(number).encode(), item.expires_at)
            self._items.move_to_end(key)
            return number

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        """Increment several keys; ``None`` for the missing ones."""
        return {key: self.incr(key, delta) for key, delta in deltas.items()}

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return ``(value, token)``; ``(NO_VALUE, None)`` when missing."""
        validate_store_key(key)
        with self._lock:
            item = self._live(key, self._clock.time())
            if item is None:
                return NO_VALUE, None
            return item.value, item.cas_unique

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Store only if the key still carries ``token``."""
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        with self._lock:
            item = self._live(key, self._clock.time())
            if item is None:
                self._counts["cas_misses"] += 1
                return False
            if item.cas_unique != token:
                self._counts["cas_badval"] += 1
                return False
            self._counts["cas_hits"] += 1
            self._store(key, value, self._expiry(ttl))
            return True

    def delete(self, key: str) -> bool:
        """Delete ``key``; ``True`` when it existed."""
        validate_store_key(key)
        with self._lock:
            item = self._live(key, self._clock.time())
            if item is None:
                self._counts["delete_misses"] += 1
                return False
            self._remove(key, item)
            self._counts["delete_hits"] += 1
            return True

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys."""
        for key in keys:
            self.delete(key)

    def touch(self, key: str, ttl: int) -> bool:
        """Give an existing key a new TTL."""
        validate_store_key(key)
        with self._lock:
            self._counts["cmd_touch"] += 1
            item = self._live(key, self._clock.time())
            if item is None:
                self._counts["touch_misses"] += 1
                return False
            self._counts["touch_hits"] += 1
            if ttl < 0:
                self._remove(key, item)
            else:
                item.expires_at = self._expiry(ttl)
            return True

    def flush(self) -> None:
        """Remove every item."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return memcached-style statistics under the server name ``"memory"``."""
        with self._lock:
            now = self._clock.time()
            return {
                "memory": {
                    "pid": os.getpid(),
                    "uptime": int(now - self._started),
                    "time": int(now),
                    "curr_items": len(self._items),
                    "bytes": self._bytes,
                    "limit_maxbytes": self.max_bytes,
                    "item_size_max": self.max_value_size,
                    **self._counts,
                    "get_misses": self._counts["cmd_get"] - self._counts["get_hits"],
                }
            }

    def close(self) -> None:
        """Do nothing: there is no connection to release."""

    def asynchronous(self) -> AsyncMemoryStore:
        """Return this store's async twin, on the same items
        (see :mod:`mcache.stores.memory.async_store`)."""
        from mcache.stores.memory.async_store import AsyncMemoryStore

        return twin_made_once(self, lambda: AsyncMemoryStore(self))


_COUNTED = ("get", "delete", "incr", "decr", "cas", "touch")  # each with hits and misses
_COUNTER_NAMES = [
    *(f"{command}_{outcome}" for command in _COUNTED for outcome in ("hits", "misses")),
    *("cmd_get", "cmd_set", "cmd_touch", "cas_badval", "total_items", "evictions", "reclaimed"),
]
