"""The simulated world's servers: memcached on a network, and the database behind it.

The memcached is, by the seed, the library's own memcached-semantics store on a clock of
whole seconds (each store call one command), or a server that speaks memcached's
protocol (:mod:`tests.sim.memcached`), which the real store reaches command by command
(:mod:`tests.sim.nodes`). Either is reached over a network with a latency tail that drops
requests and loses replies after the server applied them. The database keeps versioned rows.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcache.model.entry import is_placeholder
from mcache.stores.memcached.steps import NodeCall
from mcache.stores.memcached.store import _on_client
from mcache.stores.memory.store import MemoryStore
from tests.sim.forced import refresh_behind_a_long_build
from tests.sim.history import Applied
from tests.sim.keys import reads_a_tag, tag_prefix
from tests.sim.memcached import SimMemcachedServer
from tests.sim.nodes import as_applied
from tests.sim.processes import SimThread, Ticket, refused
from tests.sim.redis import SimRedisServer, replicated
from tests.sim.world import EPOCH, WholeSecondClock, World

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation


class SimMemcached(MemoryStore):
    """memcached as the store contract sees it: shared by every process, whole seconds."""

    traits = dataclasses.replace(MemoryStore.traits, process_local=False, expiry_slack=1)


class Server:
    """The simulated memcached: its data, and whether it is up. Reached as the library's
    memcached-semantics store, it is one server; reached by the real store, a pool of
    ``servers`` protocol servers (``sim0``, ``sim1``, …), each up or down of its own."""

    def __init__(
        self, world: World, applied: list[Applied] | None = None, servers: int = 1
    ) -> None:
        self.world = world
        self.store = SimMemcached(clock=WholeSecondClock(world))
        self.memcacheds = [
            SimMemcachedServer(lambda: world.now + EPOCH, f"sim{n}") for n in range(servers)
        ]
        """The servers of the pool, as the real store reaches them, speaking the protocol."""
        self.memcached = self.memcacheds[0]
        self.redis = SimRedisServer(lambda: world.now + EPOCH)
        """The Redis the real Redis store reaches (``Config.store`` "redis")."""
        self.redis_replica: SimRedisServer | None = None
        """Its replica, when the store reads there (``Config.redis_replica_lag``)."""
        for server in self.memcacheds:
            server.flushed = functools.partial(self.flushed, server)
        self.on_flush: Callable[[], None] | None = None
        """Told of a client's flush (the run records it as a fault)."""
        self.on_lost: Callable[[str], None] = lambda key: None
        """Told of each key one server of several lost (its lease, on the meta protocol)."""
        self.owner: Callable[[str], str] = lambda key: self.memcached.name
        """The server (by name) that owns a key on the pool's ring."""
        self.down = False
        self.down_servers: set[str] = set()
        """The pool's servers that crashed and have not restarted (by name)."""
        self.applied = applied if applied is not None else []
        """Every operation as the server applied it (what a differential run replays)."""

    def replicate_redis(self, lag: float) -> None:
        """Give the Redis a replica ``lag`` seconds behind it."""
        replica = self.redis_replica = SimRedisServer(self.redis.now, "redis1")
        replicated(self.redis, replica, lambda apply: self.world.after(lag, apply))

    def is_down(self, server: SimMemcachedServer) -> bool:
        """Whether ``server`` of the pool answers nothing now."""
        return self.down or server.name in self.down_servers

    def holds_entry(self, key: str) -> bool:
        """Whether ``key`` holds an entry now (a build's placeholder is none), whichever way
        the processes reach the server; read without touching its LRU or its counts."""
        items = [server.live(key) for server in self.memcacheds]
        kept = self.store._items.get(key)  # (the simulation's own store: a test's look inside)
        live = kept is not None and not (
            kept.expires_at and kept.expires_at <= self.store._clock.time()
        )
        values = [item.value for item in items if item is not None]
        if isinstance(held := self.redis.live(key.encode()), bytes):
            values.append(held)
        value = values[0] if values else kept.value if live else b""  # type: ignore[union-attr]
        return bool(value) and b'"mc1p"' not in value

    def evict(self, key: str) -> None:
        """Drop ``key``, as memcached's LRU would."""
        existed = self.store.delete(key)
        for server in self.memcacheds:
            existed = server.evict(key) or existed
        existed = self.redis.remove(key.encode()) or existed  # (a replica follows)
        self.redis.replicate([key.encode()])
        self.applied.append((self.world.now, "delete", (key,), existed, False))

    def crash(self, index: int | None = None) -> None:
        """Lose everything and stop answering (until :meth:`restart`): the whole server,
        or (``index``) that server of a pool of several, whose keys alone are lost."""
        if index is None:
            self.store.flush()
            for redis in (self.redis, self.redis_replica):
                if redis is not None:
                    redis.flush()
            for server in self.memcacheds:
                server.flush()
            self.down = True
            self.applied.append((self.world.now, "flush", (), None, False))
            return
        server = self.memcacheds[index]
        self.down_servers.add(server.name)
        self.lose(server)

    def lose(self, server: SimMemcachedServer) -> None:
        """``server``, one of several, loses every item: each it owns recorded as deleted
        (a copy a stand-in kept during a failover is no key's own)."""
        keys = list(server.items)
        server.flush()
        self.lost(server, keys)

    def lost(self, server: SimMemcachedServer, keys: list[str]) -> None:
        for key in keys:
            if self.owner(key) == server.name:
                self.applied.append((self.world.now, "delete", (key,), True, False))
                self.on_lost(key)

    def restart(self, index: int | None = None) -> None:
        self.down = False
        servers = self.memcacheds if index is None else [self.memcacheds[index]]
        for server in servers:
            self.down_servers.discard(server.name)
            server.started = server.current()  # its uptime starts again

    def flushed(self, server: SimMemcachedServer) -> None:
        """A ``flush_all`` a client sent outside a run's scheduling (a rejoin's probe), told
        before ``server`` empties."""
        if len(self.memcacheds) == 1:
            self.applied.append((self.world.now, "flush", (), None, False))
        else:  # one of several: its keys alone are lost
            self.lost(server, list(server.items))
        if self.on_flush is not None:
            self.on_flush()


