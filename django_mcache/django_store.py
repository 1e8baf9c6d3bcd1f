"""A store over another configured Django cache: ``LOCATION "alias:<name>"``.

A project already on django-redis (or any Django cache) adopts mcache's
algorithms without moving its connection settings: mcache reads and writes
through ``caches[name]``. ``add`` and ``incr`` are as atomic as that cache's;
``cas``, ``append``, ``prepend``, ``replace`` and ``decr``'s floor at 0, which Django's
cache API has no call for, are read-then-write, so two racers may both succeed (a lock released
from under its new owner, a view-counter flush counted twice): see
docs/how-to/django-setup.md.

Whole-number values are kept as Python ints in the other cache, so its own
``incr`` (atomic on Redis and memcached) counts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from mcache.errors import ConfigError, NotNumeric, StoreUnavailable, ValueTooLarge
from mcache.model.keys import validate_store_key, validated_keys
from mcache.stores import (
    NO_VALUE,
    CasToken,
    MiB,
    NoValueType,
    StoreTraits,
    check_delta,
    check_size,
)

__all__ = ["DjangoCacheStore"]

_MISSING = object()


class DjangoCacheStore:
    """The :class:`mcache.contract.store.Store` contract on top of
    ``django.core.cache.caches[alias]``."""

    def __init__(self, alias: str, *, max_value_size: int = 1 * MiB - 512) -> None:
        from django.conf import settings

        if alias not in getattr(settings, "CACHES", {}):
            raise ConfigError(f"LOCATION 'alias:{alias}' names no cache in settings.CACHES")
        if settings.CACHES[alias].get("BACKEND") == "django_mcache.backend.MCacheBackend":
            raise ConfigError(
                f"LOCATION 'alias:{alias}' names another mcache cache; point it at the"
                " Django cache whose connection settings mcache should use (e.g. django-redis)"
            )
        self.alias = alias
        self.max_value_size = max_value_size

    def __repr__(self) -> str:
        return f"DjangoCacheStore({self.alias!r})"

    @property
    def traits(self) -> StoreTraits:
        """Whole-second expiry (the other cache may count so: memcached, the database
        cache); local to this process when the other cache is Django's ``LocMemCache``."""
        from django.core.cache.backends.locmem import LocMemCache

        return StoreTraits(expiry_slack=1, process_local=isinstance(self._cache, LocMemCache))

    @property
    def _cache(self) -> Any:
        from django.core.cache import caches

        return caches[self.alias]  # Django hands each thread its own connection object

    def _call(self, operation: str, *args: Any) -> Any:
        return self._run(operation, lambda: getattr(self._cache, operation)(*args))

    def _run(self, operation: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (NotNumeric, ValueTooLarge):
            raise
        except Exception as error:  # whatever the other backend's driver raises
            raise StoreUnavailable(
                f"cache alias {self.alias!r}: {operation} failed: {error}"
            ) from error

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes | NoValueType:
        """Return the bytes stored under ``key``, or ``NO_VALUE``."""
        validate_store_key(key)
        return _from_django(self._call("get", key, _MISSING))

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist."""
        found = self._call("get_many", validated_keys(dict.fromkeys(keys)))
        values = {key: _from_django(value) for key, value in found.items()}
        return {key: value for key, value in values.items() if value is not NO_VALUE}  # type: ignore[misc]

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return the value and a token: the value itself (compared by content in ``cas``)."""
        value = self.get(key)
        return (value, None) if value is NO_VALUE else (value, value)

    # -- writes -----------------------------------------------------------------------------

    def _check_size(self, key: str, value: bytes) -> None:
        if len(value) > self.max_value_size:
            self._call("delete", key)  # as memcached: a failed update leaves no old value
        check_size(key, value, self.max_value_size)

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value``; ``ttl`` 0 keeps it forever, negative expires it at once."""
        validate_store_key(key)
        self._check_size(key, value)
        self._call("set", key, _to_django(value), _timeout(ttl))

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values; return the keys that were too large."""
        validated_keys(items)
        failed = [key for key, value in items.items() if len(value) > self.max_value_size]
        if failed:
            self._call("delete_many", failed)
        good = {k: _to_django(v) for k, v in items.items() if k not in failed}
        return failed + list(self._call("set_many", good, _timeout(ttl)) or [])

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store ``value`` only if ``key`` is absent (atomic where the other cache's is)."""
        validate_store_key(key)
        check_size(key, value, self.max_value_size)
        return bool(self._call("add", key, _to_django(value), _timeout(ttl)))

    def append(self, key: str, value: bytes) -> bool:
        """Append to an existing value (read, then write: not atomic here)."""
        return self._joined(key, lambda current: current + value)

    def prepend(self, key: str, value: bytes) -> bool:
        """Put ``value`` before an existing value (read, then write: not atomic here)."""
        return self._joined(key, lambda current: value + current)

    def _joined(self, key: str, join: Callable[[bytes], bytes]) -> bool:
        """Write ``join(current value)`` over an existing key, if it fits, for the time the
        key has left where the other cache says (django-redis's ``ttl``), else without one."""
        current = self.get(key)
        if current is NO_VALUE:
            return False
        joined = join(current)  # type: ignore[arg-type]
        if len(joined) > self.max_value_size:
            return False
        self.set(key, joined, self._time_left(key))
        return True

    def _time_left(self, key: str) -> int:
        """Return the seconds ``key`` has left, rounded up (0: no expiry, or the other cache
        cannot tell)."""
        ttl = getattr(self._cache, "pttl", None)
        if ttl is None:
            return 0
        left_ms = self._run("pttl", lambda: ttl(key))
        return 0 if left_ms is None else max(1, -(-left_ms // 1000))

    def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store ``value`` only over an existing key (read, then write: not atomic here)."""
        validate_store_key(key)
        exists = self._call("has_key", key)
        self._check_size(key, value)
        if not exists:
            return False
        self.set(key, value, ttl)
        return True

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta`` with the other cache's own ``incr``; ``None`` when missing."""
        validate_store_key(key)
        check_delta(delta)
        return self._counted(key, delta)

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Subtract ``delta``, flooring at 0 as memcached does (the floor is read-then-write)."""
        validate_store_key(key)
        check_delta(delta)
        value = self._counted(key, -delta)
        if value is not None and value < 0:
            self._call("set", key, 0, None)
            return 0
        return value

    def _counted(self, key: str, delta: int) -> int | None:
        """Return the other cache's ``incr``, or tell its failure apart by reading the key."""
        try:
            counted = int(self._cache.incr(key, delta))
            if counted < _EXACT_IN_LUA:
                return counted
            # django-redis counts in a Lua script, whose numbers are doubles: a count this
            # large (a tag version) comes back rounded, though Redis stored it exactly.
            exact = _from_django(self._call("get", key, _MISSING))
            return counted if exact is NO_VALUE else int(exact)
        except ValueError:  # Django's signal for a missing key; some drivers' for non-numbers
            error = None
        except Exception as raised:
            error = raised
        current = self._call("get", key, _MISSING)
        if current is _MISSING:
            return None
        if error is None or not isinstance(current, int):
            raise NotNumeric(f"{key!r} does not hold a whole number") from error
        raise StoreUnavailable(f"cache alias {self.alias!r}: incr failed: {error}") from error

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Write (or, with a negative ``ttl``, delete) only if the value is still ``token``."""
        if token is None or self.get(key) != token:
            return False
        if ttl < 0:
            return bool(self._call("delete", key))
        self.set(key, value, ttl)
        return True

    def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` when it existed."""
        validate_store_key(key)
        return bool(self._call("delete", key))

    def delete_many(self, keys: Iterable[str]) -> None:
        """Remove several keys."""
        self._call("delete_many", validated_keys(keys))

    def touch(self, key: str, ttl: int) -> bool:
        """Give ``key`` a new TTL; ``False`` when it is missing."""
        validate_store_key(key)
        return bool(self._call("touch", key, _timeout(ttl)))

    def flush(self) -> None:
        """Clear the other cache (all of it, as its own ``clear`` does)."""
        self._call("clear")

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return the server's statistics where the other cache is on Redis, else its class
        (other backends offer no statistics call)."""
        client = _redis_client(self._cache)
        if client is None:
            return {f"alias:{self.alias}": {"backend": type(self._cache).__qualname__}}
        from mcache.stores.redis.store import info_stats

        return info_stats(client, partial(self._run, "stats"))

    def close(self) -> None:
        """Nothing to release: Django owns the other cache's connections."""


def _timeout(ttl: int) -> float | None:
    """Map a store TTL to a Django timeout: 0 keeps forever, negative expires at once."""
    if ttl == 0:
        return None
    return 0 if ttl < 0 else ttl


_EXACT_IN_LUA = 1 << 53
"""Counts from here on are not exact as a Lua number (a double)."""


def _to_django(value: bytes) -> object:
    """Keep canonical decimal bytes as an int, so the other cache's ``incr`` can count them
    (up to 2**63, which every backend's counter holds)."""
    if (
        value.isdigit()
        and len(value) <= 19
        and (value == b"0" or not value.startswith(b"0"))
        and int(value) < 1 << 63
    ):
        return int(value)
    return bytes(value)


def _from_django(value: object) -> bytes | NoValueType:
    if isinstance(value, bytes):
        return value
    if type(value) is int:
        return b"%d" % value
    return NO_VALUE  # a miss, or something the application stored there itself


def _redis_client(cache: Any) -> Any:
    """Return the redis-py client behind django-redis or Django's RedisCache, if that is it."""
    for get_client in (
        getattr(getattr(cache, "client", None), "get_client", None),  # django-redis
        getattr(getattr(cache, "_cache", None), "get_client", None),  # django.core RedisCache
    ):
        if get_client is not None:
            try:
                client = get_client(write=False)
            except TypeError:
                client = get_client()
            if hasattr(client, "info"):
                return client
    return None
