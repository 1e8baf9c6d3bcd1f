"""Simulated threads: the library's own steps, driven on virtual time.

This is a third driver of the steps of :mod:`mcache.sansio.steps`, beside ``run_steps``
and ``arun_steps``. Each simulated thread runs its calls' generators in a
``contextvars.Context`` of its own; every operation they yield is a point where the
scheduler may run another thread first. A store call reaches the simulated server after
a drawn latency, is applied there atomically, as memcached applies a command, and its
reply comes back after another. A killed process's generators are never resumed, as
SIGKILL would leave them: their ``finally`` blocks do not run while the run goes on.
A process (its cache, threads and renewer) is in :mod:`tests.sim.host`.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcache.engine.rebuild import HandOver
from mcache.errors import StoreUnavailable, Uncacheable
from mcache.refreshers.queued import Publish
from mcache.sansio.steps import BlockingOrAwaited, CallBuilder, Pause, Shielded, StoreCall, Wait
from mcache.stores.memcached.steps import FetchOwners, NodeCall
from tests.sim.nodes import fetch_steps, store_steps

if TYPE_CHECKING:
    from tests.sim.host import SimProcess

_START = object()

Steps = Generator[Any, Any, Any]


@dataclass
class Task:
    """Steps a thread runs, and what is told of their end: ``done(value, error)``."""

    steps: Callable[[], Steps]
    done: Callable[[Any, BaseException | None], None]
    delay: float = 0.0


Ticket = tuple[int, int]
"""An operation a thread waits on: (its process's generation, the thread's count)."""


class SimThread:
    """One thread of a simulated process (or one asyncio task): its tasks run one after
    another, each operation they yield answered by :meth:`answer`."""

    def __init__(
        self, process: SimProcess, name: str, context: contextvars.Context | None = None
    ) -> None:
        self.process = process
        self.sim = process.sim
        self.name = name
        self.context = context or contextvars.Context()
        self.tasks: list[Task] = []
        self.stack: list[Steps] = []
        self.shields: list[tuple[int, Any]] = []
        """The frames of ``stack`` that ``Shielded`` operations pushed, with their let-go."""
        self.busy = False
        self.building: Any = None
        """What the thread's current task tells the builder (its planned duration)."""
        self.waited_on_flight = False
        self.sends = False
        """Whether the thread is a queue refresher's sender."""
        self.cancellable = True
        """Whether the thread stands for a caller's asyncio task (a queue refresher's sender
        thread and a worker's are threads: nothing cancels them)."""
        self.build: Any = None
        """The build this thread's builder is running, if any."""
        self.count = 0
        self.expected: Ticket | None = None
        self.tags_read_at = -math.inf
        """When a read of a tag's version by this thread was last applied (and answered)."""
        self.paused_at = -math.inf
        """When this thread last paused (a wait: for a lock, a build, a back-off)."""
        self.redirects: dict[Ticket, SimThread] = {}
        """Answers now due to another thread (a shielded operation left to finish)."""

    def push(self, task: Task) -> None:
        """Queue ``task``; started at once if the thread is idle."""
        self.tasks.append(task)
        if not self.busy:
            self._next()

    def _next(self) -> None:
        if not self.tasks or not self.process.alive:
            self.busy = False
            return
        self.busy = True
        task = self.tasks.pop(0)
        generation = self.process.generation
        self.sim.world.after(task.delay, lambda: self._begin(task, generation))

    def _begin(self, task: Task, generation: int) -> None:
        if generation != self.process.generation:
            return
        self.task = task
        self.stack, self.shields = [self.context.run(task.steps)], []
        self.resume(_START, None)

    def issue(self) -> Ticket:
        """The ticket of the operation this thread is about to wait on."""
        self.count += 1
        self.expected = (self.process.generation, self.count)
        return self.expected

    def answer(self, ticket: Ticket, value: Any, error: BaseException | None) -> None:
        """The result of the operation ``ticket`` names, sent in if still awaited here."""
        other = self.redirects.pop(ticket, None)
        if other is not None:
            return other.answer(ticket, value, error)
        if ticket != self.expected or ticket[0] != self.process.generation:
            return  # killed or cancelled meanwhile: nothing of it runs again
        process = self.process
        if process.paused_until > self.sim.world.now:  # the whole process is stopped
            again = lambda: self.answer(ticket, value, error)  # noqa: E731
            self.sim.world.at(process.paused_until, again)
            return
        self.expected = None
        self.resume(value, error)

    def resume(self, value: Any, error: BaseException | None) -> None:
        """Send ``value`` (or throw ``error``) into the steps, and run them to their next
        operation."""
        if not self.stack:
            return
        self.sim.running = self
        self.context.run(self._advance, value, error)

    def cancel(self) -> bool:
        """Cancel the thread's call as asyncio cancels a task at the ``await`` it is in:
        ``CancelledError`` is raised where its steps yielded; a ``Shielded`` operation under
        way goes on as a task of its own, and what it wins is let go when it ends."""
        if not self.stack or self.expected is None:
            return False
        ticket = self.expected
        if self.shields:
            depth, let_go = self.shields[0]
            rest = SimThread(self.process, f"{self.name}-shielded", self.context.copy())
            rest.stack, rest.shields = (
                self.stack[depth:],
                [(d - depth, g) for d, g in self.shields if d >= depth],
            )
            rest.busy, rest.expected = True, ticket
            self.process.threads.append(rest)
            rest.task = Task(lambda: iter(()), self._let_go(rest, let_go))
            self.redirects[ticket] = rest
            self.stack, self.shields = self.stack[:depth], []
        self.expected = None
        if self.build is not None and self.build.ended is None:
            self.sim.history.build_ended(self.build)  # an awaited builder is cancelled too
        self.sim.history.event("cancel", self.name)
        self.resume(None, asyncio.CancelledError())
        return True

    def _let_go(self, rest: SimThread, let_go: Any) -> Callable[[Any, BaseException | None], None]:
        def done(won: Any, error: BaseException | None) -> None:
            if error is None and won is not None and let_go is not None:
                rest.push(Task(lambda: let_go(won), lambda _value, _error: None))

        return done

    def _advance(self, value: Any, error: BaseException | None) -> None:
        while True:
            steps = self.stack[-1]
            try:
                if error is not None:
                    operation = steps.throw(error)
                elif value is _START:
                    operation = next(steps)
                else:
                    operation = steps.send(value)
            except StopIteration as finished:
                self._pop()
                value, error = finished.value, None
                if not self.stack:
                    return self._finish(value, None)
                continue
            except (Exception, asyncio.CancelledError) as raised:
                self._pop()
                value, error = None, raised
                if not self.stack:
                    return self._finish(None, raised)
                continue
            value, error = None, None
            kind = type(operation)
            if kind is Shielded:
                self.shields.append((len(self.stack), operation.let_go))
                self.stack.append(operation.steps)
                value = _START
                continue
            if kind is CallBuilder and getattr(self.building, "nested", False):
                self.stack.append(self._nested_build(operation))
                value = _START
                continue
            if kind is StoreCall and (stepped := store_steps(operation)) is not None:
                self.stack.append(stepped)  # the real memcached store's own steps
                value = _START
                continue
            if kind is FetchOwners:
                self.stack.append(fetch_steps(operation))
                value = _START
                continue
            if kind is HandOver:  # to the process's refresher: no I/O of its own
                try:
                    value = operation.run()
                except Exception as raised:
                    error = raised
                continue
            if kind is BlockingOrAwaited:
                try:
                    value = operation.blocking()
                except Exception as raised:
                    error = raised
                continue
            return self._perform(operation)

    def _pop(self) -> None:
        self.stack.pop()
        if self.shields and self.shields[-1][0] >= len(self.stack):
            self.shields.pop()

    def _finish(self, value: Any, error: BaseException | None) -> None:
        self.task.done(value, error)
        self._next()

    def _perform(self, operation: Any) -> None:
        ticket = self.issue()
        world = self.sim.world
        kind = type(operation)
        if kind is StoreCall:
            self.sim.network.deliver(self, operation, ticket)
        elif kind is NodeCall:
            self.sim.network.deliver_node(self, operation, ticket)
        elif kind is Pause:
            self.paused_at = world.now
            world.after(operation.seconds, lambda: self.answer(ticket, None, None))
        elif kind is CallBuilder:
            self._build(operation, ticket)
        elif kind is Publish:
            self.sim.broker.publish(self, operation, ticket)
        elif kind is Wait:
            self.waited_on_flight = True
            self._wait(operation, world.now + operation.timeout, ticket)
        else:
            error = TypeError(f"the simulation cannot perform {operation!r}")
            world.after(0, lambda: self.answer(ticket, None, error))

    def _nested_build(self, operation: CallBuilder) -> Steps:
        """A builder that reads other entries (a page over its row's entry): its steps run
        on this thread, as an awaited coroutine builder runs on its task, inside the
        build's scope, so what they read is reported to it."""
        plan, outer = self.building, self.build
        build = self.build = self.sim.history.build_began(self, plan)
        try:
            value = yield from operation.build()
        except BaseException as error:
            build.failed = isinstance(error, Exception) and not isinstance(error, Uncacheable)
            raise
        finally:
            if build.ended is None:
                self.sim.history.build_ended(build)
            self.build, self.building = outer, plan
        build.value = value
        return value

    def _build(self, operation: CallBuilder, ticket: Ticket) -> None:
        plan, outer = self.building, self.build
        build = self.build = self.sim.history.build_began(self, plan)
        try:
            value, error = operation.build(), None
        except Exception as raised:
            value, error = None, raised
        build.value = value
        build.failed = error is not None and not isinstance(error, Uncacheable)

        def end() -> None:
            if build.ended is None:
                self.sim.history.build_ended(build)
            self.build = outer
            self.answer(ticket, value, error)

        seconds = plan.build_seconds if plan is not None else 0.01
        self.sim.world.after(seconds, end)
        if plan is not None:
            self.sim.build_began(self.process, plan.key, seconds, plan.entry)

    def _wait(self, operation: Wait, deadline: float, ticket: Ticket) -> None:
        world = self.sim.world

        def check() -> None:
            if ticket != self.expected:
                return
            answered = operation.flight.answered()
            if answered or world.now >= deadline:
                self.answer(ticket, answered, None)
            else:
                world.after(min(0.005, deadline - world.now), check)

        world.after(0.0, check)


def refused(reason: str) -> StoreUnavailable:
    """The error a store call gets when the server or the network fails it."""
    return StoreUnavailable(f"simulated: {reason}")
