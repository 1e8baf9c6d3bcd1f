"""The memcached store: a pool of servers behind the Store contract.

Keys are placed by a ring (:mod:`mcache.ring`); multi-key calls are grouped so
each server gets one request. Servers that stop answering are routed around
(:mod:`.memcached_node`), and keys that must not be lost can be written to
several servers (``replicas``): the replicas of a key are the servers that
follow its owner on the ring, which are also where its reads fail over to.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from pymemcache.client.base import Client

from ..api import NO_VALUE, CasToken, NoValueType
from ..errors import ConfigError, StoreUnavailable, ValueTooLarge
from ..keys import validate_store_key
from ..logs import FailureLog
from ..ring import LIBKETAMA_POINTS, Server, make_ring
from .base import MiB, check_delta, copies_per_owner, too_large_message
from .memcached_node import Node, NodeDown, NodeOptions
from .memcached_stats import parse_detail
from .memcached_wire import read_values, send_get

__all__ = ["MemcachedStore"]

T = TypeVar("T")
THIRTY_DAYS = 30 * 24 * 3600
ITEM_HEADROOM = 512
"""Bytes of memcached's 1 MiB item limit taken by the item header, key and flags."""
OWNER_CACHE_SIZE = 8192
PLACEMENT_CACHE_SIZE = 65536  # bases whose copies are remembered (per-object tags are many)


