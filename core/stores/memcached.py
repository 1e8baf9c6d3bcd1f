"""The memcached store, over pymemcache.

Each server gets a small pool of pymemcache clients (one socket each). Popping and
pushing an idle client on a ``deque`` is atomic under the GIL, so a hit costs no
lock and stays within a few percent of a bare pymemcache ``get``. Keys are spread
over servers by a ring (:mod:`mcache.ring`); multi-key calls are grouped so each
server gets one request. Driver errors are translated here, once, into
:mod:`mcache.errors`.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from pymemcache.client.base import Client
from pymemcache.exceptions import (
    MemcacheClientError,
    MemcacheError,
    MemcacheIllegalInputError,
    MemcacheServerError,
)

from ..api import NO_VALUE, CasToken, NoValueType
from ..errors import ConfigError, InvalidKey, NotNumeric, StoreUnavailable, ValueTooLarge
from ..keys import validate_store_key
from ..ring import Server, make_ring
from .base import MiB, check_delta, too_large_message

__all__ = ["MemcachedStore"]

T = TypeVar("T")
THIRTY_DAYS = 30 * 24 * 3600
ITEM_HEADROOM = 512
"""Bytes of memcached's 1 MiB item limit taken by the item header, key and flags."""


class _ServerPool:
    """Idle clients of one server."""

    __slots__ = ("idle", "max_idle", "new_client", "server")

    def __init__(self, server: Server, new_client: Callable[[], Client], max_idle: int) -> None:
        self.server = server
        self.new_client = new_client
        self.max_idle = max_idle
        self.idle: deque[Client] = deque()

    def take(self) -> Client:
        try:
            return self.idle.pop()
        except IndexError:
            return self.new_client()

    def give_back(self, client: Client) -> None:
        if len(self.idle) < self.max_idle:
            self.idle.append(client)
        else:
            client.close()

    def close(self) -> None:
        while self.idle:
            self.idle.pop().close()


