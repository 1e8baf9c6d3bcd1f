"""The memcached store: a pool of servers behind the Store contract.

Keys are placed by a ring (:mod:`mcache.model.ring`), one request per server for a multi-key
call; servers that stop answering are routed around (:mod:`mcache.stores.memcached.node`),
and keys that must not be lost can be written to the ``replicas`` servers that follow their
owner on the ring, where their reads fail over to. The routing and the commands are steps
(:mod:`mcache.stores.memcached.steps`), performed here with pymemcache's blocking clients
and by the async twin (:meth:`MemcachedStore.asynchronous`) on asyncio connections.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pymemcache.client.base import Client

from mcache.clock import Clock, system_clock
from mcache.contract.stepped_store import SteppedStore
from mcache.contract.store import LeaseBid, StoreTraits
from mcache.contract.store_helpers import MiB, twin_made_once
from mcache.errors import ConfigError
from mcache.logs import FailureLog
from mcache.memo import BoundedMemo
from mcache.model.ring import LIBKETAMA_POINTS, Server, make_ring
from mcache.sansio.steps import run_steps
from mcache.stores.memcached import meta
from mcache.stores.memcached.access import access_of, check_access
from mcache.stores.memcached.dump import Item, metadump
from mcache.stores.memcached.leases import MemcachedLeases, lease_read_failed, leased
from mcache.stores.memcached.node import Node, NodeDown, NodeOptions
from mcache.stores.memcached.stats import parse_detail, stats_report
from mcache.stores.memcached.steps import (
    OWNER_CACHE_SIZE,
    PLACEMENT_CACHE_SIZE,
    FetchOwners,
    MemcachedSteps,
    NodeCall,
)
from mcache.stores.memcached.wire import read_parsed, read_values, send_get, socket_of

if TYPE_CHECKING:
    from mcache.stores.memcached.async_store import AsyncMemcachedStore

__all__ = ["MemcachedStore"]

DUMP_TIMEOUT = 10.0
"""Seconds a metadump connection waits for the crawler's next lines."""
ITEM_HEADROOM = 512
"""Bytes of memcached's 1 MiB item limit taken by the item header, key and flags."""