class MemcachedStore:
    """A pool of memcached servers with failover and optional replication."""

    expiry_slack = 1
    """memcached's clock counts whole seconds: a TTL of t lasts between t - 1 and t seconds."""

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
    ) -> None:
        _check_options(
            connect_timeout, timeout, max_pool_size, max_value_size, retry_attempts, dead_timeout
        )
        self.ring = make_ring([_as_server(s) for s in servers], hashing, ketama_points)
        self.servers = self.ring.servers
        self.max_value_size = max_value_size
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.replicas = _checked_replicas(replicas, len(self.servers))
        self.failures = FailureLog()
        options = NodeOptions(
            connect_timeout=connect_timeout,
            timeout=timeout,
            max_pool_size=max_pool_size,
            retry_attempts=retry_attempts,
            dead_timeout=dead_timeout,
            flush_on_rejoin=flush_on_rejoin,
            failures=self.failures,
        )
        self._dead: set[Node] = set()
        self._dead_lock = threading.Lock()
        self._nodes = {s: Node(s, options, self._health_changed) for s in self.servers}
        self._single = self._nodes[self.servers[0]] if len(self.servers) == 1 else None
        self._owners: dict[str, Node] = {}
        self._placed: dict[str, dict[Server, str]] = {}
        self._placeable = len(self.ring.owning_servers())  # a 0-point server owns no key
        self._attempts = retry_attempts * len(self.servers) + 1

    def __repr__(self) -> str:
        names = ",".join(f"{s.name}:{s.weight}" for s in self.servers)
        return f"MemcachedStore({names!r}, replicas={self.replicas})"

    def with_replicas(self, replicas: int) -> MemcachedStore:
        """Return a view of this store (same servers and health) writing to ``replicas`` servers.

        Use it for keys that must survive a server's loss, e.g. sessions:
        ``sessions = store.with_replicas(2)``.
        """
        view = copy.copy(self)
        view.replicas = _checked_replicas(replicas, len(self.servers))
        return view

    # -- routing ----------------------------------------------------------------------------

    def _health_changed(self, node: Node) -> None:
        with self._dead_lock:
            if node.dead_until:
                self._dead.add(node)
            else:
                self._dead.discard(node)

    def _owner(self, key: str) -> Node:
        """Return the key's owner while every server is up, remembering recent keys.

        Hot keys are asked for again and again; a dict lookup (~0.05 µs) beats
        hashing the key onto the continuum (~1.5 µs) on every hit.
        """
        node = self._owners.get(key)
        if node is None:
            node = self._single or self._nodes[self.ring.server_for(key)]
            if len(self._owners) >= OWNER_CACHE_SIZE:
                self._owners.clear()
            self._owners[key] = node
        return node

    def _route(self, key: str, count: int = 1) -> list[Node]:
        """Return the first ``count`` usable servers for ``key``, owner first."""
        if not self._dead and count == 1:
            return [self._owner(key)]
        nodes: list[Node] = []
        for server in self.ring.iter_servers(key):
            node = self._nodes[server]
            if node.usable():
                nodes.append(node)
                if len(nodes) == count:
                    break
        if not nodes:
            raise StoreUnavailable("every memcached server of the pool is marked dead")
        return nodes

    def spread(self, base: str) -> tuple[str, ...]:
        """Return keys derived from ``base``, one owned by each server, ``base`` itself first."""
        return tuple(dict.fromkeys(self._copies(base).values()))

    def colocated(self, base: str, near: str) -> str:
        """Return the key of ``spread(base)`` on the server that serves ``near`` now.

        With replicas the choice follows the ring owner even while it is down:
        the entry's replica still records the owner's copy, whose own replica
        answers, so an outage costs a second server per read, not a rebuild of
        every tagged entry the dead server owned.
        """
        if self._single is not None:
            return base
        if self._dead and self.replicas == 1:
            server = self._route(near)[0].server
        else:
            server = self._owner(near).server
        return self._copies(base).get(server, base)

    def _copies(self, base: str) -> dict[Server, str]:
        """Map each server to a key it owns, ``base`` or ``base~n`` for the smallest such n.

        Found by trying suffixes on the ring (a few µs per server, once per base);
        a server with too small a share of the continuum to be found within the
        bound gets no copy, and readers near it use ``base`` (one more server).
        """
        copies = self._placed.get(base)
        if copies is None:
            copies = copies_per_owner(base, self.ring.server_for, self._placeable)
            if len(self._placed) >= PLACEMENT_CACHE_SIZE:
                self._placed.clear()
            self._placed[base] = copies
        return copies

    def _on_owner(self, key: str, call: Callable[[Client], T]) -> T:
        """Run ``call`` on the key's first usable server, failing over when it is down."""
        for _attempt in range(self._attempts):
            node = self._route(key)[0]
            try:
                return node.run(call, key)
            except NodeDown:
                continue
        raise StoreUnavailable(f"no memcached server answered for {key!r}")

    def _on_replicas(self, key: str, call: Callable[[Client], T]) -> list[T]:
        """Run ``call`` on each of the key's replicas that answers; raise if none does."""
        results: list[T] = []
        for node in self._route(key, self.replicas):
            try:
                results.append(node.run(call, key))
            except NodeDown:
                continue
        if not results:
            raise StoreUnavailable(f"no replica of {key!r} answered")
        return results

    def _grouped(
        self, keys: Iterable[str], call: Callable[[Client, list[str]], T], rank: int = 0
    ) -> list[tuple[list[str], T]]:
        """Run ``call`` once per server on the keys whose ``rank``-th replica it is."""
        pending = list(keys)
        done: list[tuple[list[str], T]] = []
        for _attempt in range(self._attempts):
            groups: dict[Node, list[str]] = defaultdict(list)
            for key in pending:
                nodes = self._route(key, rank + 1)
                if len(nodes) > rank:
                    groups[nodes[rank]].append(key)
            pending = []
            for node, group in groups.items():
                try:
                    done.append((group, node.run(lambda c, g=group: call(c, g))))
                except NodeDown:
                    pending += group
            if not pending:
                return done
        raise StoreUnavailable("no memcached server answered for a multi-key call")

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> bytes | NoValueType:
        """Return the value stored under ``key``, or ``NO_VALUE``."""
        validate_store_key(key)
        if self.replicas > 1 or self._dead:
            return self.get_many([key]).get(key, NO_VALUE)
        try:
            return self._owner(key).run(lambda c: _get_one(c, key), key)
        except NodeDown:
            return self.get_many([key]).get(key, NO_VALUE)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return the values of the keys that exist, one request per server.

        With replicas, keys missing on their owner are looked up on the next
        replica, so a rejoined (empty) owner does not hide a replicated value.
        """
        missing = list(dict.fromkeys(keys))
        for key in missing:
            validate_store_key(key)
        if self.replicas == 1 and not self._dead:
            found, missing = self._fetch_pipelined(missing)
            if not missing:
                return found
        else:
            found = {}
        for rank in range(self.replicas):
            for _group, values in self._grouped(missing, lambda c, g: c.get_many(g), rank):
                found.update(values)
            missing = [k for k in missing if k not in found]
            if not missing:
                break
        return found

    def _fetch_pipelined(self, keys: list[str]) -> tuple[dict[str, bytes], list[str]]:
        """Send every owner its ``get`` before reading any reply; return (found, keys to retry).

        Keys whose server failed are handed back for the failover path.
        """
        groups: dict[Node, list[str]] = defaultdict(list)
        for key in keys:
            groups[self._owner(key)].append(key)
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

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Return ``(value, cas unique)`` from the owner; ``(NO_VALUE, None)`` when missing."""
        validate_store_key(key)
        value, token = self._on_owner(key, lambda c: c.gets(key))
        return (NO_VALUE, None) if value is None else (value, token)

    # -- writes -----------------------------------------------------------------------------

    def _check_size(self, key: str, value: bytes) -> None:
        if len(value) > self.max_value_size:
            message = too_large_message(key, len(value), self.max_value_size)
            raise ValueTooLarge(f"{message}; memcached's own limit is its -I setting")

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Store ``value`` on the key's replicas; an oversize value empties the key."""
        validate_store_key(key)
        if len(value) > self.max_value_size:
            self.delete(key)
            self._check_size(key, value)
        expire = _expire(ttl)
        if self.replicas == 1:
            self._on_owner(key, lambda c: c.set(key, value, expire))
        else:
            self._on_replicas(key, lambda c: c.set(key, value, expire))

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Store several values, one request per server; return the keys not stored."""
        too_large = [k for k, v in items.items() if len(v) > self.max_value_size]
        if too_large:
            self.delete_many(too_large)
        expire = _expire(ttl)
        failed = set(too_large)
        for rank in range(self.replicas):
            outcome = self._grouped(
                [k for k in items if k not in too_large],
                lambda c, g: c.set_many({k: items[k] for k in g}, expire),
                rank,
            )
            if rank == 0:
                failed.update(k for _group, not_stored in outcome for k in not_stored)
        return [k for k in items if k in failed]

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Store only if absent; the owner decides atomically, replicas then copy."""
        validate_store_key(key)
        self._check_size(key, value)
        expire = _expire(ttl)
        won = self._on_owner(key, lambda c: c.add(key, value, expire))
        if won and self.replicas > 1:
            self._copy_to_replicas(key, lambda c: c.set(key, value, expire))
        return won

    def _copy_to_replicas(self, key: str, call: Callable[[Client], object]) -> None:
        for node in self._route(key, self.replicas)[1:]:
            try:
                node.run(call, key)
            except NodeDown:
                continue

    def append(self, key: str, value: bytes) -> bool:
        """Append to an existing value on every replica; ``False`` when missing."""
        validate_store_key(key)
        self._check_size(key, value)
        return any(self._on_replicas(key, lambda c: c.append(key, value)))

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Add ``delta`` on the owner (wrapping at 2**64); ``None`` when missing."""
        return self._counter(key, delta, lambda c: c.incr(key, delta))

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        """Increment several keys with one pipelined request per server (owners only).

        Every ``incr`` of a server's batch is sent before any reply is read. Keys
        missing from the store come back as ``None``.
        """
        for key, delta in deltas.items():
            validate_store_key(key)
            check_delta(delta)
        results: dict[str, int | None] = {}
        for rank in range(self.replicas):
            # Replicas apply the same deltas (see _counter); one that lost a key is
            # seeded with the owner's result, so a failover never reads an old count.
            for group, replies in self._grouped(
                deltas, lambda c, g: _pipelined_incr(c, g, deltas), rank
            ):
                for key, reply in zip(group, replies, strict=True):
                    if rank == 0:
                        results[key] = reply
                    elif reply is None and results.get(key) is not None:
                        self._seed_replica(key, results[key], rank)  # type: ignore[arg-type]
        return results

    def _seed_replica(self, key: str, number: int, rank: int) -> None:
        nodes = self._route(key, rank + 1)
        if len(nodes) > rank:
            with contextlib.suppress(NodeDown):
                nodes[rank].run(lambda c: c.set(key, b"%d" % number, 0), key)

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Subtract ``delta`` on the owner, flooring at 0; ``None`` when missing."""
        return self._counter(key, delta, lambda c: c.decr(key, delta))

    def _counter(self, key: str, delta: int, call: Callable[[Client], int | None]) -> int | None:
        # Replicas apply the same increment rather than copy the owner's result, so
        # concurrent increments converge on every replica; one that lost the key
        # (a rejoined server) is seeded with the owner's count, without a TTL.
        validate_store_key(key)
        check_delta(delta)
        number = self._on_owner(key, call)
        if number is not None and self.replicas > 1:
            for node in self._route(key, self.replicas)[1:]:
                try:
                    if node.run(call, key) is None:
                        node.run(lambda c: c.add(key, b"%d" % number, 0), key)
                except NodeDown:
                    continue
        return number

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Store only if the owner's cas unique is still ``token``; replicas then copy."""
        validate_store_key(key)
        self._check_size(key, value)
        if not isinstance(token, bytes):
            return False
        expire = _expire(ttl)
        stored = bool(self._on_owner(key, lambda c: c.cas(key, value, token, expire)))
        if stored and self.replicas > 1:
            self._copy_to_replicas(key, lambda c: c.set(key, value, expire))
        return stored

    def delete(self, key: str) -> bool:
        """Delete ``key`` (from every server of the pool when replicated)."""
        validate_store_key(key)
        if self.replicas == 1:
            return self._on_owner(key, lambda c: c.delete(key))
        return any(self._everywhere(lambda c: c.delete(key)).values())

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys, one request per server."""
        keys = list(keys)
        for key in keys:
            validate_store_key(key)
        if self.replicas == 1:
            self._grouped(keys, lambda c, g: c.delete_many(g))
        elif keys:
            self._everywhere(lambda c: c.delete_many(keys))

    def touch(self, key: str, ttl: int) -> bool:
        """Give an existing key a new TTL on its replicas."""
        validate_store_key(key)
        return any(self._on_replicas(key, lambda c: c.touch(key, _expire(ttl))))

    def _everywhere(self, call: Callable[[Client], T]) -> dict[Server, T]:
        results: dict[Server, T] = {}
        for server, node in self._nodes.items():
            if node.usable():
                try:
                    results[server] = node.run(call)
                except NodeDown:
                    continue
        return results

    def flush(self) -> None:
        """Flush every server that answers."""
        if not self._everywhere(lambda c: c.flush_all(noreply=False)):
            raise StoreUnavailable("no memcached server of the pool answered flush_all")

    # -- statistics ---------------------------------------------------------------------------

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return ``stats`` of every server keyed by ``host:port``; a dead one says so."""
        return {
            server.name: parse_detail(raw, "") if isinstance(raw, dict) else raw
            for server, raw in self._stats_of_all("").items()
        }

    def stats_detail(self, kind: str) -> dict[str, dict[str, dict[str, int | float | str]]]:
        """Return ``stats slabs`` or ``stats items`` per server, nested by slab class."""
        if kind not in {"slabs", "items"}:
            raise ValueError(f"kind must be 'slabs' or 'items', got {kind!r}")
        return {
            server.name: parse_detail(raw, kind) if isinstance(raw, dict) else {"error": raw}
            for server, raw in self._stats_of_all(kind).items()
        }

    def _stats_of_all(self, kind: str) -> dict[Server, object]:
        report: dict[Server, object] = {}
        for server, node in self._nodes.items():
            if not node.usable():
                report[server] = {"error": "marked dead", "dead": 1}
                continue
            try:
                report[server] = node.run(lambda c: c.stats(*([kind] if kind else [])))
            except NodeDown as error:
                report[server] = {"error": str(error), "dead": 1}
        return report

    def dead_servers(self) -> list[str]:
        """Return the servers currently routed around."""
        with self._dead_lock:
            return sorted(node.server.name for node in self._dead)

    def close(self) -> None:
        """Close idle connections; the store reconnects on next use."""
        for node in self._nodes.values():
            node.close()


