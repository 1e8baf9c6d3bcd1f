"""The Redis store, over redis-py, with memcached's semantics.

Where Redis and memcached disagree, memcached wins, because the cache logic is
written against memcached: ``incr`` never creates a key and ``decr`` floors at 0
(small Lua scripts), ``append`` never creates either, a TTL of 0 means "no
expiry", and ``flush`` empties only this store's database. ``gets``/``cas``
compare *content* (the token is the value's SHA-1), which cannot see an ABA
write: harmless for a cache (see docs/reference/stores.md#semantics-worth-knowing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from redis.commands.core import Script
from redis.exceptions import RedisError, ResponseError

from mcache.contract.stepped_store import SteppedStore
from mcache.contract.store import StaleClaim, StoreTraits
from mcache.contract.store_helpers import MiB, twin_made_once
from mcache.errors import ConfigError, NotNumeric, StoreUnavailable
from mcache.sansio.steps import run_steps
from mcache.stores.redaction import redacted_url
from mcache.stores.redis.access import check_access, guarded, tls_options
from mcache.stores.redis.steps import Command, Pipelined, RedisSteps, Scripted
from mcache.stores.redis.tracking import InvalidationFeed, Listener

if TYPE_CHECKING:
    from mcache.stores.redis.async_store import AsyncRedisStore

__all__ = ["RedisStore"]

T = TypeVar("T")


class RedisStore(RedisSteps, SteppedStore):
    """One Redis database behind the :class:`~mcache.contract.store.Store` contract:
    :class:`~mcache.stores.redis.steps.RedisSteps` performed with redis-py's blocking client.
    """

    traits = StoreTraits(
        async_twin=True,
        incr_many=True,
        hyperloglog=True,
        pushes_invalidations=True,
        tells_time_left=True,
        claims_stale=True,
    )
    connection_options: dict[str, Any] | None = None
    """How the client was made from ``url``; None when it was given (no async twin)."""
    _twin: AsyncRedisStore | None = None

    _FAILURES: tuple[type[BaseException], ...] = (RedisError, OSError, asyncio.TimeoutError)
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
        ssl_ca_certs: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_cert_reqs: str | None = None,
        ssl_check_hostname: bool | None = None,
    ) -> None:
        """``client`` replaces the one ``url`` would make (a Sentinel's primary, say);
        ``replica`` serves plain reads (``get``, ``get_many``), everything else the client.
        The ``ssl_*`` options go to redis-py for a ``rediss://`` URL; with TLS or a password
        the server is pinged once here (see :mod:`mcache.stores.redis.access`).
        """
        check_options(socket_timeout, socket_connect_timeout, max_value_size)
        self.url = url
        self.max_value_size = max_value_size
        self.max_connections = max_connections
        tls = tls_options(
            url,
            {
                "ssl_ca_certs": ssl_ca_certs,
                "ssl_certfile": ssl_certfile,
                "ssl_keyfile": ssl_keyfile,
                "ssl_cert_reqs": ssl_cert_reqs,
                "ssl_check_hostname": ssl_check_hostname,
            },
        )
        if client is None:
            self.connection_options = {
                "socket_timeout": socket_timeout,
                "socket_connect_timeout": socket_connect_timeout,
                "max_connections": max_connections,
                **tls,
            }
            pool = redis.ConnectionPool.from_url(url, **self.connection_options)
            client = redis.Redis(connection_pool=pool)
            if guarded(url):
                check_access(client, _redacted(url))
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
        except self._FAILURES as error:
            raise self.translated(error, key) from error

    def translated(self, error: BaseException, key: str = "") -> Exception:
        """Return the contract's exception for a client's ``error`` (see :class:`Store`)."""
        if isinstance(error, ResponseError) and "not an integer" in str(error):
            return NotNumeric(f"cannot incr/decr {key!r}: not a decimal integer")
        if isinstance(error, ResponseError):
            return StoreUnavailable(f"redis {_redacted(self.url)}: {error}")
        return StoreUnavailable(f"redis {_redacted(self.url)}: {type(error).__name__}: {error}")

    def _perform(self, operation: Command | Scripted | Pipelined) -> Any:
        """Perform one operation of the steps with the blocking client."""
        if type(operation) is Command:
            client = self._reader if operation.reader else self._redis
            return self._run(lambda: operation.call(client), operation.key)
        if type(operation) is Scripted:
            script = self._script(operation.source)
            return self._run(lambda: script(operation.keys, operation.args), operation.key)
        pipe = (self._reader if operation.reader else self._redis).pipeline(transaction=False)
        operation.fill(pipe)
        return self._run(pipe.execute)

    # -- the Store contract, performed --------------------------------------------------------

    @property
    def claims_in_read(self) -> bool:
        """Reads claim stale entries unless they go to a replica (see :class:`ClaimsStale`)."""
        return self._reader is self._redis

    def get_many_claiming(self, keys: list[str], claim: StaleClaim) -> dict[str, bytes]:
        """``get_many`` and, for an entry in its stale window, its lock: one ``EVALSHA``."""
        return run_steps(self.get_many_claiming_steps(keys, claim), self._perform)

    def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int | None]]:
        """Return ``{key: (value, seconds left)}`` for the keys that exist, in one round trip."""
        return run_steps(self.get_many_expiring_steps(keys), self._perform)

    def pfadd(self, key: str, member: bytes, ttl: int) -> bool:
        """Add ``member`` to the HyperLogLog ``key`` (TTL set on creation); True if it changed."""
        return run_steps(self.pfadd_steps(key, member, ttl), self._perform)

    def pfcount(self, keys: list[str]) -> int:
        """Return the estimated number of distinct members across HyperLogLogs ``keys``."""
        return run_steps(self.pfcount_steps(keys), self._perform)

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return ``INFO`` mapped to memcached's field names, keyed by ``host:port/db``."""
        return info_stats(self._redis, self._run)

    def close(self) -> None:
        """Close pooled connections; the store reconnects on next use."""
        self._redis.connection_pool.disconnect()
        if self._reader is not self._redis:
            self._reader.connection_pool.disconnect()

    def invalidation_feed(self, prefixes: list[str], listener: Listener) -> InvalidationFeed:
        """Return a feed of the invalidations Redis pushes for keys under ``prefixes``
        (for a near cache: see :mod:`mcache.stores.redis.tracking`), on the server reads go to."""
        pool = self._reader.connection_pool
        options = {**pool.connection_kwargs, "protocol": 2}
        return InvalidationFeed(lambda: pool.connection_class(**options), prefixes, listener)

    def asynchronous(self) -> AsyncRedisStore | None:
        """Return this store's async twin on the same servers
        (see :mod:`mcache.stores.redis.async_store`), or None for a store given its client
        (the twin cannot copy a client it did not make): async callers then use a thread."""
        if self._twin is None and not self.has_twin():
            return None
        return twin_made_once(self, self.new_twin)

    def has_twin(self) -> bool:
        """Whether the store knows how to make its own clients on an event loop."""
        return self.connection_options is not None

    def new_twin(self) -> AsyncRedisStore:
        """Make the async twin (Sentinel and Cluster stores make their own kinds)."""
        from mcache.stores.redis.async_store import AsyncRedisStore

        return AsyncRedisStore(self)


def check_options(
    socket_timeout: float, socket_connect_timeout: float, max_value_size: int
) -> None:
    """Refuse timeouts and sizes no Redis store can work with, at start-up."""
    if socket_timeout <= 0 or socket_connect_timeout <= 0:
        raise ConfigError("redis: socket_timeout and socket_connect_timeout must be > 0")
    if max_value_size < 1:
        raise ConfigError(f"redis: max_value_size must be >= 1, got {max_value_size!r}")


def _redacted(url: str) -> str:
    """Hide the passwords of a URL before it reaches a log line or an error message."""
    return redacted_url(url)


def info_stats(
    client: Any, run: Callable[[Callable[[], Any]], Any] = lambda call: call()
) -> dict[str, dict[str, int | float | str]]:
    """Return a redis-py client's ``INFO`` in memcached's field names, keyed by ``host:port/db``.

    Shared with the store over another Django cache, which may sit on django-redis.
    """
    info, kwargs = run(client.info), client.connection_pool.connection_kwargs
    db = kwargs.get("db", 0)
    name = f"{kwargs.get('host', kwargs.get('path', 'redis'))}:{kwargs.get('port', '')}/{db}"
    keyspace = info.get(f"db{db}", {})
    return {
        name: {
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
    }


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
