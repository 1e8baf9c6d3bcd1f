"""The memcached store's routing and commands, written once as steps for both drivers.

Each ``*_steps`` method checks its arguments, picks servers on the ring and yields its
commands as :class:`NodeCall` or :class:`FetchOwners`; a server that does not answer raises
:class:`~mcache.stores.memcached.node.NodeDown` at the yield, so failover is plain
``try``/``except``. :class:`~mcache.stores.memcached.store.MemcachedStore` performs them with
pymemcache's blocking clients, :class:`~mcache.stores.memcached.async_store.AsyncMemcachedStore`
on asyncio connections (see :mod:`mcache.sansio.steps`): one ring, failover and replication.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcache.clock import Clock
from mcache.contract.store import NO_VALUE, CasToken, NoValueType
from mcache.contract.store_helpers import check_delta, check_size, copies_per_owner
from mcache.errors import StoreUnavailable
from mcache.model.keys import validate_store_key, validated_keys
from mcache.model.ring import Ring, Server
from mcache.sansio.steps import Steps
from mcache.stores.memcached.node import Node, NodeDown

__all__ = ["FetchOwners", "MemcachedSteps", "NodeCall"]

THIRTY_DAYS = 30 * 24 * 3600
OWNER_CACHE_SIZE = 8192
PLACEMENT_CACHE_SIZE = 65536  # bases whose copies are remembered (per-object tags are many)


@dataclass(slots=True)
class NodeCall:
    """``command(*args)`` on one server; the command and its answer are pymemcache's."""

    node: Node
    command: str
    args: tuple[Any, ...]
    key: str = ""


@dataclass(slots=True)
class FetchOwners:
    """One ``get`` per server for its group of keys, all sent first; ``(found, to retry)``."""

    groups: dict[Node, list[str]]


