"""One simulated run: a seed's configuration played out, then checked.

A run has a simulated memcached (the library's own memcached-semantics store on a clock
of whole seconds, reached over a simulated network that drops requests and loses
replies), a database of versioned rows, processes whose threads read and write them
through the real ``Cache``, and the faults the seed chose. After the faults heal, a
liveness phase reads every key once more from a fresh process.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

from mcache.model.codec import Codec, JsonSerializer
from mcache.model.tags import version_ms
from tests.sim.checkers import check
from tests.sim.config import Config, Fault, choose
from tests.sim.dead_leases import aim_kill
from tests.sim.history import History, Violation
from tests.sim.host import SimProcess
from tests.sim.keys import entry_key, lock_key
from tests.sim.outliving import delete_over_outliving
from tests.sim.pages import page_over_rebuild
from tests.sim.processes import SimThread, Steps
from tests.sim.queue import BUILDERS, SimBroker
from tests.sim.servers import Database, Network, Server
from tests.sim.workload import Workload
from tests.sim.world import EPOCH, World


@dataclass
class Result:
    """A run's outcome: what it broke, and what it reached."""

    config: Config
    violations: list[Violation]
    digest: str
    history: History
    counts: dict[str, int] = field(default_factory=dict)
    """What the caches counted (``CacheStats``), every process's, killed ones' included."""


CODEC = Codec(JsonSerializer())

HORIZON = 120.0
"""Virtual seconds a history may run before its faults heal (its calls end within ~20)."""

SLOW_RELEASE = 0.15
"""Seconds a ``slow_releases`` release is late: within the quarter second a waiter gives
a holder to free its lock (``BUSY_SECONDS``)."""

LASTING = {"crash", "pause", "late_renewer", "partition", "broker_down"}
"""Faults that last their ``seconds``; the others strike once."""


