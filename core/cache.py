"""The ``Cache`` facade: what applications and the framework adapters call.

It owns three policies so that nothing else has to:

* **Keys** — whatever the caller passes (a string, or a tuple of parameters) goes
  through :func:`mcache.make_key` under the cache's namespace, so every key is
  memcached-safe and ``1`` never collides with ``"1"``.
* **Values** — the :class:`~mcache.codec.Codec` turns them into bytes and back;
  undecodable bytes are a miss.
* **Failures** — a cache failure never fails the caller: a store that is down
  makes reads miss and drops writes, a value too large is not cached, and each
  kind of failure is logged once per interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from .api import NO_VALUE, Store
from .clock import Clock, system_clock
from .codec import Codec
from .errors import ConfigError, StoreUnavailable, ValueTooLarge
from .keys import make_key
from .logs import FailureLog
from .stores.url import from_url

__all__ = ["Cache", "Key"]

T = TypeVar("T")
Key = str | tuple[Any, ...]
"""A cache key: a string, or a tuple of call parameters."""


class Cache:
    """A namespace of cached values on one store."""

    def __init__(
        self,
        store: str | Store = "memory://",
        *,
        namespace: str = "",
        default_ttl: int = 300,
        codec: Codec | None = None,
        clock: Clock = system_clock,
        failure_log: FailureLog | None = None,
    ) -> None:
        self.store: Store = from_url(store) if isinstance(store, str) else store
        if not isinstance(self.store, Store):
            raise ConfigError(
                f"store must be a URL such as 'memory://' or a Store, got {type(store).__name__}"
            )
        make_key(namespace, "probe")  # raises InvalidKey now, not on the first request
        self.namespace = namespace
        self.default_ttl = _checked_ttl(default_ttl, "default_ttl")
        self.codec = codec or Codec()
        self.clock = clock
        self.failures = failure_log or FailureLog()

    def __repr__(self) -> str:
        return f"Cache({self.store!r}, namespace={self.namespace!r})"

    # -- keys, TTLs and the fail-open policy ----------------------------------------------

    def key(self, *parts: object, **named: object) -> str:
        """Return the store key for these parameters under this cache's namespace."""
        return make_key(self.namespace, *parts, **named)

    def _store_key(self, key: Key) -> str:
        return (
            make_key(self.namespace, *key)
            if isinstance(key, tuple)
            else make_key(self.namespace, key)
        )

    def _ttl(self, ttl: float | None) -> int:
        return self.default_ttl if ttl is None else _checked_ttl(ttl, "ttl")

    def _safely(self, operation: str, call: Callable[[], T], fallback: T) -> T:
        """Run a store call; on a store failure log once per interval and return ``fallback``."""
        try:
            return call()
        except StoreUnavailable as error:
            self.failures.warning(
                f"store.{operation}",
                "cache %s failed, carrying on without the cache: %s",
                operation,
                error,
            )
        except ValueTooLarge as error:
            self.failures.warning("store.too_large", "value not cached: %s", error)
        return fallback

    # -- plain operations -----------------------------------------------------------------

    def get(self, key: Key, default: Any = NO_VALUE) -> Any:
        """Return the cached value, or ``default`` (``NO_VALUE`` unless given) on a miss."""
        store_key = self._store_key(key)
        data = self._safely("get", lambda: self.store.get(store_key), NO_VALUE)
        if data is NO_VALUE:
            return default
        value = self.codec.loads(data, store_key)  # type: ignore[arg-type]
        return default if value is NO_VALUE else value

    def get_many(self, keys: Iterable[Key]) -> dict[Key, Any]:
        """Return the cached values of the keys found, in one round trip per server."""
        by_store_key = {self._store_key(key): key for key in keys}
        found = self._safely("get_many", lambda: self.store.get_many(list(by_store_key)), {})
        result: dict[Key, Any] = {}
        for store_key, data in found.items():
            value = self.codec.loads(data, store_key)
            if value is not NO_VALUE:
                result[by_store_key[store_key]] = value
        return result

    def set(self, key: Key, value: Any, ttl: float | None = None) -> bool:
        """Cache ``value``; ``False`` when it could not be stored (logged, never raised)."""
        store_key = self._store_key(key)
        data = self.codec.dumps(value, store_key)
        ttl_seconds = self._ttl(ttl)
        return self._safely(
            "set", lambda: self.store.set(store_key, data, ttl_seconds) or True, False
        )

    def set_many(self, items: Mapping[Key, Any], ttl: float | None = None) -> list[Key]:
        """Cache several values; return the keys that could not be stored."""
        by_store_key = {self._store_key(key): key for key in items}
        encoded = {sk: self.codec.dumps(items[k], sk) for sk, k in by_store_key.items()}
        ttl_seconds = self._ttl(ttl)
        failed = self._safely(
            "set_many", lambda: self.store.set_many(encoded, ttl_seconds), list(encoded)
        )
        if failed:
            self.failures.warning("store.set_many", "%d values not cached", len(failed))
        return [by_store_key[sk] for sk in failed]

    def add(self, key: Key, value: Any, ttl: float | None = None) -> bool:
        """Cache ``value`` only if the key is absent; ``True`` when this call stored it."""
        store_key = self._store_key(key)
        data = self.codec.dumps(value, store_key)
        ttl_seconds = self._ttl(ttl)
        return self._safely("add", lambda: self.store.add(store_key, data, ttl_seconds), False)

    def delete(self, key: Key) -> bool:
        """Remove a cached value; ``True`` when it existed."""
        store_key = self._store_key(key)
        return self._safely("delete", lambda: self.store.delete(store_key), False)

    def delete_many(self, keys: Iterable[Key]) -> None:
        """Remove several cached values."""
        store_keys = [self._store_key(key) for key in keys]
        self._safely("delete_many", lambda: self.store.delete_many(store_keys), None)

    def incr(self, key: Key, delta: int = 1) -> int | None:
        """Add ``delta`` (negative subtracts, flooring at 0) to a cached int; ``None`` when missing.

        The key must hold an ``int`` set through this cache (stored as decimal text),
        or be missing; anything else raises :class:`~mcache.errors.NotNumeric`.
        """
        store_key = self._store_key(key)
        if delta >= 0:
            return self._safely("incr", lambda: self.store.incr(store_key, delta), None)
        return self._safely("incr", lambda: self.store.decr(store_key, -delta), None)

    def touch(self, key: Key, ttl: float | None = None) -> bool:
        """Give a cached value a new TTL; ``False`` when it is missing."""
        store_key = self._store_key(key)
        ttl_seconds = self._ttl(ttl)
        return self._safely("touch", lambda: self.store.touch(store_key, ttl_seconds), False)

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return the store's per-server statistics (empty when it cannot be reached)."""
        return self._safely("stats", self.store.stats, {})


def _checked_ttl(ttl: float, name: str) -> int:
    """Return a TTL in whole seconds, rounding fractions up so nothing expires early."""
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or math.isnan(ttl):
        raise ConfigError(f"{name} must be a number of seconds, got {ttl!r}")
    if ttl < 0:
        raise ConfigError(f"{name} must be >= 0 seconds (0 means no expiry), got {ttl!r}")
    return math.ceil(ttl)