class MemcachedSteps:
    """The :class:`~mcache.contract.store.Store` contract on a memcached pool, as steps."""

    ring: Ring
    servers: list[Server]
    clock: Clock
    replicas: int
    max_value_size: int
    _nodes: dict[Server, Node]
    _dead: set[Node]
    _single: Node | None
    _owners: dict[str, Node]
    _groups: dict[tuple[str, ...], dict[Node, list[str]]]
    _placed: dict[str, dict[Server, str]]
    _placeable: int
    _attempts: int

    # -- routing (no I/O) ---------------------------------------------------------------------

    def _owner(self, key: str) -> Node:
        """Return the key's owner while every server is up, remembering recent keys: for a
        hot key a dict lookup (~0.05 µs) beats hashing onto the continuum (~1.5 µs)."""
        node = self._owners.get(key)
        if node is None:
            node = self._single or self._nodes[self.ring.server_for(key)]
            self._owners.remember(key, node)
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
        """Return the key of ``spread(base)`` on the server that serves ``near`` now. With
        replicas it follows the ring owner even while that is down: the owner's copy has a
        replica too, so an outage costs a second server per read, not a rebuild of every
        tagged entry the dead server owned."""
        if self._single is not None:
            return base
        if self._dead and self.replicas == 1:
            server = self._route(near)[0].server
        else:
            server = self._owner(near).server
        return self._copies(base).get(server, base)

    def _copies(self, base: str) -> dict[Server, str]:
        """Map each server to a key it owns, ``base`` or ``base~n`` for the smallest such n,
        found by trying suffixes (a few µs per server, once per base); a server with too
        small a share of the ring gets no copy, and readers near it use ``base``."""
        copies = self._placed.get(base)
        if copies is None:
            copies = copies_per_owner(base, self.ring.server_for, self._placeable)
            self._placed.remember(base, copies)
        return copies

    # -- sending commands ---------------------------------------------------------------------

    def _on_owner_steps(self, key: str, command: str, args: tuple[Any, ...]) -> Steps[Any]:
        """Run ``command`` on the key's first usable server, failing over when it is down."""
        for _attempt in range(self._attempts):
            node = self._route(key)[0]
            try:
                return (yield NodeCall(node, command, args, key))
            except NodeDown:
                continue
        raise StoreUnavailable(f"no memcached server answered for {key!r}")

    def _on_all_steps(
        self, nodes: Iterable[Node], command: str, args: tuple[Any, ...], key: str = ""
    ) -> Steps[list[Any]]:
        """Run ``command`` on all of ``nodes``; return the answers of those that answered."""
        results: list[Any] = []
        for node in nodes:
            try:
                results.append((yield NodeCall(node, command, args, key)))
            except NodeDown:
                continue
        return results

    def _on_replicas_steps(self, key: str, command: str, args: tuple[Any, ...]) -> Steps[list[Any]]:
        """Run ``command`` on each of the key's replicas that answers; raise if none does."""
        results = yield from self._on_all_steps(self._route(key, self.replicas), command, args, key)
        if not results:
            raise StoreUnavailable(f"no replica of {key!r} answered")
        return results

    def _copy_to_replicas_steps(self, key: str, command: str, args: tuple[Any, ...]) -> Steps[None]:
        yield from self._on_all_steps(self._route(key, self.replicas)[1:], command, args, key)

    def _grouped_steps(
        self,
        keys: Iterable[str],
        command: str,
        args_for: Callable[[list[str]], tuple[Any, ...]],
        rank: int = 0,
    ) -> Steps[list[tuple[list[str], Any]]]:
        """Run ``command`` once per server on the keys whose ``rank``-th replica it is."""
        pending = list(keys)
        done: list[tuple[list[str], Any]] = []
        for _attempt in range(self._attempts):
            groups: dict[Node, list[str]] = defaultdict(list)
            for key in pending:
                nodes = self._route(key, rank + 1)
                if len(nodes) > rank:
                    groups[nodes[rank]].append(key)
            pending = []
            for node, group in groups.items():
                try:
                    done.append((group, (yield NodeCall(node, command, args_for(group)))))
                except NodeDown:
                    pending += group
            if not pending:
                return done
        raise StoreUnavailable("no memcached server answered for a multi-key call")

    def _everywhere_steps(self, command: str, args: tuple[Any, ...]) -> Steps[list[Any]]:
        usable = (node for node in self._nodes.values() if node.usable())  # probed in turn
        return (yield from self._on_all_steps(usable, command, args))

    # -- reads --------------------------------------------------------------------------------

    def get_steps(self, key: str) -> Steps[bytes | NoValueType]:
        validate_store_key(key)
        if self.replicas == 1 and not self._dead:
            try:
                found = yield NodeCall(self._owner(key), "get_many", ([key],), key)
            except NodeDown:
                pass  # failing over below
            else:
                return found.get(key, NO_VALUE)  # type: ignore[no-any-return]
        return (yield from self.get_many_steps([key])).get(key, NO_VALUE)

    def get_many_steps(self, keys: Iterable[str]) -> Steps[dict[str, bytes]]:
        """With replicas, keys missing on their owner are looked up on the next replica,
        so a rejoined (empty) owner does not hide a replicated value."""
        if self.replicas == 1 and not self._dead:
            groups = self._owner_groups(keys)
            if not groups:
                return {}
            found, missing = yield FetchOwners(groups)
        else:
            found, missing = {}, self._wanted(keys)
        return (yield from self._replicas_fetch_steps(found, missing))

    def _wanted(self, keys: Iterable[str]) -> list[str]:
        """Return ``keys`` once each, every one checked."""
        wanted = list(dict.fromkeys(keys))
        validated_keys(wanted)
        return wanted

    def _owner_groups(self, keys: Iterable[str]) -> dict[Node, list[str]]:
        """Group ``keys`` (checked, once each) by owner, every server up and one replica,
        remembering recent key sets: a tagged hit asks for the same keys every time, and
        checking and placing them cost more than the rest of the store's part of the hit."""
        wanted = tuple(keys)
        try:
            groups = self._groups.get(wanted)
        except TypeError:  # something unhashable: _wanted says what is wrong with it
            groups = None
        if groups is None:
            groups = defaultdict(list)
            for key in self._wanted(wanted):
                groups[self._owner(key)].append(key)
            self._groups.remember(wanted, groups)
        return groups

    def _replicas_fetch_steps(
        self, found: dict[str, bytes], missing: list[str]
    ) -> Steps[dict[str, bytes]]:
        """Add to ``found`` the ``missing`` keys, asking each rank of replicas in turn."""
        for rank in range(self.replicas):
            if not missing:
                break
            fetched = yield from self._grouped_steps(missing, "get_many", _keys_only, rank)
            for _group, values in fetched:
                found.update(values)
            missing = [k for k in missing if k not in found]
        return found

    def gets_steps(self, key: str) -> Steps[tuple[bytes | NoValueType, CasToken | None]]:
        validate_store_key(key)
        value, token = yield from self._on_owner_steps(key, "gets", (key,))
        return (NO_VALUE, None) if value is None else (value, token)

    # -- writes -------------------------------------------------------------------------------

    def _check_size(self, key: str, value: bytes) -> None:
        check_size(key, value, self.max_value_size, "; memcached's own limit is its -I setting")

    def set_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[None]:
        yield from self._written_steps(key, value, ttl, "set")

    def replace_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        """``replace``, routed as :meth:`set_steps` is; stored if a replica had the key."""
        return any((yield from self._written_steps(key, value, ttl, "replace")))

    def _written_steps(self, key: str, value: bytes, ttl: int, command: str) -> Steps[list[Any]]:
        """``set`` or ``replace`` on the key's owner (failing over) or on every replica that
        answers; return their answers. A value over the limit takes the key away first, as
        memcached does, then raises."""
        validate_store_key(key)
        if len(value) > self.max_value_size:
            yield from self.delete_steps(key)
            self._check_size(key, value)
        args = (key, value, expire_of(ttl, self.clock))
        if self.replicas == 1:
            return [(yield from self._on_owner_steps(key, command, args))]
        return (yield from self._on_replicas_steps(key, command, args))

    def set_many_steps(self, items: Mapping[str, bytes], ttl: int = 0) -> Steps[list[str]]:
        too_large = [k for k, v in items.items() if len(v) > self.max_value_size]
        if too_large:
            yield from self.delete_many_steps(too_large)
        expire = expire_of(ttl, self.clock)
        failed = set(too_large)
        fitting = [k for k in items if k not in too_large]
        for rank in range(self.replicas):
            outcome = yield from self._grouped_steps(
                fitting, "set_many", lambda group: ({k: items[k] for k in group}, expire), rank
            )
            if rank == 0:
                failed.update(k for _group, not_stored in outcome for k in not_stored)
        return [k for k in items if k in failed]

    def add_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        validate_store_key(key)
        self._check_size(key, value)
        args = (key, value, expire_of(ttl, self.clock))
        won = yield from self._on_owner_steps(key, "add", args)
        if won and self.replicas > 1:
            yield from self._copy_to_replicas_steps(key, "set", args)
        return bool(won)

    def append_steps(self, key: str, value: bytes) -> Steps[bool]:
        return (yield from self._joined_steps(key, value, "append"))

    def prepend_steps(self, key: str, value: bytes) -> Steps[bool]:
        return (yield from self._joined_steps(key, value, "prepend"))

    def _joined_steps(self, key: str, value: bytes, command: str) -> Steps[bool]:
        """``append`` or ``prepend`` on every replica that answers: stored if one had the key."""
        validate_store_key(key)
        self._check_size(key, value)
        return any((yield from self._on_replicas_steps(key, command, (key, value))))

    def incr_steps(self, key: str, delta: int, command: str = "incr") -> Steps[int | None]:
        """``incr`` (wrapping at 2**64) or ``decr`` (flooring at 0) on the owner. Replicas
        apply the same delta, so concurrent increments converge on each; one that lost the
        key (a rejoined server) is seeded with the owner's count, without a TTL."""
        validate_store_key(key)
        check_delta(delta)
        number = yield from self._on_owner_steps(key, command, (key, delta))
        if number is not None and self.replicas > 1:
            for node in self._route(key, self.replicas)[1:]:
                try:
                    if (yield NodeCall(node, command, (key, delta), key)) is None:
                        yield NodeCall(node, "add", (key, b"%d" % number, 0), key)
                except NodeDown:
                    continue
        return number  # type: ignore[no-any-return]

    def incr_many_steps(self, deltas: Mapping[str, int]) -> Steps[dict[str, int | None]]:
        """One pipelined batch of ``incr`` per server; a replica that lost a key is seeded
        with the owner's result, so a failover never reads an old count."""
        check_deltas(deltas)
        results: dict[str, int | None] = {}
        for rank in range(self.replicas):
            batches = yield from self._grouped_steps(
                deltas, "incr_many", lambda group: (group, deltas), rank
            )
            for group, replies in batches:
                for key, reply in zip(group, replies, strict=True):
                    if rank == 0:
                        results[key] = reply
                    elif reply is None and results.get(key) is not None:
                        yield from self._seed_replica_steps(key, results[key], rank)  # type: ignore[arg-type]
        return results

    def _seed_replica_steps(self, key: str, number: int, rank: int) -> Steps[None]:
        seeded = self._route(key, rank + 1)[rank:]  # the rank-th replica, if there is one
        yield from self._on_all_steps(seeded, "set", (key, b"%d" % number, 0), key)

    def cas_steps(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> Steps[bool]:
        validate_store_key(key)
        self._check_size(key, value)
        if not isinstance(token, bytes):
            return False
        expire = expire_of(ttl, self.clock)
        stored = bool((yield from self._on_owner_steps(key, "cas", (key, value, token, expire))))
        if stored and self.replicas > 1:
            yield from self._copy_to_replicas_steps(key, "set", (key, value, expire))
        return stored

    def delete_steps(self, key: str) -> Steps[bool]:
        validate_store_key(key)
        if self.replicas == 1:
            return bool((yield from self._on_owner_steps(key, "delete", (key,))))
        return any((yield from self._everywhere_steps("delete", (key,))))

    def delete_many_steps(self, keys: Iterable[str]) -> Steps[None]:
        keys = self._wanted(keys)
        if self.replicas == 1:
            yield from self._grouped_steps(keys, "delete_many", _keys_only)
        elif keys:
            yield from self._everywhere_steps("delete_many", (keys,))

    def touch_steps(self, key: str, ttl: int) -> Steps[bool]:
        validate_store_key(key)
        return any(
            (yield from self._on_replicas_steps(key, "touch", (key, expire_of(ttl, self.clock))))
        )

    def flush_steps(self) -> Steps[None]:
        if not (yield from self._everywhere_steps("flush_all", ())):
            raise StoreUnavailable("no memcached server of the pool answered flush_all")

    def stats_of_all_steps(self, kind: str) -> Steps[dict[Server, object]]:
        """Each server's ``stats`` (of ``kind``); a dead or silent one reports so."""
        report: dict[Server, object] = {}
        for server, node in self._nodes.items():
            if not node.usable():
                report[server] = {"error": "marked dead", "dead": 1}
                continue
            try:
                report[server] = yield NodeCall(node, "stats", (kind,) if kind else ())
            except NodeDown as error:
                report[server] = {"error": str(error), "dead": 1}
        return report


def check_deltas(deltas: Mapping[str, int]) -> None:
    """Check a multi-key increment's keys and deltas before anything is sent."""
    for key, delta in deltas.items():
        validate_store_key(key)
        check_delta(delta)


def _keys_only(group: list[str]) -> tuple[Any, ...]:
    return (group,)


def expire_of(ttl: int, clock: Clock) -> int:
    """Translate a relative TTL to memcached's exptime (absolute beyond 30 days, on the
    servers' time: ``clock``, the store's, not a cache's)."""
    if ttl < 0:
        return -1
    if ttl > THIRTY_DAYS:
        return int(clock.time()) + ttl
    return int(ttl)