class MemcachedStore:
    """A pool of memcached servers behind the :class:`~mcache.api.Store` contract."""

    def __init__(
        self,
        servers: Sequence[Server | tuple[str, int] | str],
        *,
        hashing: str = "ketama",
        connect_timeout: float = 0.5,
        timeout: float = 1.0,
        max_pool_size: int = 32,
        max_value_size: int = 1 * MiB - ITEM_HEADROOM,
    ) -> None:
        if connect_timeout <= 0 or timeout <= 0:
            raise ConfigError("memcached: connect_timeout and timeout must be > 0 seconds")
        if max_pool_size < 1:
            raise ConfigError(f"memcached: max_pool_size must be >= 1, got {max_pool_size!r}")
        if max_value_size < 1:
            raise ConfigError(f"memcached: max_value_size must be >= 1, got {max_value_size!r}")
        self.ring = make_ring([_as_server(s) for s in servers], hashing)
        self.servers = self.ring.servers
        self.max_value_size = max_value_size
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self._pools = {
            server: _ServerPool(server, self._client_factory(server), max_pool_size)
            for server in self.servers
        }
        self._single = self._pools[self.servers[0]] if len(self.servers) == 1 else None

    def __repr__(self) -> str:
        names = ",".join(f"{s.name}:{s.weight}" for s in self.servers)
        return f"MemcachedStore({names!r})"

    def _client_factory(self, server: Server) -> Callable[[], Client]:
        def new_client() -> Client:
            return Client(
                (server.host, server.port),
                connect_timeout=self.connect_timeout,
                timeout=self.timeout,
                no_delay=True,
                default_noreply=False,
                allow_unicode_keys=True,
            )

        return new_client

    def _pool_for(self, key: str) -> _ServerPool:
        return self._single or self._pools[self.ring.server_for(key)]

    def _run(self, pool: _ServerPool, call: Callable[[Client], T], key: str = "") -> T:
        client = pool.take()
        try:
            result = call(client)
        except Exception as error:
            client.close()
            translated = _translate(error, pool.server, key)
            if translated is None:
                raise
            raise translated from error
        pool.give_back(client)
        return result

    def _by_server(self, keys: Iterable[str]) -> dict[_ServerPool, list[str]]:
        groups: dict[_ServerPool, list[str]] = defaultdict(list)
        for key in keys:
            validate_store_key(key)
            groups[self._pool_for(key)].append(key)
        return groups

    def _check_size(self, key: str, value: bytes) -> None:
        if len(value) > self.max_value_size:
            message = too_large_message(key, len(value), self.max_value_size)
            raise ValueTooLarge(f"{message}; memcached's own limit is its -I setting")

    # -- the Store contract ---------------------------------------------------------------

    def get(self, key: str) -> bytes | NoValueType:
        """Return the value stored under ``key``, or ``NO_VALUE``."""
        validate_store_key(key)
        pool = self._single or self._pools[self.ring.server_for(key)]
        client = pool.take()
        try:
            value = client.get(key)
        except Exception as error:
            client.close()
            translated = _translate(error, pool.server, key)
            if translated is None:
                raise
            raise translated from error
        pool.give_back(client)
        return NO_VALUE if value is None else value

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist, one request per server."""
        found: dict[str, bytes] = {}
        for pool, group in self._by_server(keys).items():
            found.update(self._run(pool, lambda c, g=group: c.get_many(g)))
        return found

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value``; an oversize value raises and leaves the key empty."""
        validate_store_key(key)
        pool = self._pool_for(key)
        if len(value) > self.max_value_size:
            self._run(pool, lambda c: c.delete(key), key)
            self._check_size(key, value)
        self._run(pool, lambda c: c.set(key, value, _expire(ttl)), key)

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values, one request per server; return the keys not stored."""
        too_large = [k for k, v in items.items() if len(v) > self.max_value_size]
        if too_large:
            self.delete_many(too_large)
        failed = list(too_large)
        groups = self._by_server(k for k in items if k not in too_large)
        for pool, group in groups.items():
            values = {k: items[k] for k in group}
            failed += self._run(pool, lambda c, v=values: c.set_many(v, _expire(ttl)))
        return failed

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store only if absent; memcached decides atomically."""
        validate_store_key(key)
        self._check_size(key, value)
        return self._run(self._pool_for(key), lambda c: c.add(key, value, _expire(ttl)), key)

    def append(self, key: str, value: bytes) -> bool:
        """Append to an existing value; ``False`` when missing."""
        validate_store_key(key)
        self._check_size(key, value)
        return self._run(self._pool_for(key), lambda c: c.append(key, value), key)

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta`` server-side (wrapping at 2**64); ``None`` when missing."""
        validate_store_key(key)
        check_delta(delta)
        return self._run(self._pool_for(key), lambda c: c.incr(key, delta), key)

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Subtract ``delta`` server-side, flooring at 0; ``None`` when missing."""
        validate_store_key(key)
        check_delta(delta)
        return self._run(self._pool_for(key), lambda c: c.decr(key, delta), key)

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return ``(value, cas unique)``; ``(NO_VALUE, None)`` when missing."""
        validate_store_key(key)
        value, token = self._run(self._pool_for(key), lambda c: c.gets(key), key)
        return (NO_VALUE, None) if value is None else (value, token)

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Store only if the key's cas unique is still ``token``."""
        validate_store_key(key)
        self._check_size(key, value)
        if not isinstance(token, bytes):
            return False
        stored = self._run(self._pool_for(key), lambda c: c.cas(key, value, token, _expire(ttl)))
        return bool(stored)

    def delete(self, key: str) -> bool:
        """Delete ``key``; ``True`` when it existed."""
        validate_store_key(key)
        return self._run(self._pool_for(key), lambda c: c.delete(key), key)

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys, one request per server."""
        for pool, group in self._by_server(keys).items():
            self._run(pool, lambda c, g=group: c.delete_many(g))

    def touch(self, key: str, ttl: int) -> bool:
        """Give an existing key a new TTL."""
        validate_store_key(key)
        return self._run(self._pool_for(key), lambda c: c.touch(key, _expire(ttl)), key)

    def flush(self) -> None:
        """Flush every server of the pool."""
        for pool in self._pools.values():
            self._run(pool, lambda c: c.flush_all())

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return ``stats`` of every server, keyed by ``host:port``."""
        report: dict[str, dict[str, int | float | str]] = {}
        for server, pool in self._pools.items():
            raw = self._run(pool, lambda c: c.stats())
            report[server.name] = {_text(k): _plain(v) for k, v in raw.items()}
        return report

    def close(self) -> None:
        """Close idle connections; the store reconnects on next use."""
        for pool in self._pools.values():
            pool.close()


def _as_server(spec: Server | tuple[str, int] | str) -> Server:
    if isinstance(spec, Server):
        return spec
    if isinstance(spec, tuple):
        return Server(*spec)
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"memcached server must look like 'host:port', got {spec!r}")
    return Server(host, int(port))


def _expire(ttl: int) -> int:
    """Translate a relative TTL to memcached's exptime (absolute beyond 30 days)."""
    if ttl < 0:
        return -1
    if ttl > THIRTY_DAYS:
        return int(time.time()) + ttl
    return int(ttl)


def _translate(error: Exception, server: Server, key: str) -> Exception | None:
    if isinstance(error, MemcacheIllegalInputError):
        return InvalidKey(f"memcached refused key {key!r}: {error}")
    if isinstance(error, MemcacheClientError) and "non-numeric" in str(error):
        return NotNumeric(f"cannot incr/decr {key!r}: its value is not a decimal integer")
    if isinstance(error, MemcacheServerError) and "too large" in str(error):
        return ValueTooLarge(f"memcached {server.name} refused {key!r}: {error}")
    if isinstance(error, MemcacheError | OSError):
        return StoreUnavailable(f"memcached {server.name}: {type(error).__name__}: {error}")
    return None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _plain(value: object) -> int | float | str:
    if isinstance(value, int | float | str):
        return value
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)
