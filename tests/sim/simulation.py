"""One simulated run: a seed's configuration played out, then checked.

A run has a simulated memcached (the library's own memcached-semantics store on a clock
of whole seconds, reached over a simulated network that drops requests and loses
replies), a database of versioned rows, processes whose threads read and write them
through the real ``Cache``, and the faults the seed chose. After the faults heal, a
liveness phase reads every key once more from a fresh process.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from mcache.engine.build import STALE_SERVED
from mcache.errors import Uncacheable
from mcache.model.codec import Codec, JsonSerializer
from mcache.model.tags import version_ms
from mcache.observe.outcome import STORE_FAILED
from mcache.stores.memory.store import MemoryStore
from tests.sim.checkers import Violation, check
from tests.sim.config import Config, Fault, choose
from tests.sim.history import Applied, Call, History
from tests.sim.keys import entry_key, lock_key
from tests.sim.processes import SimProcess, SimThread, Steps, Task, Ticket, refused
from tests.sim.world import EPOCH, WholeSecondClock, World


class SimMemcached(MemoryStore):
    """memcached as the store contract sees it: shared by every process, whole seconds."""

    traits = dataclasses.replace(MemoryStore.traits, process_local=False, expiry_slack=1)


class BuildFailed(Exception):
    """What a simulated builder raises when its seed has it fail."""


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
                if lost and error is None:
                    result, error = None, refused("reply lost")
                elif operation.method == "add" and result and operation.args[0] in sim.tag_rows:
                    sim.tag_created(operation.args[0], int(operation.args[1]))
                elif operation.method == "add" and result and operation.args[0] in sim.lock_rows:
                    sim.lock_won(thread)
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


@dataclass
class Plan:
    """What a read's builder is to do: which row, for how long, and how it ends."""

    key: int
    call: Call
    build_seconds: float
    ending: str = "value"
    """"value", "raise" (the build fails) or "uncacheable" (its value is not to be stored)."""


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

LASTING = {"crash", "pause", "late_renewer"}
"""Faults that last their ``seconds``; the others strike once."""