class Network:
    """Latency with a tail, dropped requests and replies lost after the server applied them."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.cut_until: dict[int, float] = {}
        """Processes cut off from the server (a partition), until when."""

    def cut(self, process: int, until: float) -> None:
        """Partition ``process`` from the server until ``until``: its requests go nowhere,
        and replies to it are lost."""
        self.cut_until[process] = until

    def reaches(self, thread: SimThread) -> bool:
        """Whether ``thread``'s process can reach the server now."""
        return self.reached_by(thread.process.number)

    def reached_by(self, process: int) -> bool:
        """Whether ``process`` can reach the server now."""
        return self.cut_until.get(process, 0.0) <= self.sim.world.now

    def latency(self) -> float:
        rng = self.sim.world.rng
        tail = rng.random() < 0.01
        return 0.0001 + rng.expovariate(10_000.0) + (rng.uniform(0.01, 0.2) if tail else 0.0)

    def draw(
        self, thread: SimThread, method: str, args: tuple[Any, ...]
    ) -> tuple[float, float, bool, bool]:
        """A request's fate: its latency out and back, whether it is dropped (by chance, a
        partition, or aimed: a lock attempt refused), whether its reply is lost."""
        sim = self.sim
        rng, config = sim.world.rng, sim.config
        out, back = self.latency(), self.latency()
        healed = sim.healed
        dropped = not healed and rng.random() < config.drop_rate
        dropped = dropped or not self.reaches(thread)
        if method == "add" and args[0] in sim.lock_rows and not healed:
            dropped = sim.refuse_lock(thread, args[0]) or dropped
        if thread.sends and thread.count == 1 and not healed:  # a send's hand-off
            dropped = sim.broker.refuse_hand_off(thread) or dropped
        if method == "cas" and args[0] in sim.lock_rows and int(args[3]) < 0:
            out += sim.release_held_back(args[0])
        lost = not healed and rng.random() < config.lost_reply_rate
        return out, back, dropped, lost

    def deliver(self, thread: SimThread, operation: Any, ticket: Ticket) -> None:
        """Send ``operation`` (a ``StoreCall``) to the server; its reply back to ``thread``."""
        sim = self.sim
        world = sim.world
        out, back, dropped, lost = self.draw(thread, operation.method, operation.args)

        def apply() -> None:
            sim.history.operations += 1
            result, error, slow = None, None, 0.0
            if sim.server.down or dropped:
                error = refused("server down" if sim.server.down else "request dropped")
            else:
                try:
                    result = getattr(operation.store, operation.method)(*operation.args)
                except Exception as raised:
                    error = raised
                done = [(operation.method, operation.args, result), *claimed(operation)]
                raised = error is not None
                for method, args, outcome in done:
                    sim.history.applied.append((world.now, method, args, outcome, raised))
                if (lost or not self.reaches(thread)) and error is None:
                    result, error = None, refused("reply lost")
                elif error is None:
                    slow = sum(self.applied_hooks(thread, *applied) for applied in done)
                    self.note_tag_read(thread, operation.method, operation.args)
            world.after(back + slow, lambda: thread.answer(ticket, result, error))

        world.after(out, apply)

    def deliver_node(self, thread: SimThread, operation: NodeCall, ticket: Ticket) -> None:
        """Send one command of the real store to the protocol server; its answer back to
        ``thread``, or the failure its node makes of a fault (a refused connection, a
        timeout), counted in the node's health as a real one would be."""
        sim = self.sim
        world = sim.world
        out, back, dropped, lost = self.draw(thread, operation.command, operation.args)
        node = operation.node

        def apply() -> None:
            sim.history.operations += 1
            result: Any = None
            failure: Exception | None = None
            slow = 0.0
            if sim.server.is_down(node.sim_server):  # type: ignore[attr-defined]
                failure = ConnectionRefusedError("simulated: server down")
            elif dropped:
                failure = TimeoutError("simulated: request dropped")
            else:
                try:
                    result = _on_client(node._new_client(), operation.command, operation.args)
                except Exception as raised:
                    failure = raised
                done = [] if failure else as_applied(sim, operation, result)
                for method, args, outcome in done:
                    sim.history.applied.append((world.now, method, args, outcome, False))
                if failure is None and (lost or not self.reaches(thread)):
                    result, failure = None, TimeoutError("simulated: reply lost")
                slow = sum(
                    self.applied_hooks(thread, method, args, outcome)
                    for method, args, outcome in (done if failure is None else ())
                )
                if failure is None:
                    self.note_tag_read(thread, operation.command, operation.args)

            def reply() -> None:
                error = None if failure is None else node.failure(failure, operation.key)
                if failure is None:
                    node.answered()
                thread.answer(ticket, result, error)

            world.after(back + slow, reply)

        world.after(out, apply)

    @functools.cached_property
    def tag_prefix(self) -> str:
        return tag_prefix(self.sim.processes[0].cache)

    def note_tag_read(self, thread: SimThread, method: str, args: tuple[Any, ...]) -> None:
        """Keep when ``thread`` last read a tag's version, its reply on its way back (a
        build's checker asks whether its caller waited since: ``Build.waited_unread``)."""
        if reads_a_tag(self.tag_prefix, method, args):
            thread.tags_read_at = self.sim.world.now

    def applied_hooks(
        self, thread: SimThread, method: str, args: tuple[Any, ...], result: Any
    ) -> float:
        """Tell the run's aimed faults of a command just applied (a tag key created, a lock
        won, an entry written, a placeholder kept alive); return the seconds its reply is
        to be held back on top of its latency."""
        sim = self.sim
        if method == "add" and result and args[0] in sim.tag_rows:
            sim.tag_created(args[0], int(args[1]))
        elif method == "add" and result and args[0] in sim.lock_rows:
            sim.lock_won(thread)
            refresh_behind_a_long_build(sim, thread, args[0])
        elif method == "cas" and result and args[0] in sim.entry_rows:
            if args[1] and is_placeholder(sim.codec.loads(args[1], args[0])):
                return sim.placeholder_kept(thread, args[0])
            sim.entry_written(args[0])
        return 0.0


