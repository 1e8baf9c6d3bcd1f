"""A task queue in the simulation: the real queue refresher's sends, a broker, its workers.

A stale key's rebuild, won by a reader, goes to :class:`SimQueueRefresher`: the library's
own ``QueueRefresher`` (its hand-off of the lock, its circuit and its fallback to the
process's threads), whose :meth:`~mcache.refreshers.queued.QueueRefresher.send_steps` run
on a simulated thread and whose one publish reaches :class:`SimBroker`. The broker may be
down (a publish fails after the seed's ``broker_timeout``, as a client's retries give up), loses a
job or delivers it twice; worker processes take jobs one at a time and run
``Rebuilds.run_job_steps``, as ``mcache.engine.rebuild.run`` does in a real worker.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcache.logs import FailureLog
from mcache.model.jobs import Job
from mcache.refreshers.queued import Publish, QueueRefresher
from tests.sim.history import Event, Violation
from tests.sim.processes import SimThread, Task, Ticket
from tests.sim.renewer import SimRefresher
from tests.sim.world import EPOCH

if TYPE_CHECKING:
    from tests.sim.host import SimProcess
    from tests.sim.simulation import Simulation

JOB_HOLD = 5.0
"""Seconds a handed-off lock is held for its job (the refresher's ``hold``): longer than a
publish to a broker that is down takes to fail, as ``hold`` must be (a send that fails
after it can no longer take its lock back)."""

READS_AFTER_FAILED = (1.5, 2.5, 4.0, 6.0)
"""When, after the own life of an entry a job stored nothing over, other processes read
its key (a second and a half: memcached's whole seconds, and the checker's slack)."""

BUILDERS: dict[int, Callable[[], Any]] = {}
"""The running simulation's builders, by number: what :func:`queued_build` calls."""


def queued_build(number: int) -> Any:
    """A builder a worker can find by its import path, as a real worker finds one: the
    run's builder ``number`` (a read's, with its plan)."""
    return BUILDERS[number]()


def addressable(build: Callable[[], Any]) -> Callable[[], Any]:
    """``build`` as a job can name it: a partial of :func:`queued_build`, with its plan."""
    number = len(BUILDERS)
    BUILDERS[number] = build
    named = functools.partial(queued_build, number)
    named.plan = build.plan  # type: ignore[attr-defined]
    return named


class SimQueueRefresher(QueueRefresher):
    """A process's queue refresher: the real one, its sends run on simulated threads."""

    def __init__(self, process: SimProcess) -> None:
        super().__init__(
            hold=JOB_HOLD,
            pool=SimRefresher(process),  # type: ignore[arg-type]
            retry_after=2.0,
            max_retry_after=8.0,
            clock=process.clock,
        )
        self.process = process
        self.count = 0
        self.failures = WindowLog(self)

    def submit(self, job: Any, context: Any) -> None:
        self.count += 1
        process = self.process
        thread = process.thread(f"p{process.number}send{self.count}")
        thread.cancellable, thread.sends = False, True
        thread.building = getattr(job.call.build, "plan", None)
        thread.push(Task(lambda: self.send_steps(job, context), lambda _v, _e: self.sent()))

    def send(self, payload: str, context: Any) -> None:
        raise TypeError("a simulated publish goes to the run's broker (SimBroker.publish)")


class WindowLog(FailureLog):
    """A refresher's failure log that also records when its circuit opens (it logs
    ``refresh.send`` each time a window opens, and only then)."""

    def __init__(self, refresher: SimQueueRefresher) -> None:
        super().__init__(clock=refresher.clock)
        self.refresher = refresher

    def warning(
        self, kind: str, message: str, *args: object, exc: BaseException | None = None
    ) -> bool:
        if kind == "refresh.send":
            process = self.refresher.process
            sim = process.sim
            opened = (sim.world.now, sim.running)
            sim.broker.openings.setdefault((process.number, process.generation), []).append(opened)
        return self.log(kind, message, *args, exc=exc)


class SimBroker:
    """The queue's broker and its workers: jobs kept in order, taken one at a time."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.jobs: list[str] = []
        self.down_until = 0.0
        self.workers: list[SimProcess] = []
        self.busy: dict[int, str] = {}
        """Each worker's job under way, by the worker's number."""
        self.waiting: dict[str, list[Event]] = {}
        """Each job waiting in the queue: its ``job_queued`` events (one for each copy)."""
        self.published: dict[SimThread, float] = {}
        """When each sender thread made its publish (a sender sends one job)."""
        self.openings: dict[tuple[int, int], list[tuple[float, SimThread]]] = {}
        """When the circuit of each process's refresher (by process and generation) opened
        each window, and the sender thread whose failure opened it."""
        self.taken = self.lost = self.duplicated = self.circuits_raced = self.redelivered = 0
        self.redeliveries: set[str] = set()
        self.workers_killed = self.hand_offs_refused = 0

    def up(self) -> bool:
        return self.sim.healed or self.sim.world.now >= self.down_until

    def go_down(self, seconds: float) -> None:
        """A broker outage: publishes fail and nothing is delivered for ``seconds``."""
        self.down_until = self.sim.world.now + seconds
        self.sim.world.after(seconds, self.dispatch)

    def publish(self, thread: SimThread, operation: Publish, ticket: Ticket) -> None:
        """``operation``'s payload to the queue; the publish fails if the broker is down when
        it arrives (after the seed's ``broker_timeout``)."""
        sim = self.sim
        world, config = sim.world, sim.config
        self.published[thread] = world.now
        out, back = sim.network.latency(), sim.network.latency()

        def arrive() -> None:
            if not self.up():
                error = ConnectionError("simulated: the broker is down")
                world.after(config.broker_timeout, lambda: thread.answer(ticket, None, error))
                self.race_circuit(thread.process, operation.payload)
                return
            rng = world.rng
            lock = Job.from_json(operation.payload).lock
            if not sim.healed and rng.random() < config.job_loss:
                self.lost += 1
                sim.history.event("job_lost", lock, math.inf)
            else:
                copies = 2 if not sim.healed and rng.random() < config.job_duplicates else 1
                self.duplicated += copies - 1
                for _ in range(copies):
                    self.enqueue(operation.payload, lock)
            world.after(back, lambda: thread.answer(ticket, None, None))
            self.dispatch()

        world.after(out, arrive)

    def enqueue(self, payload: str, lock: str) -> None:
        """A copy of a job into the queue: its lock waits with it, up to the hand-off's
        hold."""
        self.jobs.append(payload)
        self.sim.history.event("job_queued", lock, math.inf)
        self.waiting.setdefault(payload, []).append(self.sim.history.events[-1])
        self.dispatch()

    def race_circuit(self, sender: SimProcess, payload: str) -> None:
        """A targeted fault (``race_circuit``): a publish refused, whose failure will open
        ``sender``'s circuit ``broker_timeout`` from now. Another process refreshes two rows'
        entries and writes the rows just before then (not the row the failing job rebuilds:
        its lock is held), and ``sender`` reads their stale entries, so that their sends are
        under way when the window opens and fail once it has closed (the first twice)."""
        sim = self.sim
        config, rng = sim.config, sim.world.rng
        if not config.race_circuit or self.circuits_raced >= 2 or sim.healed:
            return
        self.circuits_raced += 1
        if self.down_until < sim.world.now + config.broker_timeout:  # down for the aimed sends
            self.go_down(config.broker_timeout)
        sim.history.event("race_circuit", f"process {sender.number}")
        job = Job.from_json(payload)
        (number,), _ = sender.cache.parts.codec.loads(job.arguments(), job.key)  # type: ignore[misc]
        sent = BUILDERS[number].plan.key  # type: ignore[attr-defined]  # its lock is held
        others = [key for key in range(config.keys) if key != sent]
        keys = rng.sample(others, min(2, len(others)))
        writers = [p for p in sim.processes if p is not sender and p.alive] or [sender]
        writer = rng.choice(writers).thread(f"circuitwrite{self.circuits_raced}")
        opens = config.broker_timeout
        for number, key in enumerate(keys):  # fresh entries (rebuilt here), then stale
            delay = opens - 1.4 if number == 0 else 0.0
            sim.workload.read(writer, key, 0.01, delay, forced=True)
        for key in keys:
            sim.workload.write(writer, key, 0.1 if key == keys[0] else 0.0)
        for number, key in enumerate(keys):
            reader = sender.thread(f"p{sender.number}circuit{self.circuits_raced}.{number}")
            sim.workload.read(reader, key, 0.05, opens - 0.7 + 0.3 * number)

    def dispatch(self) -> None:
        """Give each idle worker the next job, while the broker is up."""
        for worker in self.workers:
            if not self.jobs or not self.up():
                return
            if worker.alive and worker.number not in self.busy:
                self.run(worker, self.jobs.pop(0))

    def run(self, worker: SimProcess, payload: str) -> None:
        """Run one job on ``worker``, as ``mcache.engine.rebuild.run`` does."""
        self.taken += 1
        self.busy[worker.number] = payload
        self.waiting[payload].pop(0).until = self.sim.world.now
        job = Job.from_json(payload)
        rebuilds = worker.cache.builder.rebuilds
        (number,), _ = rebuilds.parts.codec.loads(job.arguments(), job.key)  # type: ignore[misc]
        build = functools.partial(queued_build, number)
        thread = worker.thread(f"w{worker.number}refresh{self.taken}")
        thread.cancellable = False
        plan = thread.building = BUILDERS[number].plan  # type: ignore[attr-defined]
        failing = self.sim.config.failing_jobs and self.taken <= 3 and not self.sim.healed
        if failing:
            plan.ending = self.sim.world.rng.choice(("raise", "uncacheable", "uncacheable"))
        generation = worker.generation

        def done(_value: Any, _error: BaseException | None) -> None:
            if worker.generation == generation:
                self.busy.pop(worker.number, None)
            if failing:  # read once the stale entry's own life is over
                own_end = job.seen / 1000 - EPOCH + job.options["stale_ttl"] if job.seen else 0.0
                self.read_after(plan.key, plan.entry, max(0.0, own_end - self.sim.world.now))
            self.dispatch()

        thread.push(Task(lambda: rebuilds.run_job_steps(job, build), done))
        self.kill_mid_job(worker, plan.build_seconds)
        self.redeliver_late(payload, job.lock, plan.build_seconds)

    def redeliver_late(self, payload: str, lock: str, seconds: float) -> None:
        """A targeted fault (``late_duplicates``): a job whose build outlasts a lock's life
        and a second is delivered again then, while it is still built (a broker's
        redelivery; the first three)."""
        sim = self.sim
        config = sim.config
        later = config.lock_timeout + 1.0
        if not config.late_duplicates or seconds <= later + 0.2 or sim.healed:
            return
        if self.redelivered >= 3 or payload in self.redeliveries:
            return
        self.redelivered += 1
        self.redeliveries.add(payload)
        sim.history.event("redeliver_late", lock)
        sim.world.after(later, lambda: self.enqueue(payload, lock))

    def refuse_hand_off(self, thread: SimThread) -> bool:
        """A targeted fault (``refuse_hand_offs``): whether the first request of a queue
        refresher's send (its hand-off of the lock) fails in the store (the first three)."""
        sim = self.sim
        if not sim.config.refuse_hand_offs or self.hand_offs_refused >= 3 or sim.healed:
            return False
        self.hand_offs_refused += 1
        sim.history.event("refuse_hand_off", thread.name)
        return True

    def kill_mid_job(self, worker: SimProcess, seconds: float) -> None:
        """A targeted fault (``kill_workers``): the first worker to take a job is killed
        halfway through its build (``seconds``), its job lost with it, back a second later."""
        sim = self.sim
        if not sim.config.kill_workers or self.workers_killed or sim.healed:
            return
        self.workers_killed += 1
        generation = worker.generation

        def kill() -> None:
            if worker.alive and worker.generation == generation:
                sim.history.event("kill", f"{worker.number} for 1.0 (a worker mid-job)")
                worker.kill()
                sim.world.after(1.0, worker.start)

        sim.world.after(seconds / 2 + 0.001, kill)

    def read_after(self, key: int, entry: str, wait: float) -> None:
        """``failing_jobs``: once a job stored nothing, other processes read its key ``wait``
        seconds later, once the stale entry's own life is over, and for a while after (the
        entry it gave back must end with that life, whatever the job's lease held it for)."""
        sim = self.sim
        readers = [p for p in sim.processes if p.alive]
        part = 0.01 if entry == "page" else None
        for number, after in enumerate(READS_AFTER_FAILED):
            reader = sim.world.rng.choice(readers or sim.processes)
            thread = reader.thread(f"p{reader.number}afterjob{self.taken}.{number}")
            sim.workload.read(thread, key, 0.05, wait + after, part_seconds=part)

    def worker_lost(self, process: SimProcess) -> None:
        """A process killed: if a worker, its job under way is lost with it (a job is
        acknowledged on receipt, as by default)."""
        worker = process
        payload = self.busy.pop(worker.number, None)
        if payload is not None:
            self.sim.history.event("job_lost", Job.from_json(payload).lock, math.inf)


def queue_drained(sim: Simulation) -> list[Violation]:
    """Liveness: once the faults heal, no job is left in the queue or under way, and no
    process's refresher keeps its circuit open (every rebuild may go to the queue again)."""
    broker, found = sim.broker, []
    if broker.jobs or broker.busy:
        found.append(
            Violation(
                "liveness (queues drained)",
                f"{len(broker.jobs)} jobs queued and {len(broker.busy)} under way at the end",
            )
        )
    for process in sim.processes:
        refresher = process.cache.parts.refresher
        if isinstance(refresher, SimQueueRefresher) and refresher.broken():
            found.append(
                Violation(
                    "liveness (the refresher's circuit closed)",
                    f"process {process.number}'s refresher still sends nothing to the queue",
                )
            )
    return found


def circuit_windows(sim: Simulation) -> list[Violation]:
    """The queue's circuit: a window opens only on the failure of a publish made since the
    last window opened. A send under way when the broker went (its client retrying it past
    the window) belongs to the outage that opened it: reopening the circuit for it would
    keep every rebuild off a broker that is back, for a doubled window
    ([task queues](../how-to/task-queue.md): "neither reopens the window nor doubles the
    next")."""
    found = []
    for (number, _), openings in sim.broker.openings.items():
        last = -math.inf
        for opened, sender in openings:
            made = sim.broker.published.get(sender)
            if made is not None and made < last:
                found.append(
                    Violation(
                        "the refresher's circuit (a window per outage)",
                        f"process {number}'s circuit reopened at"
                        f" {opened:.3f} for a publish made at {made:.3f}, before the window"
                        f" that opened at {last:.3f}",
                    )
                )
            last = opened
    return found