class MemcachedStore(MemcachedLeases, MemcachedSteps, SteppedStore):
    """A pool of memcached servers with failover and optional replication. ``protocol``:
    ``auto`` (see :mod:`mcache.stores.memcached.leases`), ``meta`` or ``text``."""

    node_class: type[Node] = Node
    """How each server is reached (a simulation's servers are reached through its own)."""

    traits = StoreTraits(
        expiry_slack=1,  # its clock counts whole seconds: a TTL of t lasts t - 1 to t seconds
        async_twin=True,
        incr_many=True,
        colocates=True,
        leases=True,
        server_detail=True,
    )

    def __init__(
        self,
        servers: Sequence[Server | tuple[str, int] | str],
        *,
        hashing: str = "ketama",
        ketama_points: int = LIBKETAMA_POINTS,
        connect_timeout: float = 0.5,
        timeout: float = 1.0,
        max_pool_size: int = 32,
        max_value_size: int = 1 * MiB - ITEM_HEADROOM,
        retry_attempts: int = 2,
        dead_timeout: float = 30.0,
        flush_on_rejoin: bool = True,
        replicas: int = 1,
        protocol: str = "auto",
        tls: bool = False,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
        tls_verify: bool = True,
        username: str | None = None,
        password: str | None = None,
        clock: Clock = system_clock,
    ) -> None:
        """``tls`` and the ``tls_*`` options: connect through TLS (``memcached -Z``);
        ``username`` and ``password``: authenticate each connection (``memcached -Y``).
        Either makes the store connect to each server once here, so a certificate or
        password the server refuses fails at start-up (see :mod:`.access`). ``clock``: what
        ``dead_timeout`` and memcached's absolute expiry times are counted on (the servers'
        real time, unless a simulation's clock stands in for it)."""
        self.clock = clock
        self._init_protocol(protocol)
        if max_value_size < 1:
            raise ConfigError(f"memcached: max_value_size must be >= 1, got {max_value_size!r}")
        options = NodeOptions(
            connect_timeout=connect_timeout,
            timeout=timeout,
            max_pool_size=max_pool_size,
            retry_attempts=retry_attempts,
            dead_timeout=dead_timeout,
            flush_on_rejoin=flush_on_rejoin,
            failures=FailureLog(clock=clock),
            clock=clock,
            access=access_of(
                tls, tls_ca_file, tls_cert_file, tls_key_file, tls_verify, username, password
            ),
        )
        self.access = options.access
        self.ring = make_ring([_as_server(s) for s in servers], hashing, ketama_points)
        self.servers = self.ring.servers
        self.max_value_size = max_value_size
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.replicas = _checked_replicas(replicas, len(self.servers))
        self.failures = options.failures
        self._dead: set[Node] = set()
        self._dead_lock = threading.Lock()
        self._nodes = {s: self.node_class(s, options, self._health_changed) for s in self.servers}
        self._single = self._nodes[self.servers[0]] if len(self.servers) == 1 else None
        self._owners: BoundedMemo[str, Node] = BoundedMemo(OWNER_CACHE_SIZE)
        self._groups: BoundedMemo[tuple[str, ...], dict[Node, list[str]]] = BoundedMemo(
            OWNER_CACHE_SIZE
        )
        self._placed: BoundedMemo[str, dict[Server, str]] = BoundedMemo(PLACEMENT_CACHE_SIZE)
        self._placeable = len(self.ring.owning_servers())  # a 0-point server owns no key
        self._attempts = retry_attempts * len(self.servers) + 1
        self._twin: AsyncMemcachedStore | None = None
        if self.access.guarded:
            check_access(self.servers, self.access, connect_timeout)

    def __repr__(self) -> str:
        names = ",".join(f"{s.name}:{s.weight}" for s in self.servers)
        return f"MemcachedStore({names!r}, replicas={self.replicas})"

    def with_replicas(self, replicas: int) -> MemcachedStore:
        """Return a view of this store (same servers and health) writing to ``replicas``
        servers, for keys that must survive a server's loss: ``store.with_replicas(2)``."""
        view = copy.copy(self)
        view._twin = None
        view.replicas = _checked_replicas(replicas, len(self.servers))
        return view

    def _health_changed(self, node: Node) -> int:
        """Note ``node``'s health; return how many servers that own keys are up now."""
        with self._dead_lock:
            if node.dead_until:
                self._dead.add(node)
            else:
                self._dead.discard(node)
            return self._placeable - len(self._dead)

    def asynchronous(self) -> AsyncMemcachedStore:
        """Return the store's async twin: the same servers, ring and health, on asyncio."""
        return twin_made_once(self, self._new_twin)

    def _new_twin(self) -> AsyncMemcachedStore:
        from mcache.stores.memcached.async_store import AsyncMemcachedStore

        return AsyncMemcachedStore(self)

    def _perform(self, operation: NodeCall | FetchOwners) -> Any:
        """Perform one command of the steps with the blocking clients."""
        if type(operation) is NodeCall:
            command, args = operation.command, operation.args
            return operation.node.run(
                lambda client: _on_client(client, command, args), operation.key
            )
        return _fetch_pipelined(operation.groups)  # type: ignore[union-attr]

    # -- the Store contract: the steps, performed ---------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist, one request per server; the first step
        of :meth:`get_many_steps`, a whole tagged hit while every server is up, is taken here
        in line (the steps' driver cost ~2.5 µs per hit), failover in the steps."""
        if self.replicas > 1 or self._dead:
            return run_steps(self.get_many_steps(keys), self._perform)
        groups = self._owner_groups(keys)
        if not groups:
            return {}
        found, missing = _fetch_pipelined(groups)
        if not missing:
            return found
        return run_steps(self._replicas_fetch_steps(found, missing), self._perform)

    def get_many_leasing(self, keys: list[str], bid: LeaseBid) -> dict[str, bytes]:
        """``get_many(keys)``, bidding for the server's lease on ``keys[0]`` (meta protocol);
        as in :meth:`get_many`, the usual case (every server up, the keys on the first key's
        server) is done here in line, not through the steps' driver."""
        if self._dead:
            return run_steps(self.get_many_leasing_steps(keys, bid), self._perform)
        lead, request, beside, elsewhere = self._lease_plan(keys, bid)
        if elsewhere:
            return run_steps(self.get_many_leasing_steps(keys, bid), self._perform)
        client = lead.take()
        try:
            reply, found = _leased_get(client, request, beside)
        except Exception as error:
            down = lead.broken(client, error, keys[0])
            if not isinstance(down, NodeDown):
                raise down from error
            lease_read_failed(lead, down)
            bid.outcome, bid.token, bid.unleased = None, None, True
            return self.get_many(keys)
        lead.give_back(client)
        bid.unleased = False
        leased(bid, keys[0], reply, found)  # (sets the outcome)
        return found

    def claim_stale(self, key: str, token: int, bid: LeaseBid) -> None:
        """Mark the item read with ``token`` stale and bid for its rebuild (meta protocol)."""
        run_steps(self.claim_stale_steps(key, token, bid), self._perform)

    def release_lease(self, key: str, token: int, ttl: int | None = None) -> bool:
        """Hand a stale item's unused lease to the next reader, ``ttl`` more seconds to live
        if given (meta protocol)."""
        return run_steps(self.release_lease_steps(key, token, ttl), self._perform)

    def keep_lease(self, key: str, token: int, ttl: int) -> bool:
        """Keep the item leased with ``token`` alive ``ttl`` more seconds, if it still is."""
        return run_steps(self.keep_lease_steps(key, token, ttl), self._perform)

    def leased_write(self, key: str, value: bytes, token: int, ttl: int) -> bool:
        """Store only under the lease ``token`` (meta protocol's ``ms … C``)."""
        return run_steps(self.leased_write_steps(key, value, token, ttl), self._perform)

    def incr_many_creating(
        self, deltas: Mapping[str, int], initial: Mapping[str, int]
    ) -> dict[str, int]:
        """Add each delta, creating missing keys at ``initial``, one ``ma`` batch per server."""
        return run_steps(self.incr_many_creating_steps(deltas, initial), self._perform)

    def incr_creating(self, key: str, delta: int, ttl: int = 0) -> int:
        """Add ``delta``, creating a missing counter at ``delta``, in one ``ma``."""
        return run_steps(self.incr_creating_steps(key, delta, ttl), self._perform)

    # -- statistics ---------------------------------------------------------------------------

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return ``stats`` of every server keyed by ``host:port``; a dead one says so."""
        return stats_report(run_steps(self.stats_of_all_steps(""), self._perform))

    def stats_detail(self, kind: str) -> dict[str, dict[str, dict[str, int | float | str]]]:
        """Return ``stats slabs`` or ``stats items`` per server, nested by slab class."""
        if kind not in {"slabs", "items"}:
            raise ValueError(f"kind must be 'slabs' or 'items', got {kind!r}")
        return {
            server.name: parse_detail(raw, kind) if isinstance(raw, dict) else {"error": raw}
            for server, raw in run_steps(self.stats_of_all_steps(kind), self._perform).items()
        }

    def metadump(self, limit: int = 1_000_000) -> dict[str, list[Item] | str]:
        """Return every server's items (``lru_crawler metadump``), or why it could not dump."""
        dumps: dict[str, list[Item] | str] = {}
        for server in self._nodes:
            try:
                connect = functools.partial(self.access.open, server, DUMP_TIMEOUT)
                dumps[server.name] = list(metadump(connect, server.name, limit=limit))
            except (OSError, RuntimeError) as error:
                dumps[server.name] = str(error)
        return dumps

    def dead_servers(self) -> list[str]:
        """Return the servers currently routed around."""
        with self._dead_lock:
            return sorted(node.server.name for node in self._dead)

    def close(self) -> None:
        """Close idle connections; the store reconnects on next use."""
        for node in self._nodes.values():
            node.close()


def _on_client(client: Client, command: str, args: tuple[Any, ...]) -> Any:
    """Run one command of the steps on a pymemcache client, answering as pymemcache does."""
    if command == "get_many":
        send_get(client, args[0])
        return read_values(client)
    if command == "incr_many":
        return _pipelined_incr(client, *args)
    if command == "leased_get":
        return _leased_get(client, *args)
    if command == "meta":
        return _meta_batch(client, args[0])
    return getattr(client, command)(*args)


def _fetch_pipelined(groups: dict[Node, list[str]]) -> tuple[dict[str, bytes], list[str]]:
    """Send every owner its ``get`` before reading any reply; return (found, keys to retry)."""
    sent, retry = [], []
    for node, group in groups.items():
        client = node.take()
        try:
            send_get(client, group)
            sent.append((node, client, group))
        except Exception as error:
            node.broken(client, error)
            retry += group
    found: dict[str, bytes] = {}
    for node, client, group in sent:
        try:
            found.update(read_values(client))
            node.give_back(client)
        except Exception as error:
            node.broken(client, error)
            retry += group
    return found, retry


def _leased_get(client: Client, request: bytes, beside: list[str]) -> tuple[meta.MetaReply, dict]:
    """Send an ``mg`` and (in ``request`` too) a text ``get`` of ``beside``; read both replies."""
    sock = socket_of(client)
    sock.sendall(request)
    if not beside:
        return read_parsed(sock, meta.parse_reply), {}  # type: ignore[return-value]
    return read_parsed(sock, meta.parse_reply_and_values)  # type: ignore[return-value]


def _meta_batch(client: Client, requests: list[bytes]) -> list[meta.MetaReply]:
    """Send meta requests together; read their replies, in order."""
    sock = socket_of(client)
    sock.sendall(b"".join(requests))
    return read_parsed(sock, lambda buf: meta.parse_replies(buf, len(requests)))  # type: ignore[return-value]


def _checked_replicas(replicas: int, servers: int) -> int:
    if not isinstance(replicas, int) or not 1 <= replicas <= servers:
        raise ConfigError(
            f"memcached: replicas must be between 1 and the number of servers ({servers}),"
            f" got {replicas!r}"
        )
    return replicas


def _as_server(spec: Server | tuple[str, int] | str) -> Server:
    if isinstance(spec, Server):
        return spec
    if isinstance(spec, tuple):
        return Server(*spec)
    host, _, port = spec.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"memcached server must look like 'host:port', got {spec!r}")
    return Server(host, int(port))


def _pipelined_incr(client: Client, keys: list[str], deltas: Mapping[str, int]) -> list[int | None]:
    # pymemcache has no multi-incr; its command pipe sends all lines, then reads the replies.
    commands = [b"incr %s %d\r\n" % (key.encode(), deltas[key]) for key in keys]
    replies = client._misc_cmd(commands, b"incr", False)
    return [None if reply == b"NOT_FOUND" else int(reply) for reply in replies]
