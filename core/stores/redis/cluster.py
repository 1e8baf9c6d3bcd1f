"""Redis Cluster: keys sharded by hash slot over several primaries, each with its replicas.

``redis+cluster://[user:password@]n1:7000,n2:7001?replica_reads=true&tag_copies=16``

redis-py's ``RedisCluster`` keeps the slot map (learnt from any node named) and
follows ``MOVED``; a multi-key call goes to each node once, in one pipelined
round. Nothing retries inside a request: while a primary is down its slots miss
and drop writes, the others answer, until its promoted replica is in the map.

Tag versions are read with every tagged hit, so each has a copy in each of
``tag_copies`` equal slot ranges (``name``, ``name~n``: see
:class:`~mcache.contract.store.Colocating`) and a reader takes the one its entry's
primary serves: a hit is one request to one node. The copies do not depend on
the map, so a bump reaches them all even across a resharding. A multi-key
command needs one slot: ``pfcount`` takes keys sharing a hash tag (``{…}``).
See docs/how-to/clusters.md#redis-sentinel-and-redis-cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, LoadBalancingStrategy, RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from mcache.clock import Clock, system_clock
from mcache.contract.store import StoreTraits
from mcache.contract.store_helpers import MiB, copies_per_owner
from mcache.errors import ConfigError, StoreUnavailable
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.model.keys import validated_keys
from mcache.sansio.steps import Steps
from mcache.stores.redis.hosts import HostsURL, parse_hosts_url
from mcache.stores.redis.steps import Pipelined
from mcache.stores.redis.store import RedisStore, _redacted, check_options, role_stats

if TYPE_CHECKING:
    from mcache.stores.redis.async_store import AsyncRedisStore

__all__ = ["ClusterRedisStore", "parse_cluster_url"]

DEFAULT_PORT = 6379
EXAMPLE = "redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000"
RECONNECT_INTERVAL = 1.0  # seconds between attempts to learn the map while no node answers


def parse_cluster_url(url: str) -> HostsURL:
    """Read the nodes and credentials out of ``url`` (no query string)."""
    parsed = parse_hosts_url(url, "cluster node", DEFAULT_PORT, EXAMPLE)
    if parsed.path not in ("", "0"):
        raise ConfigError(
            f"Redis Cluster has only database 0, got {parsed.path!r} in {_redacted(url)!r};"
            f" e.g. {EXAMPLE}"
        )
    return parsed


class ClusterRedisStore(RedisStore):
    """A :class:`RedisStore` over a Redis Cluster, placing tag copies next to entries."""

    traits = StoreTraits(
        async_twin=True,
        incr_many=True,
        hyperloglog=True,
        tells_time_left=True,
        colocates=True,
        # No pushed invalidations: tracking is per node, and a key's node moves with its
        # slot, so a near cache on a cluster trusts its copies for near_ttl, as on
        # memcached. No claims in the read: a script's keys must share a slot, and an
        # entry's lock and tags do not.
    )
    _FAILURES = (*RedisStore._FAILURES, RedisClusterException)
    _flush_options = {"target_nodes": RedisCluster.PRIMARIES}  # every primary: replicas follow

    def __init__(
        self,
        url: str,
        *,
        socket_timeout: float = 1.0,
        socket_connect_timeout: float = 0.5,
        max_connections: int | None = None,
        max_value_size: int = 1 * MiB,
        replica_reads: bool = False,
        tag_copies: int = 16,
        clock: Clock = system_clock,
    ) -> None:
        """``clock``: what the pause between attempts to reach the cluster is counted on."""
        self.clock = clock
        check_options(socket_timeout, socket_connect_timeout, max_value_size)
        if not 1 <= tag_copies <= 1024:
            raise ConfigError(f"redis+cluster: tag_copies must be 1…1024, got {tag_copies!r}")
        self.address = parse_cluster_url(url)
        self.url = url
        self.max_value_size = max_value_size
        self.max_connections = max_connections
        self.connection_options = None  # its clients are made here, not from one URL
        self.timeouts = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_connect_timeout,
        }
        self.tag_copies = tag_copies
        self.replica_reads = replica_reads
        self._options = self.client_options(ClusterNode, Retry(NoBackoff(), 0))
        if max_connections is not None:
            self._options["max_connections"] = max_connections
        self._clients: dict[bool, RedisCluster] = {}  # replica reads or not: its client
        self._connecting = threading.Lock()
        self._next_attempt = 0.0
        self._scripts = {}
        self._copies: BoundedMemo[str, tuple[tuple[str, int], ...]] = BoundedMemo(PER_KEY_LIMIT)

    def client_options(self, node_class: type, retry: Any) -> dict[str, Any]:
        """What a cluster client is made with: for redis-py's blocking classes here, its
        asyncio ones in each event loop of the twin."""
        return {
            **self.timeouts,
            "startup_nodes": [node_class(host, port) for host, port in self.address.hosts],
            "username": self.address.username,
            "password": self.address.password,
            "retry": retry,  # a failing node answers "miss" now, not later
            "require_full_coverage": False,  # start, and keep going, while a primary is down
        }

    @property  # type: ignore[override]
    def _redis(self) -> RedisCluster:
        client = self._clients.get(False)
        return client if client is not None else self._connect(False)

    @property
    def claims_in_read(self) -> bool:
        """Never: a script's keys must share a slot, and an entry's lock and tags do not."""
        return False

    @property  # type: ignore[override]
    def _reader(self) -> RedisCluster:
        client = self._clients.get(self.replica_reads)
        return client if client is not None else self._connect(self.replica_reads)

    def _connect(self, replicas: bool) -> RedisCluster:
        """Learn the slot map from the first node that answers, at most once a second.

        Connecting lazily lets a site start while the cluster is down: its
        requests miss until a node answers, instead of failing at start-up.
        """
        with self._connecting:
            client = self._clients.get(replicas)
            if client is not None:
                return client
            if self.clock.monotonic() < self._next_attempt:
                raise StoreUnavailable(f"redis cluster {_redacted(self.url)}: no node answered")
            options = dict(self._options)
            if replicas:
                options["load_balancing_strategy"] = LoadBalancingStrategy.ROUND_ROBIN_REPLICAS
            try:
                client = self._clients[replicas] = RedisCluster(**options)
            except self._FAILURES as error:
                self._next_attempt = self.clock.monotonic() + RECONNECT_INTERVAL
                message = f"redis cluster {_redacted(self.url)}: no node answered ({error})"
                raise StoreUnavailable(message) from error
            return client

    # -- what a cluster does differently ----------------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist: one request per node, in one round."""
        keys = list(keys)
        if len(keys) > 1 and not self.replica_reads:
            validated_keys(keys)
            values = self._from_one_node(keys)
            if values is not None:
                return {k: v for k, v in zip(keys, values, strict=True) if v is not None}
        return super().get_many(keys)

    def get_many_steps(self, keys: Iterable[str]) -> Steps[dict[str, bytes]]:
        """Keys of several slots are read in a cluster pipeline, which splits them per node."""
        keys = list(keys)
        if len(keys) <= 1:
            return (yield from super().get_many_steps(keys))  # one key, one slot: MGET
        validated_keys(keys)
        values = yield Pipelined(lambda pipe: _queue_gets(pipe, keys), reader=True)
        return {k: v for k, v in zip(keys, values, strict=True) if v is not None}

    def _from_one_node(self, keys: list[str]) -> list[Any] | None:
        """Read keys that one primary serves (an entry and its tag copies) in a plain pipeline.

        The cluster pipeline routes every command on its own, about 60 µs of
        Python per tagged hit; the node's own client skips that. None when the
        keys span nodes, or the node failed or answered ``MOVED``: the cluster
        pipeline then routes them, and learns the new map.
        """
        slots = self._redis.nodes_manager.slots_cache
        owners = {_primary(slots, key_slot(key.encode())) for key in keys}
        owner = owners.pop() if len(owners) == 1 else None
        if owner is None or owner.redis_connection is None:
            return None
        pipe = owner.redis_connection.pipeline(transaction=False)
        _queue_gets(pipe, keys)
        try:
            values = pipe.execute(raise_on_error=False)
        except self._FAILURES:
            return None
        return None if any(isinstance(value, Exception) for value in values) else values

    def pfcount_steps(self, keys: list[str]) -> Steps[int]:
        """Count the distinct members across ``keys``, which must share a slot."""
        validated_keys(keys)
        if len({key_slot(key.encode()) for key in keys}) > 1:
            raise ValueError(
                f"pfcount on a Redis Cluster needs keys of one hash slot (a shared {{…}} tag),"
                f" got {keys!r}"
            )
        return (yield from super().pfcount_steps(keys))

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return every node of the cluster with its role; a failed node as ``dead``."""
        nodes = self._run(self._redis.cluster_nodes)
        report: dict[str, dict[str, int | float | str]] = {}
        for name, node in sorted(nodes.items()):
            role = "primary" if "master" in node["flags"] else "replica"
            host, _, port = name.rpartition(":")
            failed = "fail" in node["flags"] or not node.get("connected", True)
            client = (
                None if failed else self._redis.get_redis_connection(ClusterNode(host, int(port)))
            )
            report.update(role_stats(client, role, f"{name}/0", self._run))
        return report

    def close(self) -> None:
        """Close every node's connections; the store reconnects on next use."""
        for client in list(self._clients.values()):
            client.close()

    def has_twin(self) -> bool:
        return True

    def new_twin(self) -> AsyncRedisStore:
        """The twin on redis.asyncio's cluster client
        (see :mod:`mcache.stores.redis.cluster_async`)."""
        from mcache.stores.redis.cluster_async import AsyncClusterRedisStore

        return AsyncClusterRedisStore(self)

    # -- Colocating: tag copies next to entries ---------------------------------------------

    def spread(self, base: str) -> tuple[str, ...]:
        """Return ``base`` and a copy of it in each slot range, ``base`` first."""
        return tuple(key for key, _slot in self._placed(base))

    def colocated(self, base: str, near: str) -> str:
        """Return the copy of ``base`` served by the primary that serves ``near`` now
        (``base`` itself if that primary serves none: one more node, still one round)."""
        placed = self._placed(base)
        if len(placed) > 1:
            slots = self._redis.nodes_manager.slots_cache
            owner = _primary(slots, key_slot(near.encode()))
            for key, slot in placed:
                if owner is not None and _primary(slots, slot) is owner:
                    return key
        return base

    def _placed(self, base: str) -> tuple[tuple[str, int], ...]:
        """Find ``base~n`` keys, the smallest n per slot range, once per base."""
        placed = self._copies.get(base)
        if placed is None:
            ranges = copies_per_owner(
                base, lambda key: self._range(key_slot(key.encode())), self.tag_copies
            )
            placed = tuple((key, key_slot(key.encode())) for key in ranges.values())
            self._copies.remember(base, placed)
        return placed

    def _range(self, slot: int) -> int:
        return slot * self.tag_copies // REDIS_CLUSTER_HASH_SLOTS


def _primary(slots: dict[int, list[ClusterNode]], slot: int) -> ClusterNode | None:
    """The primary serving ``slot`` in a client's slot map (the first node listed), if any."""
    nodes = slots.get(slot)
    return nodes[0] if nodes else None


def _queue_gets(pipe: Any, keys: list[str]) -> None:
    for key in keys:
        pipe.get(key)
