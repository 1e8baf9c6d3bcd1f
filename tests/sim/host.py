"""A simulated process: a ``Cache`` of its own on a host clock, its threads and renewer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache import Cache
from mcache.contract.store import Store
from mcache.randomness import RandomSource
from tests.sim.pool import SimPool
from tests.sim.processes import SimThread
from tests.sim.queue import SimQueueRefresher
from tests.sim.redis_store import sim_redis_store
from tests.sim.renewer import SimRefresher, SimRenewer
from tests.sim.transactions import may_store
from tests.sim.world import HostClock

if TYPE_CHECKING:
    from tests.sim.config import Config
    from tests.sim.simulation import Simulation


class SimProcess:
    """One simulated process: a ``Cache`` of its own on a host clock, and its threads."""

    def __init__(self, sim: Simulation, number: int, skew: float) -> None:
        self.sim = sim
        self.number = number
        self.alive = True
        self.generation = 0
        self.paused_until = 0.0
        self.clock = HostClock(sim.world, skew)
        self.threads: list[SimThread] = []
        self.start()

    def start(self) -> None:
        """Start (again, after a kill): a new cache, nothing of the old process's memory."""
        sim = self.sim
        config = sim.config
        queued = config.refresh == "queue"
        refresher = SimQueueRefresher(self) if queued else SimRefresher(self)
        self.cache = Cache(
            self.store(),
            namespace="sim",
            clock=self.clock,
            default_ttl=config.ttl,
            stale_ttl=config.stale_ttl,
            lock_timeout=config.lock_timeout,
            wait=config.wait,
            jitter=config.jitter,
            stats_interval=1e9,
            codec=sim.codec,
            refresh="background" if queued else config.refresh,
            refresher=refresher,
            replication_lag=replication_lag(config),
        )
        if queued:  # what a job names its cache by (a worker here is handed its cache)
            self.cache.parts.locator = "sim"
        self.cache.random = RandomSource(seed=sim.world.rng.getrandbits(64))
        self.cache.may_store = may_store  # as a framework tells it of transactions
        self.renewer = SimRenewer(self)
        self.cache.parts.renewer = self.renewer
        self.alive = True
        sim.broker.dispatch()  # a worker back takes the next job

    def store(self) -> Store:
        """What this process's cache reaches its server through (``Config.store``): the
        shared memcached-semantics store, a pool of its own on the protocol server (its
        ``dead_timeout`` and expiry times on this host's clock), or a Redis store of its
        own on the simulated Redis."""
        sim = self.sim
        if sim.config.store == "memory":
            return sim.server.store
        if sim.config.store == "redis":
            return sim_redis_store(sim.server.redis, sim.server.redis_replica)

        def refuses(name: str) -> OSError | None:
            server = next(s for s in sim.server.memcacheds if s.name == name.split(":")[0])
            reached = not sim.server.is_down(server) and sim.network.reached_by(self.number)
            return None if reached else ConnectionRefusedError("simulated: unreachable")

        servers = {f"{server.name}:11211": server for server in sim.server.memcacheds}

        def health(name: str, up: bool) -> None:
            sim.history.event("node_up" if up else "node_dead", f"{self.number} {name}")

        store = sim.config.store
        return SimPool(servers, self.clock, store, refuses, health, dead_timeout=2.0)

    def thread(self, name: str) -> SimThread:
        """A new thread of this process."""
        thread = SimThread(self, name)
        self.threads.append(thread)
        return thread

    def count(self) -> None:
        """Add what this process's cache counted to the run's counts."""
        counts = self.sim.counts
        for name, count in self.cache.counts.local().items():
            counts[name] = counts.get(name, 0) + count

    def kill(self) -> None:
        """SIGKILL: every thread stops where it is; its locks are renewed no more."""
        self.count()
        self.alive = False
        self.generation += 1
        for thread in [*self.threads, self.renewer.thread]:
            self.sim.graveyard.extend((thread.context, steps) for steps in thread.stack)
            thread.stack, thread.tasks, thread.busy = [], [], False
        self.renewer.renewing.clear()
        self.sim.broker.worker_lost(self)
        self.sim.history.killed(self)


def replication_lag(config: Config) -> float:
    """The ``replication_lag`` each cache is told: the replica's lag, with room for the
    widest skew between two hosts' clocks (the workers' included) and a little, and the
    lag of the Redis replica the tag versions are read from (read-replicas.md: "lag
    setting ≥ the database's lag + the cache replica's lag + skew"); 0 without a
    database replica."""
    if not config.replica_lag:
        return 0.0
    clocks = [*config.skews, 0.0]  # the queue's workers and the liveness reader keep time
    skew = max(clocks) - min(clocks)
    return config.replica_lag + config.redis_replica_lag + skew + 0.1