def _check_options(
    connect_timeout: float,
    timeout: float,
    max_pool_size: int,
    max_value_size: int,
    retry_attempts: int,
    dead_timeout: float,
) -> None:
    if connect_timeout <= 0 or timeout <= 0:
        raise ConfigError("memcached: connect_timeout and timeout must be > 0 seconds")
    if max_pool_size < 1:
        raise ConfigError(f"memcached: max_pool_size must be >= 1, got {max_pool_size!r}")
    if max_value_size < 1:
        raise ConfigError(f"memcached: max_value_size must be >= 1, got {max_value_size!r}")
    if retry_attempts < 1:
        raise ConfigError(f"memcached: retry_attempts must be >= 1, got {retry_attempts!r}")
    if dead_timeout < 0:
        raise ConfigError(f"memcached: dead_timeout must be >= 0 seconds, got {dead_timeout!r}")


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


def _get_one(client: Client, key: str) -> bytes | NoValueType:
    send_get(client, [key])
    return read_values(client).get(key, NO_VALUE)


def _pipelined_incr(client: Client, keys: list[str], deltas: Mapping[str, int]) -> list[int | None]:
    # pymemcache has no multi-incr; its command pipe sends all lines, then reads the replies.
    commands = [b"incr %s %d\r\n" % (key.encode(), deltas[key]) for key in keys]
    replies = client._misc_cmd(commands, b"incr", False)
    return [None if reply == b"NOT_FOUND" else int(reply) for reply in replies]


def _expire(ttl: int) -> int:
    """Translate a relative TTL to memcached's exptime (absolute beyond 30 days)."""
    if ttl < 0:
        return -1
    if ttl > THIRTY_DAYS:
        return int(time.time()) + ttl
    return int(ttl)