class Simulation:
    """A seed's run."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.world = World(config.seed)
        self.history = History(now=lambda: self.world.now)
        servers = config.servers if config.store in ("text", "meta") else 1
        self.server = Server(self.world, self.history.applied, servers)
        if config.store == "redis" and config.redis_replica_lag:
            self.server.replicate_redis(config.redis_replica_lag)
        self.server.on_lost = self.lease_lost
        self.server.owner = self.owner
        self.server.on_flush = lambda: self.history.event("rejoin_flush")
        self.network = Network(self)
        self.database = Database(config.keys, self.world, config.replica_lag)
        self.workload = Workload(self)
        self.codec = CODEC
        self.healed = False
        self.counts: dict[str, int] = {}
        self.running: SimThread | None = None
        """The thread whose steps run now (a lock won is this thread's)."""
        self.graveyard: list[tuple[contextvars.Context, Steps]] = []
        BUILDERS.clear()
        self.broker = SimBroker(self)
        self.processes = [SimProcess(self, n, skew) for n, skew in enumerate(config.skews)]
        first_worker = len(self.processes) + 1  # after the liveness phase's process
        workers = config.workers if config.refresh == "queue" else 0
        self.broker.workers = [SimProcess(self, first_worker + n, 0.0) for n in range(workers)]
        self.skews_seen = [[skew] for skew in config.skews]
        """Each process's clock skews, its first and each a clock jump left it at."""
        tags_of = self.processes[0].cache
        self.tag_rows = {tags_of.tags.key(f"t{key}"): key for key in range(config.keys)}
        self.lock_rows = {lock_key(tags_of, key): key for key in range(config.keys)}
        self.entry_rows = {
            entry_key(tags_of, key, entry): (entry, key)
            for entry in ("row", "page")
            for key in range(config.keys)
        }
        self.lease_locks = {
            entry_key(tags_of, key, entry): lock_key(tags_of, key, entry)
            for entry in ("row", "page")
            for key in range(config.keys)
        }
        """Each entry's lock key: what a lease on the entry is recorded as (meta protocol)."""
        self.races = self.refusals = self.raced_builds = self.cancels = 0
        self.forced_cancels = 0
        self.renewals_aimed = self.late_reads = self.raced_pages = self.rebuilds_paged = 0
        self.raced_keeps = self.slowed_releases = self.holders_killed = 0
        self.outliving_deletes = self.refreshes_aimed = 0

    # -- faults ---------------------------------------------------------------------------

    def schedule(self, fault: Fault) -> None:
        world, history = self.world, self.history

        def strike() -> None:
            lasting = fault.seconds if fault.kind in LASTING else 0.0
            history.event(fault.kind, f"{fault.target} for {fault.seconds}", lasting)
            if fault.kind == "crash":
                pool = len(self.server.memcacheds)
                crashed = world.rng.randrange(pool) if pool > 1 else None  # one of several
                self.server.crash(crashed)
                world.after(fault.seconds, lambda: self.server.restart(crashed))
            elif fault.kind == "kill":
                process = self.processes[int(fault.target)]
                if process.alive:
                    process.kill()
                    world.after(fault.seconds, process.start)
            elif fault.kind == "pause":
                self.processes[int(fault.target)].paused_until = world.now + fault.seconds
            elif fault.kind == "partition":
                self.network.cut(int(fault.target), world.now + fault.seconds)
            elif fault.kind == "clock_jump":
                clock = self.processes[int(fault.target)].clock
                clock.skew += fault.seconds
                self.skews_seen[int(fault.target)].append(clock.skew)
            elif fault.kind == "cancel":
                # a caller's task; not a shielded operation's, which asyncio.shield keeps
                # from its caller's cancellation
                busy = [
                    t
                    for p in self.processes
                    for t in p.threads
                    if t.expected and t.stack and t.cancellable and not t.name.endswith("-shielded")
                ]
                if busy:
                    world.rng.choice(busy).cancel()
            elif fault.kind == "broker_down":
                self.broker.go_down(fault.seconds)
            elif fault.kind == "late_renewer":
                for process in self.processes:
                    process.renewer.late = fault.seconds
                world.after(fault.seconds, self.renewers_on_time)
            else:
                self.evict(fault.kind, int(fault.target))

        world.at(fault.at, strike)

    def tag_created(self, store_key: str, version: int) -> None:
        """A targeted fault (``race_tags``): a tag key just created at ``version`` is lost,
        and a process drawn at random bumps it when its own clock reads the millisecond
        the lost copy was made at (at once, if its clock is past it), then reads the key."""
        if not self.config.race_tags or self.races >= 3 or self.healed:
            return
        self.races += 1
        world = self.world
        process = world.rng.choice([p for p in self.processes if p.alive] or self.processes)
        made_ms = version_ms(version) + 0.5
        when = made_ms / 1000 - EPOCH - process.clock.skew - 0.0003  # the bump's read first
        when = max(when, world.now + 0.00003)
        world.at(when - 0.00001, lambda: self.server.evict(store_key))
        self.history.event("race_tag", store_key)
        thread = process.thread(f"p{process.number}race{self.races}")
        key = self.tag_rows[store_key]
        self.workload.write(thread, key, when - world.now)
        self.workload.read(thread, key, 0.01, 0.01)

    def entry_written(self, store_key: str) -> None:
        """A targeted fault (``late_readers``): two processes read an entry just written
        2 s after its ``ttl + stale_ttl`` ends, 50 ms apart, the first building for 0.3 s:
        the second must find it gone and wait, not be served it stale. With a
        ``stale_ttl``, every other time a reader first rebuilds it while stale, for
        longer than its life has left, and fails (its lease kept it meanwhile)."""
        config = self.config
        if not config.late_readers or self.late_reads >= 3 or self.healed:
            return
        latest = config.ttl * (1 + config.jitter) + 2 * config.stale_ttl + 5.0
        if self.world.now + latest > HORIZON:
            return  # its reads would still run once the faults heal
        self.late_reads += 1
        entry, key = self.entry_rows[store_key]
        self.history.event("late_readers", store_key)
        part = 0.01 if entry == "page" else None
        rng = self.world.rng
        stale_at = config.ttl * (1 + config.jitter) + 0.2
        after = config.ttl * (1 + config.jitter) + config.stale_ttl + 2.0
        if config.stale_ttl and rng.random() < 0.5:
            failing = rng.choice(self.processes).thread(f"late{self.late_reads}-failing")
            seconds = config.stale_ttl + 1.5
            # forced, so it rebuilds here whether the seed's refresher is sync or not
            self.workload.read(failing, key, seconds, stale_at, "raise", part, forced=True)
            after = stale_at + seconds + 0.5
        pair = rng.sample(self.processes, 2) if len(self.processes) > 1 else self.processes
        for n, process in enumerate(pair):
            thread = process.thread(f"p{process.number}late{self.late_reads}.{n}")
            self.workload.read(thread, key, 0.3, after + 0.05 * n, part_seconds=part)

    def placeholder_kept(self, keeper: SimThread, store_key: str) -> float:
        """A targeted fault (``race_keeps``): a build's keep-alive has just rewritten its
        placeholder; its reply comes late, and meanwhile another process deletes the row's
        entry and a third reads the key, waits out the build's lock and adds its own
        placeholder for a long build (the first three times). Return the reply's extra
        delay: the third's wait, and a little, shorter than the lock's timeout."""
        config = self.config
        entry, key = self.entry_rows[store_key]
        aimed = config.race_keeps and entry == "row" and config.wait < config.lock_timeout
        if not aimed or self.raced_keeps >= 3:
            return 0.0
        others = self.others_alive(keeper.process)
        if self.healed or not others:
            return 0.0
        self.raced_keeps += 1
        held_back = config.wait + 0.05
        self.history.event("race_keep", store_key, held_back)
        rng = self.world.rng
        writer = rng.choice(others)
        reader = rng.choice([p for p in others if p is not writer] or others)
        number = self.raced_keeps
        self.workload.write(writer.thread(f"p{writer.number}keep{number}"), key, 0.005, True)
        reading = reader.thread(f"p{reader.number}kept{number}")
        self.workload.read(reading, key, config.wait + 2 * config.lock_timeout, 0.01)
        return held_back

    def release_held_back(self, store_key: str) -> float:
        """A targeted fault (``slow_releases``): the seconds the release of the lock
        ``store_key`` is held back on its way out (the first three times)."""
        if not self.config.slow_releases or self.slowed_releases >= 3 or self.healed:
            return 0.0
        self.slowed_releases += 1
        self.history.event("slow_release", store_key, SLOW_RELEASE)
        return SLOW_RELEASE

    def others_alive(self, than: SimProcess) -> list[SimProcess]:
        """The processes alive now other than ``than`` (where an aimed fault's callers run)."""
        return [p for p in self.processes if p is not than and p.alive]

    def renewal_at_release(self) -> bool:
        """A targeted fault (``renew_at_release``): whether a lock being released has a
        renewal fall due at that moment (the first three times)."""
        if not self.config.renew_at_release or self.renewals_aimed >= 3 or self.healed:
            return False
        self.renewals_aimed += 1
        self.history.event("renew_at_release")
        return True

    def lock_won(self, thread: SimThread) -> None:
        """A targeted fault (``cancel_leaders``): the caller whose ``add`` just won a lock is
        cancelled before the answer reaches it (the first three, and the first two forced
        refreshes, whose lock is taken apart from a read's)."""
        if not self.config.cancel_leaders or self.healed:
            return
        plan = thread.building
        if plan is not None and plan.call.forced and self.forced_cancels < 2:
            self.forced_cancels += 1
        elif self.cancels < 3:
            self.cancels += 1
        else:
            return
        self.world.after(0.00001, thread.cancel)

    def refuse_lock(self, thread: SimThread, lock_key: str) -> bool:
        """A targeted fault (``refuse_locks``): whether this lock attempt fails in the store;
        if it does, another thread of the same process reads the key 50 ms later."""
        key = self.lock_rows[lock_key]
        if not self.config.refuse_locks or self.refusals >= 3 or not self.database.written[key]:
            return False  # aimed at the lock of an entry a write has just made stale
        self.database.written[key] = False
        self.refusals += 1
        self.history.event("refuse_lock", lock_key)
        process = thread.process
        reader = process.thread(f"p{process.number}after{self.refusals}")
        self.workload.read(reader, key, 0.01, 0.05)
        return True

    def build_began(self, builder: SimProcess, key: int, seconds: float, entry: str) -> None:
        """Targeted faults: its holder killed (``kill_holders``, see :func:`aim_kill`); and
        (``race_builds``) a write of the row of a long build under way, from another
        process, then a read of its key from a third (the waiter's race)."""
        aim_kill(self, builder, key, entry, seconds)
        page_over_rebuild(self, builder, key, entry)
        delete_over_outliving(self, builder, key, entry, seconds)
        if not self.config.race_builds or seconds < 0.3 or self.raced_builds >= 3:
            return
        others = self.others_alive(builder)
        if not others:
            return
        self.raced_builds += 1
        self.history.event("race_build", f"row {key}")
        rng = self.world.rng
        writer = rng.choice(others)
        reader = rng.choice([p for p in others if p is not writer] or others)
        number = self.raced_builds
        writing = writer.thread(f"p{writer.number}write{number}")
        self.workload.write(writing, key, 0.1)
        reading = reader.thread(f"p{reader.number}wait{number}")
        self.workload.read(reading, key, 0.05, 0.2)

    def renewers_on_time(self) -> None:
        for process in self.processes:
            process.renewer.late = 0.0

    def evict(self, kind: str, key: int, entry: str = "row") -> None:
        cache = self.processes[0].cache
        if kind == "evict_lock" and self.config.store == "meta":
            kind = "evict_entry"  # no lock key: the lock is the lease its entry carries
        target = {
            "evict_tag": cache.tags.key(f"t{key}"),
            "evict_lock": lock_key(cache, key, entry),
            "evict_entry": entry_key(cache, key, entry),
        }[kind]
        self.server.evict(target)
        lock = self.lease_locks.get(target) if self.config.store == "meta" else None
        if lock is not None:  # the lease went with its entry: as a lock evicted
            self.history.applied.append((self.world.now, "delete", (lock,), True, False))
            self.history.event("evict_lock", f"{key} (its entry's lease)")

    def owner(self, key: str) -> str:
        """The server that owns ``key`` on the pool's ring (the same in every process)."""
        store = self.processes[0].cache.store
        return store.ring.server_for(key).name.split(":")[0]  # type: ignore[attr-defined]

    def lease_lost(self, key: str) -> None:
        """A key one server of several lost: on the meta protocol, an entry's lease with it."""
        lock = self.lease_locks.get(key) if self.config.store == "meta" else None
        if lock is not None:
            self.history.applied.append((self.world.now, "delete", (lock,), True, False))

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Result:
        self.workload.plan_threads()
        for fault in self.config.faults:
            self.schedule(fault)
        self.world.run(until=HORIZON)
        self.heal()
        violations = check(self)
        self.bury()
        for process in [*self.processes, *self.broker.workers]:
            process.count()
        return Result(self.config, violations, self.history.digest(), self.history, self.counts)

    def heal(self) -> None:
        """Faults over: wait out every lock, then read each key from a fresh process."""
        config = self.config
        self.healed = True
        self.server.down = False
        self.server.down_servers.clear()
        self.network.cut_until.clear()
        for process in self.processes:
            process.paused_until = 0.0
            process.renewer.late = 0.0
        self.world.run(until=self.world.now + config.lock_timeout + config.wait + 2)
        checker = SimProcess(self, len(self.processes), 0.0)
        self.liveness = []
        entries = ("row", "page") if config.pages else ("row",)
        for entry, key in [(entry, key) for entry in entries for key in range(config.keys)]:
            # with background refresh (or a queue's) a stale entry's first read is answered
            # stale while the refresher rebuilds it: the read after that one is to be fresh
            for _ in range(1 if config.refresh == "sync" else 2):
                thread = checker.thread(f"live-{entry}{key}")
                first = len(self.history.calls)  # the page's call comes before its row's
                part = 0.01 if entry == "page" else None
                self.workload.read(thread, key, 0.01, part_seconds=part)
                self.world.run(until=self.world.now + config.wait + config.lock_timeout + 2)
                if not self.history.calls[first].stale:
                    break
            self.liveness.append(self.history.calls[first])
        self.renewed_at_end = [
            held.lock.key
            for process in [*self.processes, *self.broker.workers]
            for held in process.renewer.renewing.values()
        ]

    def bury(self) -> None:
        """Close what killed processes left suspended, now that nothing is checked any more."""
        for context, steps in reversed(self.graveyard):
            # steps that would yield in their finally raise: a dead process's never run
            with contextlib.suppress(RuntimeError):
                context.run(steps.close)
        self.graveyard.clear()


def run_seed(
    seed: int, size: str = "small", store: str | None = None, refresh: str | None = None
) -> Result:
    """Play out the configuration ``seed`` chooses, and check it (``store``: with the
    processes reaching memcached that way, ``refresh``: rebuilding stale keys that way,
    whatever the seed chose)."""
    config = choose(seed, size)
    if store is not None:
        config.store = store
    if refresh is not None:
        config.refresh = refresh
    return Simulation(config).run()
