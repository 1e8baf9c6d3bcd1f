"""The real memcached store in a run: its steps driven here, its commands on the network.

A store call to a :class:`~tests.sim.pool.SimPool` runs the store's own steps on the
calling thread; each command they yield (a ``NodeCall``) crosses the network to the
simulated server, is applied there at once through pymemcache's client and the store's
wire code, and its answer, or the failure the node makes of a fault, comes back. What was
applied is recorded in the checkers' words: a lease won is a lock taken (``add`` of the
entry's lock key), a write under it a ``cas`` that releases it, a counter created a tag's
``add``, so every checker reads the text and the meta protocol alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcache.errors import StoreUnavailable
from mcache.sansio.steps import StoreCall
from mcache.stores.memcached.meta import MetaReply
from mcache.stores.memcached.steps import FetchOwners, NodeCall
from tests.sim.pool import SimPool

if TYPE_CHECKING:
    from collections.abc import Generator

    from tests.sim.simulation import Simulation

Op = tuple[str, tuple[Any, ...], Any]
"""A command as the checkers read it: its name, its arguments, its result."""

LEASE = b"lease"
"""What the checkers read as held under a key's lock name while memcached leases its entry."""

STALE_LEASE = b"stale lease"
"""The value of the ``add`` that records a stale item's lease won (a miss's is ``LEASE``)."""

TEXT = {"get_many", "gets", "set", "add", "replace", "append", "prepend", "cas", "incr"}
TEXT |= {"decr", "delete", "delete_many", "touch", "incr_many", "set_many"}


def store_steps(operation: StoreCall) -> Generator[Any, Any, Any] | None:
    """The steps of a call to a simulated pool (None for any other store, or a method of
    the pool with no steps of its own: it is applied as one command)."""
    if not isinstance(operation.store, SimPool):
        return None
    form = getattr(operation.store, f"{operation.method}_steps", None)
    return None if form is None else form(*operation.args)


def fetch_steps(operation: FetchOwners) -> Generator[Any, Any, Any]:
    """A tagged hit's ``get`` on each owner, as the store's pipelined fetch: the keys of a
    server that does not answer are to be retried (``(found, retry)``)."""
    found: dict[str, bytes] = {}
    retry: list[str] = []
    for node, group in operation.groups.items():
        try:
            found.update((yield NodeCall(node, "get_many", (group,), group[0])))
        except StoreUnavailable:
            retry += group
    return found, retry


def as_applied(sim: Simulation, operation: NodeCall, result: Any) -> list[Op]:
    """What ``operation`` did, in the checkers' words (see the module)."""
    command, args = operation.command, operation.args
    if command in TEXT:
        return [(command, args, result), *_lease_taken(sim, command, args, result)]
    if command == "flush_all":
        return [("flush", (), None)]
    if command == "leased_get":
        reply, _found = result
        return _meta_ops(sim, args[0].split(b"\r\n", 1)[0], b"", reply)
    if command == "meta":
        ops: list[Op] = []
        for request, reply in zip(args[0], result, strict=True):
            line, _, rest = request.partition(b"\r\n")
            ops += _meta_ops(sim, line, rest[:-2], reply)
        return ops
    return []


def _lease_taken(sim: Simulation, command: str, args: tuple[Any, ...], result: Any) -> list[Op]:
    """On the meta protocol a lease is the entry's cas: a text command that deletes or
    rewrites the entry takes it from its holder, whose write is then refused."""
    if sim.config.store != "meta" or not result or command not in ("delete", "set", "cas"):
        return []
    lock = sim.lease_locks.get(args[0])
    return [] if lock is None else [("cas", (lock, LEASE, 0, -1), True)]


def _meta_ops(sim: Simulation, line: bytes, value: bytes, reply: MetaReply) -> list[Op]:
    words = line.split()
    if len(words) < 2:
        return []
    verb, key = words[0], words[1].decode()
    asked = {word[:1]: word[1:] for word in words[2:]}
    lock = sim.lease_locks.get(key)
    done = reply.code == b"HD"
    ops: list[Op] = []
    if verb == b"mg" and reply.won and lock is not None:
        left = int(asked[b"N"]) if reply.won_placeholder else max(0, reply.ttl or 0)
        ops.append(("add", (lock, LEASE if reply.won_placeholder else STALE_LEASE, left), True))
    elif verb == b"mg" and b"T" in asked and reply.code in (b"HD", b"VA") and lock is not None:
        ops.append(("cas", (lock, LEASE, reply.cas, int(asked[b"T"])), True))
    elif verb == b"ms" and done:
        ttl = int(asked.get(b"T", b"0"))
        if ttl < 0:
            ops.append(("delete", (key,), True))
        elif b"C" in asked:
            ops.append(("cas", (key, value, int(asked[b"C"]), ttl), True))
        else:
            ops.append(("set", (key, value, ttl), True))
        if lock is not None:
            ops.append(("cas", (lock, LEASE, 0, -1), True))
    elif verb == b"md" and done:
        if b"I" not in asked:
            ops.append(("delete", (key,), True))
        if lock is not None:  # the lease let go, taken by a claim, or gone with the item
            ops.append(("cas", (lock, LEASE, 0, -1), True))
    elif verb == b"ma" and reply.code == b"VA" and reply.value is not None:
        if b"N" in asked and reply.value == asked.get(b"J"):
            ops.append(("add", (key, reply.value, 0), True))
        else:
            ops.append(("incr", (key, int(asked.get(b"D", b"1"))), int(reply.value)))
    return ops
