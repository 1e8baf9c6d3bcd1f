"""What happened in a run: every call as invoked and as it ended, every build, every fault.

A value a simulated builder returns carries its provenance, ``[key, row version, build
number]``, so a checker can say of any value a reader got which build made it and from
which version of its row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.sim.keys import entry_key, lock_key

if TYPE_CHECKING:
    from tests.sim.host import SimProcess
    from tests.sim.processes import SimThread


@dataclass
class Violation:
    """A rule broken: which, and the calls that show it."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


@dataclass
class Call:
    """One call of the cache's API: a read (``get_or_build``) or a write (row, then bump)."""

    number: int
    kind: str
    process: int
    thread: str
    key: int
    invoked: float
    ended: float | None = None
    outcome: str = "pending"
    """"ok", "failed" (raised), or "unknown" (its process was killed first)."""
    value: Any = None
    stale: bool = False
    shared_flight: bool = False
    version: int = 0
    """A write's row version; its bump took effect only if ``invalidated``."""
    invalidated: bool = False
    store_failed: bool = False
    """A store call of it failed (the cache answered as if down: ``STORE_FAILED``)."""
    entry: str = "row"
    """What a read reads: the row's entry, or the page over it (``keys.ENTRIES``)."""
    by_delete: bool = False
    """A write that deleted the row's entry rather than bumping its tag."""
    forced: bool = False
    """A read that was ``Cache.refresh``: rebuilt now, whatever the entry's state."""


@dataclass
class Build:
    """One call of a builder: when, by which process, from which row version."""

    number: int
    process: int
    call: int
    key: int
    version: int
    began: float
    under_lock: bool
    locked_at: float
    """When this build's lock was won (its start, if it has none)."""
    ended: float | None = None
    value: Any = None
    failed: bool = False
    entry: str = "row"
    part_stale: bool = False
    """A page's build whose nested read of its row was served stale."""
    background: bool = False
    """Run by the process's refresher (``refresh="background"``), not by its reader."""
    part_unknown: bool = False
    """A page's build whose nested read had a store call fail (it may have built its row
    without reading the store, and then the page is stored already stale)."""
    replica: bool = False
    """A row's build that read the database's replica, not its primary."""
    waited_unread: bool = False
    """Its caller's thread paused (a wait) since it last read a tag's version: the versions
    its entry records were read before that wait."""


@dataclass
class Event:
    """A fault or a lost lock: when it struck, and until when it lasts."""

    kind: str
    at: float
    detail: str = ""
    until: float = 0.0

    def during(self, start: float, end: float) -> bool:
        """Whether the event struck or lasted at any time from ``start`` to ``end``."""
        return self.at <= end and max(self.at, self.until) >= start


Applied = tuple[float, str, tuple[Any, ...], Any, bool]
"""A server operation as applied: when, the method, its arguments, its result, and
whether it raised."""


@dataclass
class History:
    """Everything a run's checkers read."""

    applied: list[Applied] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    builds: list[Build] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    operations: int = 0
    now: Any = None

    def invoke(self, kind: str, thread: SimThread, key: int, entry: str = "row") -> Call:
        call = Call(len(self.calls), kind, thread.process.number, thread.name, key, self.now())
        call.entry = entry
        self.calls.append(call)
        return call

    def end(self, call: Call, outcome: str, value: Any = None) -> None:
        call.ended, call.outcome, call.value = self.now(), outcome, value

    def build_began(self, thread: SimThread, plan: Any) -> Build:
        key = plan.key if plan is not None else -1
        version = thread.sim.database.rows[key] if key >= 0 else 0
        process = thread.process
        entry = plan.entry if plan is not None else "row"
        # its lock, or the server's lease on its entry (the meta protocol)
        locked = (lock_key(process.cache, key, entry), entry_key(process.cache, key, entry))
        won = [
            held.since
            for held in process.renewer.renewing.values()
            if plan and held.lock.key in locked and held.thread is thread
        ]
        call = plan.call.number if plan else -1
        now = self.now()
        build = Build(
            len(self.builds),
            process.number,
            call,
            key,
            version,
            now,
            bool(won),
            won[0] if won else now,
            entry=entry,
            background="refresh" in thread.name,
        )
        build.waited_unread = thread.paused_at > thread.tags_read_at
        self.builds.append(build)
        return build

    def build_ended(self, build: Build) -> None:
        build.ended = self.now()

    def event(self, kind: str, detail: str = "", seconds: float = 0.0) -> None:
        now = self.now()
        self.events.append(Event(kind, now, detail, now + seconds))

    def lock_lost(self, process: SimProcess, key: str) -> None:
        self.event("lock_lost", f"process {process.number}: {key}")

    def killed(self, process: SimProcess) -> None:
        self.event("kill", f"process {process.number}")
        for call in self.calls:
            if call.process == process.number and call.outcome == "pending":
                call.outcome, call.ended = "unknown", self.now()

    def paused_during(self, call: Call) -> float:
        """How long ``call``'s process stood paused while the call ran: a stopped process
        answers with what it read before, so a bound on its answer moves by as much."""
        ended = self.now() if call.ended is None else call.ended
        return sum(
            e.until - e.at
            for e in self.events
            if e.kind == "pause"
            and e.detail.startswith(f"{call.process} ")
            and e.during(call.invoked, ended)
        )

    def digest(self) -> str:
        """A hash of the whole history: equal for equal runs, whatever the machine."""
        text = repr(
            (
                [
                    (
                        c.kind,
                        c.entry,
                        c.process,
                        c.key,
                        c.invoked,
                        c.ended,
                        c.outcome,
                        c.value,
                        c.stale,
                    )
                    for c in self.calls
                ],
                [(b.entry, b.process, b.key, b.version, b.began, b.ended) for b in self.builds],
                [(e.kind, e.at, e.detail) for e in self.events],
            )
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]
