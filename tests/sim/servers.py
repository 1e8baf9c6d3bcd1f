"""The simulated world's servers: memcached on a network, and the database behind it.

The memcached is the library's own memcached-semantics store on a clock of whole seconds,
reached over a network with a latency tail that drops requests and loses replies after
the server applied them. The database keeps versioned rows.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from mcache.stores.memory.store import MemoryStore
from tests.sim.history import Applied
from tests.sim.processes import SimThread, Ticket, refused
from tests.sim.world import WholeSecondClock, World

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation


class SimMemcached(MemoryStore):
    """memcached as the store contract sees it: shared by every process, whole seconds."""

    traits = dataclasses.replace(MemoryStore.traits, process_local=False, expiry_slack=1)


class Server:
    """The simulated memcached server: its data, and whether it is up."""

    def __init__(self, world: World, applied: list[Applied] | None = None) -> None:
        self.world = world
        self.store = SimMemcached(clock=WholeSecondClock(world))
        self.down = False
        self.applied = applied if applied is not None else []
        """Every operation as the server applied it (what a differential run replays)."""

    def evict(self, key: str) -> None:
        """Drop ``key``, as memcached's LRU would."""
        existed = self.store.delete(key)
        self.applied.append((self.world.now, "delete", (key,), existed, False))

    def crash(self) -> None:
        """Lose everything and stop answering (until :meth:`restart`)."""
        self.store.flush()
        self.down = True
        self.applied.append((self.world.now, "flush", (), None, False))

    def restart(self) -> None:
        self.down = False


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
        return self.cut_until.get(thread.process.number, 0.0) <= self.sim.world.now

    def latency(self) -> float:
        rng = self.sim.world.rng
        tail = rng.random() < 0.01
        return 0.0001 + rng.expovariate(10_000.0) + (rng.uniform(0.01, 0.2) if tail else 0.0)

    def deliver(self, thread: SimThread, operation: Any, ticket: Ticket) -> None:
        """Send ``operation`` (a ``StoreCall``) to the server; its reply back to ``thread``."""
        sim = self.sim
        world, config = sim.world, sim.config
        out, back = self.latency(), self.latency()
        healed = sim.healed
        dropped = not healed and world.rng.random() < config.drop_rate
        dropped = dropped or not self.reaches(thread)
        if operation.method == "add" and operation.args[0] in sim.lock_rows and not healed:
            dropped = sim.refuse_lock(thread, operation.args[0]) or dropped
        lost = not healed and world.rng.random() < config.lost_reply_rate

        def apply() -> None:
            sim.history.operations += 1
            result, error = None, None
            if sim.server.down or dropped:
                error = refused("server down" if sim.server.down else "request dropped")
            else:
                try:
                    result = getattr(operation.store, operation.method)(*operation.args)
                except Exception as raised:
                    error = raised
                sim.history.applied.append(
                    (world.now, operation.method, operation.args, result, error is not None)
                )
                if (lost or not self.reaches(thread)) and error is None:
                    result, error = None, refused("reply lost")
                elif operation.method == "add" and result and operation.args[0] in sim.tag_rows:
                    sim.tag_created(operation.args[0], int(operation.args[1]))
                elif operation.method == "add" and result and operation.args[0] in sim.lock_rows:
                    sim.lock_won(thread)
                elif operation.method == "cas" and result and operation.args[0] in sim.entry_rows:
                    sim.entry_written(operation.args[0])
            world.after(back, lambda: thread.answer(ticket, result, error))

        world.after(out, apply)


class Database:
    """Rows with versions: a write commits the next version at once."""

    def __init__(self, keys: int) -> None:
        self.rows = [0] * keys
        self.written = [False] * keys
        """Rows written since a targeted fault last looked (see ``refuse_lock``)."""

    def write(self, key: int) -> int:
        self.rows[key] += 1
        self.written[key] = True
        return self.rows[key]
