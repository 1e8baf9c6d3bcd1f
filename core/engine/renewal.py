"""Lock renewal: a lock lives as long as its holder works, and not much longer.

A build lock expires on its own (``lock_timeout``) so that a holder that dies
mid-build cannot block rebuilds for ever. Renewed, owner-only, every third of
its timeout, that TTL does not also cap how long a build may take (composition
rule 4 in ``docs/explanation/consistency.md``): a build of any length runs once,
and a killed holder's lock frees within ``lock_timeout`` of its last renewal.
One daemon thread serves every lock of the process (a heap by due time), so a
thousand concurrent builds cost one thread. A renewal that finds the lock gone
or taken over stops and logs once; the build still finishes, and what it writes
is guarded by its lease (see :mod:`mcache.engine.write_lease`), never by the lock.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Callable

from mcache.clock import Clock, system_clock
from mcache.engine.lock import Lock
from mcache.logs import FailureLog
from mcache.sansio.steps import Steps, perform, run_steps

__all__ = ["LockRenewer", "renewer"]

_LOG = FailureLog()


class _Held:
    """One lock being renewed; ``guard`` keeps a renewal and the release apart."""

    __slots__ = ("also", "guard", "interval", "lock", "log", "renewing")

    def __init__(self, lock: Lock, log: FailureLog) -> None:
        self.lock = lock
        self.log = log
        self.interval = LockRenewer.interval(lock)
        self.guard = threading.Lock()
        self.renewing = True
        self.also: list[Callable[[], Steps[object]]] = []


class LockRenewer:
    """Extends the locks this process holds, from one daemon thread started on first use.

    A cache's parts name the renewer its locks go to (``CacheParts.renewer``): this
    process's by default, one a simulation drives on its own clock otherwise (the
    same ``hold``, ``also``, ``drop``), so every renewal is steps it can interleave.
    """

    def __init__(self, clock: Clock = system_clock) -> None:
        self._clock = clock
        self._order = itertools.count()
        self._watching_forks = False
        self._forget()

    def _forget(self) -> None:
        """Start afresh (in a forked child: the parent's thread and locks are not here)."""
        self._condition = threading.Condition()
        self._due: list[tuple[float, int, _Held]] = []
        self._held: dict[int, _Held] = {}
        self._started = False

    def hold(self, lock: Lock, log: FailureLog | None = None) -> None:
        """Renew ``lock`` every third of its timeout until :meth:`drop`."""
        held = _Held(lock, log or _LOG)
        with self._condition:
            self._start_if_needed()
            self._held[id(lock)] = held
            due = self._clock.monotonic() + held.interval
            heapq.heappush(self._due, (due, next(self._order), held))
            self._condition.notify()

    def also(self, lock: Lock, keep_alive: Callable[[], Steps[object]]) -> None:
        """Run ``keep_alive()``'s steps after each renewal of ``lock`` (what the lock's work
        holds too)."""
        with self._condition:
            held = self._held.get(id(lock))
        if held is not None:
            with held.guard:
                held.also.append(keep_alive)

    def drop(self, lock: Lock) -> None:
        """Stop renewing ``lock``; returns once no renewal of it is under way."""
        with self._condition:
            held = self._held.pop(id(lock), None)
        if held is not None:
            with held.guard:
                held.renewing = False

    def drop_steps(self, lock: Lock) -> Steps[None]:
        """:meth:`drop`, as steps, for what a release or a hand-off does next: they end once
        no renewal of ``lock`` is under way, since one landing after them would undo it (a
        renewal retried over a hand-off's rewrite would cut its hold to a lock's life).
        Here :meth:`drop` itself waits; a simulation's renewer yields until it may go on."""
        self.drop(lock)
        return
        yield  # steps, like the release they come before

    @staticmethod
    def interval(lock: Lock) -> float:
        """Return the seconds between two renewals of ``lock``."""
        return max(lock.timeout / 3, 0.1)

    def holds(self, lock: Lock) -> bool:
        """Return whether ``lock`` is being renewed."""
        return id(lock) in self._held

    def _start_if_needed(self) -> None:
        if self._started:
            return
        if not self._watching_forks and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)
            self._watching_forks = True
        self._started = True
        threading.Thread(target=self._run, name="mcache-lock-renewal", daemon=True).start()

    def _run(self) -> None:
        while True:
            for held in self._take_due():
                self._renew(held)

    @staticmethod
    def _keep_alive(held: _Held) -> None:
        for keep_alive in held.also:
            try:
                run_steps(keep_alive(), perform)
            except Exception as error:  # the store is down: the lock's renewal says so too
                held.log.warning(
                    "lock.keep", "could not keep %r's work alive: %s", held.lock.key, error
                )

    def _take_due(self) -> list[_Held]:
        """Wait until a lock is due; return the due ones (rescheduled for their next turn)."""
        with self._condition:
            while True:
                now = self._clock.monotonic()
                while self._due and not self._due[0][2].renewing:
                    heapq.heappop(self._due)  # dropped since it was scheduled
                if self._due and self._due[0][0] <= now:
                    break
                timeout = self._due[0][0] - now if self._due else None
                self._condition.wait(timeout)
            due = []
            while self._due and self._due[0][0] <= now:
                _, _, held = heapq.heappop(self._due)
                if held.renewing:
                    due.append(held)
                    heapq.heappush(self._due, (now + held.interval, next(self._order), held))
            return due

    def _renew(self, held: _Held) -> None:
        with held.guard:
            if not held.renewing:
                return
            try:
                still_ours = run_steps(held.lock.extend_steps(), perform)
            except Exception as error:  # the store is down: try again at the next turn
                held.log.warning("lock.renew", "could not renew lock %r: %s", held.lock.key, error)
                return
            if still_ours:
                self._keep_alive(held)
            else:
                held.renewing = False
                held.log.warning(
                    "lock.lost",
                    "lock %r was lost under its holder (it expired while the process"
                    " stalled past its timeout, or its server lost it); another process"
                    " may build the same entry",
                    held.lock.key,
                )
        if not held.renewing:
            with self._condition:
                if self._held.get(id(held.lock)) is held:
                    del self._held[id(held.lock)]


renewer = LockRenewer()
"""The process's renewer (its thread starts on first use, again in a forked child)."""