class Simulation:
    """A seed's run."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.world = World(config.seed)
        self.history = History(now=lambda: self.world.now)
        self.server = Server(self.world, self.history.applied)
        self.network = Network(self)
        self.database = Database(config.keys)
        self.codec = CODEC
        self.healed = False
        self.counts: dict[str, int] = {}
        self.running: SimThread | None = None
        """The thread whose steps run now (a lock won is this thread's)."""
        self.graveyard: list[tuple[contextvars.Context, Steps]] = []
        self.processes = [SimProcess(self, n, skew) for n, skew in enumerate(config.skews)]
        tags_of = self.processes[0].cache
        self.tag_rows = {tags_of.tags.key(f"t{key}"): key for key in range(config.keys)}
        self.lock_rows = {lock_key(tags_of, key): key for key in range(config.keys)}
        self.races = self.refusals = self.raced_builds = self.cancels = 0
        self.renewals_aimed = 0

    # -- the workload ---------------------------------------------------------------------

    def read_steps(
        self, thread: SimThread, key: int, build_seconds: float, ending: str = "value"
    ) -> Steps:
        cache = thread.process.cache
        STALE_SERVED.set(False)
        call = self.history.invoke("read", thread, key)
        plan = Plan(key, call, build_seconds, ending)
        thread.building, thread.waited_on_flight = plan, False

        def build() -> list[Any]:
            value = [key, self.database.rows[key], self.history.builds[-1].number]
            if plan.ending == "raise":
                raise BuildFailed(f"build of row {key} failed")
            if plan.ending == "uncacheable":
                raise Uncacheable(value, "simulated")
            return value

        options = cache.call_options()
        STORE_FAILED.set("")
        value = yield from cache.get_or_build_steps(f"row{key}", build, options, [f"t{key}"])
        call.stale = STALE_SERVED.get()
        call.store_failed = bool(STORE_FAILED.get())
        call.shared_flight = thread.waited_on_flight
        return value, call

    def write_steps(self, thread: SimThread, key: int, by_delete: bool = False) -> Steps:
        """A row written, then its cache told: its tag bumped, or (``by_delete``) its entry
        deleted; ``invalidated`` only if the store took it."""
        call = self.history.invoke("write", thread, key)
        call.version = self.database.write(key)
        cache = thread.process.cache
        if by_delete:
            STORE_FAILED.set("")
            result = yield from cache.delete_steps(f"row{key}")
            call.invalidated = not STORE_FAILED.get()
        else:
            result = yield from cache.invalidate_steps((f"t{key}",))
            call.invalidated = bool(result)
        return result, call

    def _ended(self, thread: SimThread) -> Any:
        calls = self.history.calls

        def done(value: Any, error: BaseException | None) -> None:
            mine = [c for c in calls if c.thread == thread.name and c.outcome == "pending"]
            if error is not None:
                outcome = "cancelled" if isinstance(error, asyncio.CancelledError) else "failed"
                for call in mine:
                    self.history.end(call, outcome, repr(error))
                return
            result, call = value
            self.history.end(call, "ok", result if call.kind == "read" else None)

        return done

    def plan_threads(self) -> None:
        config, rng = self.config, self.world.rng
        for process in self.processes:
            for t in range(config.threads):
                thread = process.thread(f"p{process.number}t{t}")
                for _ in range(config.calls):
                    key = rng.randrange(config.keys)
                    delay = round(rng.uniform(0.0, 3.0), 4)
                    if rng.random() < 0.25:
                        by_delete = rng.random() < config.delete_share
                        steps = lambda th=thread, k=key, d=by_delete: self.write_steps(th, k, d)  # noqa: E731
                    else:
                        slow = config.long_builds and rng.random() < 0.3
                        seconds = (
                            rng.uniform(1.0, 3.0 * config.lock_timeout)
                            if slow
                            else (rng.uniform(0.001, 0.6))
                        )
                        draw = rng.random()
                        ending = (
                            "raise"
                            if draw < config.failing_builds
                            else "uncacheable"
                            if draw < 2 * config.failing_builds
                            else "value"
                        )
                        steps = lambda th=thread, k=key, s=seconds, e=ending: self.read_steps(  # noqa: E731
                            th, k, s, e
                        )
                    thread.push(Task(steps, self._ended(thread), delay))

    # -- faults ---------------------------------------------------------------------------

    def schedule(self, fault: Fault) -> None:
        world, history = self.world, self.history

        def strike() -> None:
            lasting = fault.seconds if fault.kind in LASTING else 0.0
            history.event(fault.kind, f"{fault.target} for {fault.seconds}", lasting)
            if fault.kind == "crash":
                self.server.crash()
                world.after(fault.seconds, self.server.restart)
            elif fault.kind == "kill":
                process = self.processes[int(fault.target)]
                if process.alive:
                    process.kill()
                    world.after(fault.seconds, process.start)
            elif fault.kind == "pause":
                self.processes[int(fault.target)].paused_until = world.now + fault.seconds
            elif fault.kind == "cancel":
                busy = [t for p in self.processes for t in p.threads if t.expected and t.stack]
                if busy:
                    world.rng.choice(busy).cancel()
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
        write = lambda: self.write_steps(thread, key)  # noqa: E731
        thread.push(Task(write, self._ended(thread), when - world.now))
        read = lambda: self.read_steps(thread, key, 0.01)  # noqa: E731
        thread.push(Task(read, self._ended(thread), 0.01))

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
        cancelled before the answer reaches it."""
        if not self.config.cancel_leaders or self.cancels >= 3 or self.healed:
            return
        self.cancels += 1
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
        read = lambda: self.read_steps(reader, key, 0.01)  # noqa: E731
        reader.push(Task(read, self._ended(reader), 0.05))
        return True

    def build_began(self, builder: SimProcess, key: int, seconds: float) -> None:
        """A targeted fault (``race_builds``): a write of the row of a long build under way,
        from another process, then a read of its key from a third (the waiter's race)."""
        if not self.config.race_builds or seconds < 0.3 or self.raced_builds >= 3:
            return
        others = [p for p in self.processes if p is not builder and p.alive]
        if not others:
            return
        self.raced_builds += 1
        self.history.event("race_build", f"row {key}")
        rng = self.world.rng
        writer = rng.choice(others)
        reader = rng.choice([p for p in others if p is not writer] or others)
        number = self.raced_builds
        writing = writer.thread(f"p{writer.number}write{number}")
        write = lambda: self.write_steps(writing, key)  # noqa: E731
        writing.push(Task(write, self._ended(writing), 0.1))
        reading = reader.thread(f"p{reader.number}wait{number}")
        read = lambda: self.read_steps(reading, key, 0.05)  # noqa: E731
        reading.push(Task(read, self._ended(reading), 0.2))

    def renewers_on_time(self) -> None:
        for process in self.processes:
            process.renewer.late = 0.0

    def evict(self, kind: str, key: int) -> None:
        cache = self.processes[0].cache
        target = {
            "evict_tag": cache.tags.key(f"t{key}"),
            "evict_lock": lock_key(cache, key),
            "evict_entry": entry_key(cache, key),
        }[kind]
        self.server.evict(target)

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Result:
        self.plan_threads()
        for fault in self.config.faults:
            self.schedule(fault)
        self.world.run(until=HORIZON)
        self.heal()
        violations = check(self)
        self.bury()
        for process in self.processes:
            process.count()
        return Result(self.config, violations, self.history.digest(), self.history, self.counts)

    def heal(self) -> None:
        """Faults over: wait out every lock, then read each key from a fresh process."""
        config = self.config
        self.healed = True
        self.server.down = False
        for process in self.processes:
            process.paused_until = 0.0
            process.renewer.late = 0.0
        self.world.run(until=self.world.now + config.lock_timeout + config.wait + 2)
        checker = SimProcess(self, len(self.processes), 0.0)
        self.liveness = []
        for key in range(config.keys):
            thread = checker.thread(f"live{key}")
            steps = lambda th=thread, k=key: self.read_steps(th, k, 0.01)  # noqa: E731
            thread.push(Task(steps, self._ended(thread)))
            self.world.run(until=self.world.now + config.wait + config.lock_timeout + 2)
            self.liveness.append(self.history.calls[-1])
        self.renewed_at_end = [
            held.lock.key
            for process in self.processes
            for held in process.renewer.renewing.values()
        ]

    def bury(self) -> None:
        """Close what killed processes left suspended, now that nothing is checked any more."""
        for context, steps in reversed(self.graveyard):
            # steps that would yield in their finally raise: a dead process's never run
            with contextlib.suppress(RuntimeError):
                context.run(steps.close)
        self.graveyard.clear()


def run_seed(seed: int, size: str = "small") -> Result:
    """Play out the configuration ``seed`` chooses, and check it."""
    return Simulation(choose(seed, size)).run()