def claimed(operation: Any) -> list[tuple[str, tuple[Any, ...], Any]]:
    """A read that claimed a stale entry's rebuild (Redis's ``get_many_claiming``), in the
    checkers' words: the ``add`` of its lock it made on the server."""
    if operation.method != "get_many_claiming" or operation.args[1].outcome is not True:
        return []
    claim = operation.args[1]
    return [("add", (claim.lock_key, claim.token, claim.lock_ms / 1000), True)]


class Database:
    """Rows with versions: a write commits the next version at once on the primary; a
    replica has it ``lag`` seconds later."""

    def __init__(self, keys: int, world: World | None = None, lag: float = 0.0) -> None:
        self.rows = [0] * keys
        self.written = [False] * keys
        """Rows written since a targeted fault last looked (see ``refuse_lock``)."""
        self.world = world
        self.lag = lag
        self.commits: list[list[tuple[float, int]]] = [[] for _ in range(keys)]
        """Each row's versions, with when the primary committed each."""

    def write(self, key: int) -> int:
        self.rows[key] += 1
        self.written[key] = True
        if self.world is not None:
            self.commits[key].append((self.world.now, self.rows[key]))
        return self.rows[key]

    def replica(self, key: int) -> int:
        """The version of row ``key`` the replica has now: the newest committed ``lag``
        seconds ago or more."""
        now = self.world.now if self.world is not None else 0.0
        seen = [version for at, version in self.commits[key] if at <= now - self.lag]
        return seen[-1] if seen else 0
