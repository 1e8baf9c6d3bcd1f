"""The Redis store, over redis-py, with memcached's semantics.

Where Redis and memcached disagree, memcached wins, because the cache logic is
written against memcached: ``incr`` never creates a key and ``decr`` floors at 0
(small Lua scripts), ``append`` never creates either, a TTL of 0 means "no
expiry", and ``flush`` empties only this store's database.

``gets``/``cas`` compare *content*: the token is the SHA-1 of the value read, and a
Lua script writes only if the value still hashes to it. Unlike memcached's cas
unique, this cannot see a write that put back the very bytes that were read (the
ABA case); for a cache that is harmless, since the state is the one the caller
saw. Locks use compare-and-delete on their own random token, which is exact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import redis
from redis.commands.core import Script
from redis.exceptions import RedisError, ResponseError

from ..api import NO_VALUE, CasToken, NoValueType, StaleClaim
from ..errors import ConfigError, NotNumeric, StoreUnavailable, ValueTooLarge
from ..keys import validate_store_key
from . import redis_lua as lua
from .base import MiB, check_delta, too_large_message

__all__ = ["RedisStore"]

T = TypeVar("T")


class RedisStore:
    """One Redis database behind the :class:`~mcache.api.Store` contract."""

    _FAILURES: tuple[type[BaseException], ...] = (RedisError, OSError)
    """What the client raises when the server cannot answer (a cluster adds its own)."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        socket_timeout: float = 1.0,
        socket_connect_timeout: float = 0.5,
        max_connections: int | None = None,
        max_value_size: int = 1 * MiB,
        client: redis.Redis | None = None,
        replica: redis.Redis | None = None,
    ) -> None:
        """``client`` replaces the one ``url`` would make (a Sentinel's primary, say);
        ``replica`` serves plain reads (``get``, ``get_many``), everything else the client.
        """
        check_options(socket_timeout, socket_connect_timeout, max_value_size)
        self.url = url
        self.max_value_size = max_value_size
        if client is None:
            pool = redis.ConnectionPool.from_url(
                url,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_connect_timeout,
                max_connections=max_connections,
            )
            client = redis.Redis(connection_pool=pool)
        self._redis = client
        self._reader = replica or client
        self._scripts: dict[str, Script] = {}

    def _script(self, source: str) -> Script:
        """Return the Lua script ``source`` bound to the client, registered on first use."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._redis.register_script(source)
        return script

    def __repr__(self) -> str:
        return f"{type(self).__name__}({_redacted(self.url)!r})"

    def _run(self, call: Callable[[], T], key: str = "") -> T:
        try:
            return call()
        except ResponseError as error:
            if "not an integer" in str(error):
                raise NotNumeric(f"cannot incr/decr {key!r}: not a decimal integer") from error
            raise StoreUnavailable(f"redis {_redacted(self.url)}: {error}") from error
        except self._FAILURES as error:
            message = f"redis {_redacted(self.url)}: {type(error).__name__}: {error}"
            raise StoreUnavailable(message) from error

    def _check_size(self, key: str, value: bytes) -> None:
        if len(value) > self.max_value_size:
            raise ValueTooLarge(too_large_message(key, len(value), self.max_value_size))

    # -- the Store contract ---------------------------------------------------------------

    def get(self, key: str) -> bytes | NoValueType:
        """Return the value stored under ``key``, or ``NO_VALUE``."""
        return self._get_on(self._reader, key)

    def _get_on(self, client: redis.Redis, key: str) -> bytes | NoValueType:
        validate_store_key(key)
        value = self._run(lambda: client.get(key), key)
        return NO_VALUE if value is None else value

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist, in one ``MGET``."""
        keys = list(keys)
        if not keys:
            return {}
        for key in keys:
            validate_store_key(key)
        values = self._run(lambda: self._reader.mget(keys))
        return {k: v for k, v in zip(keys, values, strict=True) if v is not None}

    @property
    def claims_in_read(self) -> bool:
        """Reads claim stale entries unless they go to a replica (see :class:`ClaimsStale`)."""
        return self._reader is self._redis

    def get_many_claiming(self, keys: list[str], claim: StaleClaim) -> dict[str, bytes]:
        """``get_many`` and, for an entry in its stale window, its lock: one ``EVALSHA``."""
        for key in (*keys, claim.lock_key):
            validate_store_key(key)
        read = self._script(lua.READ_CLAIMING)
        arguments = [claim.token, claim.window_ms, claim.lock_ms]
        *values, outcome = self._run(lambda: read([*keys, claim.lock_key], arguments))
        claim.outcome = None if outcome == 0 else outcome == 1
        return {k: v for k, v in zip(keys, values, strict=True) if v is not None}

    def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int | None]]:
        """Return ``{key: (value, seconds left)}`` for the keys that exist, in one round trip."""
        keys = list(keys)
        for key in keys:
            validate_store_key(key)
        pipe = self._redis.pipeline(transaction=False)
        for key in keys:
            pipe.get(key)
            pipe.pttl(key)
        replies = self._run(pipe.execute) if keys else []
        found: dict[str, tuple[bytes, int | None]] = {}
        for key, value, left_ms in zip(keys, replies[::2], replies[1::2], strict=True):
            if value is not None:
                found[key] = (value, 0 if left_ms < 0 else max(1, -(-left_ms // 1000)))
        return found

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value``; an oversize value raises and leaves the key empty."""
        validate_store_key(key)
        if len(value) > self.max_value_size:
            self._run(lambda: self._redis.delete(key), key)
            self._check_size(key, value)
        if ttl < 0:
            self._run(lambda: self._redis.delete(key), key)
        else:
            self._run(lambda: self._redis.set(key, value, ex=ttl or None), key)

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values in one pipeline; return the keys not stored."""
        failed = [k for k, v in items.items() if len(v) > self.max_value_size]
        pipe = self._redis.pipeline(transaction=False)
        for key, value in items.items():
            validate_store_key(key)
            if key in failed or ttl < 0:
                pipe.delete(key)
            else:
                pipe.set(key, value, ex=ttl or None)
        if items:
            self._run(pipe.execute)
        return failed

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store only if absent (``SET NX``)."""
        validate_store_key(key)
        self._check_size(key, value)
        if ttl < 0:
            return not self._run(lambda: self._redis.exists(key), key)
        return bool(self._run(lambda: self._redis.set(key, value, ex=ttl or None, nx=True), key))

    def append(self, key: str, value: bytes) -> bool:
        """Append to an existing value; ``False`` when missing."""
        validate_store_key(key)
        self._check_size(key, value)
        append = self._script(lua.APPEND)
        outcome = self._run(lambda: append([key], [value, self.max_value_size]), key)
        if outcome == -1:
            raise ValueTooLarge(f"appending to {key!r} would exceed max_value_size")
        return outcome == 1

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta``; ``None`` when missing (never creates)."""
        validate_store_key(key)
        check_delta(delta)
        return self._run(lambda: self._script(lua.INCR)([key], [delta]), key)

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Subtract ``delta``, flooring at 0; ``None`` when missing."""
        validate_store_key(key)
        check_delta(delta)
        return self._run(lambda: self._script(lua.DECR)([key], [delta]), key)

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        """Increment several keys in one pipelined round trip; ``None`` for missing ones."""
        for key, delta in deltas.items():
            validate_store_key(key)
            check_delta(delta)
        pipe = self._redis.pipeline(transaction=False)
        for key, delta in deltas.items():
            self._queue_incr(pipe, key, delta)
        results = self._run(pipe.execute) if deltas else []
        return dict(zip(deltas, results, strict=True))

    def _queue_incr(self, pipe: Any, key: str, delta: int) -> None:
        self._script(lua.INCR)([key], [delta], client=pipe)

    def pfadd(self, key: str, member: bytes, ttl: int) -> bool:
        """Add ``member`` to the HyperLogLog ``key`` (TTL set on creation); True if it changed."""
        validate_store_key(key)
        return bool(self._run(lambda: self._script(lua.PFADD)([key], [member, ttl]), key))

    def pfcount(self, keys: list[str]) -> int:
        """Return the estimated number of distinct members across HyperLogLogs ``keys``."""
        for key in keys:
            validate_store_key(key)
        return int(self._run(lambda: self._redis.pfcount(*keys))) if keys else 0

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return ``(value, sha1 of value)``; ``(NO_VALUE, None)`` when missing.

        Read from the primary even with replica reads: the token must be the current value's.
        """
        value = self._get_on(self._redis, key)
        if value is NO_VALUE:
            return NO_VALUE, None
        return value, hashlib.sha1(value).hexdigest()

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Store only if the value still hashes to ``token``."""
        validate_store_key(key)
        self._check_size(key, value)
        if not isinstance(token, str):
            return False
        return bool(self._run(lambda: self._script(lua.CAS)([key], [token, value, ttl]), key))

    def delete(self, key: str) -> bool:
        """Delete ``key``; ``True`` when it existed."""
        validate_store_key(key)
        return bool(self._run(lambda: self._redis.delete(key), key))

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys in one ``DEL``."""
        keys = list(keys)
        for key in keys:
            validate_store_key(key)
        if keys:
            self._run(lambda: self._redis.delete(*keys))

    def touch(self, key: str, ttl: int) -> bool:
        """Give an existing key a new TTL (0: no expiry)."""
        validate_store_key(key)
        if ttl < 0:
            return self.delete(key)
        if ttl == 0:
            return bool(self._run(lambda: self._script(lua.PERSIST)([key]), key))
        return bool(self._run(lambda: self._redis.expire(key, ttl), key))

    def flush(self) -> None:
        """Empty this store's database (``FLUSHDB``), not the whole server."""
        self._run(self._redis.flushdb)

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return ``INFO`` mapped to memcached's field names, keyed by ``host:port/db``."""
        return info_stats(self._redis, self._run)

    def close(self) -> None:
        """Close pooled connections; the store reconnects on next use."""
        self._redis.connection_pool.disconnect()
        if self._reader is not self._redis:
            self._reader.connection_pool.disconnect()


def check_options(
    socket_timeout: float, socket_connect_timeout: float, max_value_size: int
) -> None:
    """Refuse timeouts and sizes no Redis store can work with, at start-up."""
    if socket_timeout <= 0 or socket_connect_timeout <= 0:
        raise ConfigError("redis: socket_timeout and socket_connect_timeout must be > 0")
    if max_value_size < 1:
        raise ConfigError(f"redis: max_value_size must be >= 1, got {max_value_size!r}")


def _redacted(url: str) -> str:
    """Hide a password in a URL before it reaches a log line or an error message."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}"


def info_stats(
    client: Any, run: Callable[[Callable[[], Any]], Any] = lambda call: call()
) -> dict[str, dict[str, int | float | str]]:
    """Return a redis-py client's ``INFO`` in memcached's field names, keyed by ``host:port/db``.

    Shared with the store over another Django cache, which may sit on django-redis.
    """
    info = run(client.info)
    kwargs = client.connection_pool.connection_kwargs
    db = kwargs.get("db", 0)
    name = f"{kwargs.get('host', kwargs.get('path', 'redis'))}:{kwargs.get('port', '')}/{db}"
    keyspace = info.get(f"db{db}", {})
    mapped: dict[str, int | float | str] = {
        "pid": info.get("process_id", 0),
        "uptime": info.get("uptime_in_seconds", 0),
        "version": str(info.get("redis_version", "")),
        "curr_connections": info.get("connected_clients", 0),
        "curr_items": keyspace.get("keys", 0) if isinstance(keyspace, dict) else 0,
        "bytes": info.get("used_memory", 0),
        "limit_maxbytes": info.get("maxmemory", 0),
        "get_hits": info.get("keyspace_hits", 0),
        "get_misses": info.get("keyspace_misses", 0),
        "evictions": info.get("evicted_keys", 0),
        "reclaimed": info.get("expired_keys", 0),
        "total_connections": info.get("total_connections_received", 0),
    }
    return {name: mapped}


def role_stats(
    client: Any | None, role: str, name: str, run: Callable[[Callable[[], Any]], Any]
) -> dict[str, dict[str, int | float | str]]:
    """Return one server of a topology as ``{"<name> <role>": fields + role}``.

    ``name`` stands for a server that cannot answer (or is known failed: no
    ``client``), which is reported ``dead``.
    """
    dead: dict[str, dict[str, int | float | str]] = {f"{name} {role}": {"dead": 1, "role": role}}
    if client is None:
        return dead
    try:
        fields_of = info_stats(client, run)
    except StoreUnavailable:
        return dead
    return {f"{label} {role}": {**fields, "role": role} for label, fields in fields_of.items()}
