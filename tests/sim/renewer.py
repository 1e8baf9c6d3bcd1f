"""A simulated process's lock renewer and refresher: each renewal, and each background
rebuild, is steps on a simulated thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcache.engine.lock import Lock
from mcache.engine.rebuild import Rebuild
from mcache.engine.renewal import LockRenewer
from mcache.logs import FailureLog
from mcache.sansio.steps import Pause
from tests.sim.processes import SimThread, Steps, Task

if TYPE_CHECKING:
    from tests.sim.host import SimProcess


@dataclass
class _Held:
    lock: Lock
    thread: SimThread | None
    since: float
    also: list[Callable[[], Steps]] = field(default_factory=list)


class SimRenewer(LockRenewer):
    """A process's lock renewer, whose renewals are steps on a simulated thread of its own.

    The same turns as the real one (every third of the lock's timeout); a renewal that
    finds the lock no longer ours stops, as the real one does.
    """

    def __init__(self, process: SimProcess) -> None:
        super().__init__(process.clock)
        self.process = process
        self.thread = SimThread(process, "renewer")
        self.renewing: dict[int, _Held] = {}
        self.late = 0.0
        self.under_way: set[int] = set()
        """The locks (by ``id``) a renewal of which is running: their drop waits for it."""
        """Seconds each renewal comes late (a fault: a renewer the machine holds up)."""

    def hold(self, lock: Lock, log: FailureLog | None = None) -> None:
        sim = self.process.sim
        self.renewing[id(lock)] = _Held(lock, sim.running, sim.world.now)
        self._schedule(lock)

    def also(self, lock: Lock, keep_alive: Callable[[], Steps]) -> None:
        held = self.renewing.get(id(lock))
        if held is not None:
            held.also.append(keep_alive)

    def drop(self, lock: Lock) -> None:
        held = self.renewing.get(id(lock))
        # none is aimed while a renewal is running or queued: one at most meets a release
        if held is not None and not self.thread.busy and self.process.sim.renewal_at_release():
            # aimed: a renewal fell due just before the release, and is under way
            self.under_way.add(id(lock))
            self.thread.push(Task(lambda: self._renewal_steps(held), self._renewed(held)))
        self.renewing.pop(id(lock), None)

    def drop_steps(self, lock: Lock) -> Steps:
        """As the real renewer's drop waits for a renewal under way, what follows (a
        release, a hand-off's longer hold) waits here until none is."""
        self.drop(lock)
        while id(lock) in self.under_way:
            yield Pause(0.001)

    def holds(self, lock: Lock) -> bool:
        return id(lock) in self.renewing

    def _schedule(self, lock: Lock) -> None:
        generation = self.process.generation
        due = self.interval(lock) + self.late

        def turn() -> None:
            held = self.renewing.get(id(lock))
            if held is None or generation != self.process.generation:
                return
            self.thread.push(Task(lambda: self._renewal_steps(held), self._renewed(held)))

        self.process.sim.world.after(due, turn)

    def _renewal_steps(self, held: _Held) -> Steps:
        lock = held.lock
        aimed = id(lock) in self.under_way  # fell due before its drop, which waits for it
        if not aimed and self.renewing.get(id(lock)) is not held:
            return True  # dropped while queued: the real renewer's turn sends nothing
        self.under_way.add(id(lock))
        try:
            ours = yield from lock.extend_steps()
            if ours:
                for keep_alive in list(held.also):
                    yield from keep_alive()
            return ours
        finally:
            self.under_way.discard(id(lock))

    def _renewed(self, held: _Held) -> Callable[[Any, BaseException | None], None]:
        def done(ours: Any, error: BaseException | None) -> None:
            if self.renewing.get(id(held.lock)) is not held:
                return
            if error is not None:  # the store failed: tried again at the next turn
                self.process.sim.history.event("renewal_failed", held.lock.key)
            elif not ours:
                self.renewing.pop(id(held.lock), None)
                self.process.sim.history.lock_lost(self.process, held.lock.key)
                return
            self._schedule(held.lock)

        return done


class SimRefresher:
    """A process's refresher on threads: each background rebuild it is handed runs as
    steps on a simulated thread of its own, with the plan of the read that handed it."""

    def __init__(self, process: SimProcess) -> None:
        self.process = process
        self.count = 0

    def __call__(self, job: Rebuild) -> bool:
        self.count += 1
        thread = self.process.thread(f"p{self.process.number}refresh{self.count}")
        thread.building = getattr(job.call.build, "plan", None)
        held = self.process.renewer.renewing.get(id(job.lock))
        if held is not None:  # the lock is the refresher's now, not the handing reader's
            held.thread = thread
        thread.push(Task(job.steps, lambda _value, _error: None))
        return True
