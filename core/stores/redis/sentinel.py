"""Redis behind Sentinel: the primary found through the sentinels, and followed across failovers.

``redis+sentinel://[:password@]s1:26379,s2:26379/<service>/<db>?replica_reads=true``

redis-py's ``Sentinel`` asks for the service's primary on every new connection,
so the store follows a promotion; a connection still open to the old primary
fails once (on ``READONLY`` if it came back as a replica) and is replaced.
Nothing retries inside a request: a cache failing over answers "miss" at once.
With ``replica_reads`` plain reads (hits) go to the replicas, which lag their
primary; whatever decides or writes stays on the primary. See
docs/how-to/clusters.md#redis-sentinel-and-redis-cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from mcache.contract.store_helpers import MiB
from mcache.errors import ConfigError
from mcache.stores.redis.hosts import parse_hosts_url
from mcache.stores.redis.store import RedisStore, _redacted, role_stats

if TYPE_CHECKING:
    from mcache.stores.redis.async_store import AsyncRedisStore

__all__ = ["SentinelAddress", "SentinelRedisStore", "parse_sentinel_url"]

DEFAULT_SENTINEL_PORT = 26379
EXAMPLE = "redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/mymaster/0"


@dataclass(frozen=True)
class SentinelAddress:
    """What a ``redis+sentinel://`` URL names."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int
    username: str | None
    password: str | None


def parse_sentinel_url(url: str) -> SentinelAddress:
    """Read the sentinels, the service and the database out of ``url`` (no query string)."""
    parsed = parse_hosts_url(url, "sentinel", DEFAULT_SENTINEL_PORT, EXAMPLE)
    service, _, db = parsed.path.partition("/")
    if not service:
        raise ConfigError(f"no service (the primary's name) in {_redacted(url)!r}; e.g. {EXAMPLE}")
    if db and not db.isdigit():
        raise ConfigError(f"redis database must be a number, got {db!r}; e.g. {EXAMPLE}")
    return SentinelAddress(
        parsed.hosts, unquote(service), int(db or 0), parsed.username, parsed.password
    )


class SentinelRedisStore(RedisStore):
    """A :class:`RedisStore` on the primary a set of sentinels names (and its replicas)."""

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float = 1.0,
        socket_connect_timeout: float = 0.5,
        max_connections: int | None = None,
        max_value_size: int = 1 * MiB,
        replica_reads: bool = False,
        sentinel_password: str | None = None,
    ) -> None:
        self.address = address = parse_sentinel_url(url)
        self.replica_reads = replica_reads
        self.sentinel_password = sentinel_password
        self.timeouts = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
        }
        self.servers = {
            "db": address.db,
            "username": address.username,
            "password": address.password,
        }
        self.sentinel, primary, replica = self.clients(
            Sentinel, Retry(NoBackoff(), 0), max_connections=max_connections
        )
        super().__init__(
            url,
            **self.timeouts,
            max_connections=max_connections,
            max_value_size=max_value_size,
            client=primary,
            replica=replica,
        )

    def clients(self, sentinel_class: type, retry: Any, **pool: Any) -> tuple[Any, Any, Any]:
        """Return a Sentinel of ``sentinel_class``, the primary's client and the replicas'
        (None without ``replica_reads``): with redis-py's blocking classes for this store,
        its asyncio ones for each event loop of the twin."""
        connection = {**self.timeouts, "retry": retry}  # a failing cache answers "miss" now
        sentinel = sentinel_class(
            list(self.address.sentinels),
            sentinel_kwargs={**connection, "password": self.sentinel_password},
            **connection,
        )
        service, servers = self.address.service, {**self.servers, **pool}
        primary = sentinel.master_for(service, **servers)
        replica = sentinel.slave_for(service, **servers) if self.replica_reads else None
        return sentinel, primary, replica

    def has_twin(self) -> bool:
        return True

    def new_twin(self) -> AsyncRedisStore:
        """The twin on redis.asyncio's Sentinel client
        (see :mod:`mcache.stores.redis.sentinel_async`)."""
        from mcache.stores.redis.sentinel_async import AsyncSentinelRedisStore

        return AsyncSentinelRedisStore(self)

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return every server of the service with its role: the primary, then each replica."""
        service = self.address.service
        nodes = [("primary", self._run(lambda: self.sentinel.discover_master(service)))]
        replicas = self._run(lambda: self.sentinel.discover_slaves(service))
        nodes += [("replica", node) for node in replicas]
        report: dict[str, dict[str, int | float | str]] = {}
        for role, (host, port) in nodes:
            client = redis.Redis(
                host=host, port=port, **self.servers, **self.timeouts, retry=Retry(NoBackoff(), 0)
            )
            name = f"{host}:{port}/{self.address.db}"
            try:
                report.update(role_stats(client, role, name, self._run))
            finally:
                client.close()
        return report
