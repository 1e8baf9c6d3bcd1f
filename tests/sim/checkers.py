"""The rules of ``docs/explanation/consistency.md``, each checked on a run's history.

Each checker returns the violations it finds; an allowance names the sentence of
``consistency.md`` that grants it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.sim.keys import lock_key
from tests.sim.world import EPOCH

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation

LOCK_FAULTS = {
    "crash",
    "kill",
    "evict_lock",
    "pause",
    "late_renewer",
    "lock_lost",
    "renewal_failed",
}
"""What may let two builds hold one key's lock at once (rule 4: a lock lost under its
holder, a holder stalled past ``lock_timeout``, a server that lost the lock)."""


MAX_LATENCY = 0.25
"""The longest a simulated request or reply takes (tests/sim/simulation.py's Network)."""


@dataclass
class Violation:
    """A rule broken: which, and the calls that show it."""

    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


def fresh_after_write(sim: Simulation) -> list[Violation]:
    """Guarantee 1: once a write's ``invalidate()`` returned, no reader that began after it
    gets an older value as fresh. Allowed (guarantee 1: "and the threads of its process
    that shared the call"): a thread that joined a call of its own process under way,
    which gets what that call got, built or read when it began."""
    calls, builds = sim.history.calls, sim.history.builds
    writes = [c for c in calls if c.kind == "write" and c.invalidated and c.outcome == "ok"]
    found = []
    for read in calls:
        if read.kind != "read" or read.outcome != "ok" or read.stale or read.value is None:
            continue
        before = [w for w in writes if w.key == read.key and w.ended < read.invoked]
        if not before:
            continue
        newest = max(before, key=lambda w: w.version)
        key, version, number = read.value
        if version >= newest.version:
            continue
        build = builds[number]
        if read.shared_flight:
            continue
        found.append(
            Violation(
                "guarantee 1 (no old value as fresh)",
                f"call {read.number} (process {read.process}, began {read.invoked:.4f}) got"
                f" row {key} v{version} from build {number} (process {build.process}, began"
                f" {build.began:.4f}) as fresh; write {newest.number} of v{newest.version}"
                f" had returned at {newest.ended:.4f}",
            )
        )
    return found


def builds_once(sim: Simulation) -> list[Violation]:
    """Guarantee 5 and rule 4: no two builds of a key hold its lock at once, unless a fault
    that rule 4 names (a lock lost, a holder stalled or killed, a server that lost it)
    struck between their starts."""
    builds = [b for b in sim.history.builds if b.under_lock and b.ended is not None]
    faults = [e for e in sim.history.events if e.kind in LOCK_FAULTS]
    dropping = sim.config.drop_rate or sim.config.lost_reply_rate
    found = []
    for i, first in enumerate(builds):
        for second in builds[i + 1 :]:
            if second.key != first.key or second.began >= first.ended:
                continue
            # won when its add was applied, up to a reply's latency before its holder knew
            won = first.locked_at - MAX_LATENCY
            if dropping or any(e.during(won, second.began) for e in faults):
                continue
            found.append(
                Violation(
                    "guarantee 5 (builds run once)",
                    f"builds {first.number} (process {first.process}) and {second.number}"
                    f" (process {second.process}) of row {first.key} both held its lock,"
                    f" {first.began:.4f}-{first.ended:.4f} and from {second.began:.4f}",
                )
            )
    return found


def lock_spans(sim: Simulation, lock_key: str) -> list[tuple[float, float, str]]:
    """When the server held ``lock_key``: from each ``add`` (or ``set``) that stored it to
    its release, its deletion, a crash or its expiry (whole seconds), extensions followed;
    each span with how it ended ("released", "deleted", "flushed" or "expired")."""
    spans: list[tuple[float, float, str]] = []
    start, until = None, 0.0

    def expiry(at: float, ttl: int) -> float:
        return math.inf if ttl == 0 else math.floor(at + EPOCH) + ttl - EPOCH

    for at, method, args, result, raised in sim.history.applied:
        if start is not None and at >= until:
            spans.append((start, until, "expired"))
            start = None
        if raised or (method != "flush" and (not args or args[0] != lock_key)):
            continue
        if method in ("add", "set") and (result or method == "set"):
            if start is None:
                start = at
            until = expiry(at, int(args[2]))
        elif method == "cas" and result and start is not None:
            ttl = int(args[3])
            if ttl < 0:
                spans.append((start, at, "released"))
                start = None
            else:
                until = expiry(at, ttl)
        elif method in ("delete", "flush") and start is not None:
            spans.append((start, at, "deleted" if method == "delete" else "flushed"))
            start = None
    if start is not None:
        spans.append((start, until, "expired"))
    return spans


def locks_freed(sim: Simulation) -> list[Violation]:
    """Rule 4: a lock lives as long as its build. One that expires on its own, rather than
    being released, must have a holder that died, stalled or could not reach the server
    (a kill, a pause, a late or failed renewal, a crash, dropped requests)."""
    cache = sim.processes[0].cache
    faults = [e for e in sim.history.events if e.kind in LOCK_FAULTS]
    if sim.config.drop_rate or sim.config.lost_reply_rate:
        return []
    found = []
    for key in range(sim.config.keys):
        for began, ended, how in lock_spans(sim, lock_key(cache, key)):
            # a killed holder's add may still land after it died, a reply's latency later
            if how != "expired" or any(e.during(began - MAX_LATENCY, ended) for e in faults):
                continue
            found.append(
                Violation(
                    "rule 4 (a lock lives as long as its build)",
                    f"the lock of row {key}, taken at {began:.4f}, was never released: it"
                    f" expired at {ended:.4f} with no fault to explain it",
                )
            )
    return found


def stale_bounded(sim: Simulation) -> list[Violation]:
    """Guarantee 2 and rule 5: a stale value is served only while it is being rebuilt (the
    server holds its key's build lock: a live holder's, or one whose holder died or whose
    release was lost, until it expires within ``lock_timeout``), or when its rebuild failed
    (stale-if-error: the caller's own build raised, or a store call of it failed), and for
    at most ``ttl + stale_ttl`` after it was written, unless a rebuild under way keeps it
    ("or until the rebuild under way at that moment ends")."""
    config, history = sim.config, sim.history
    cache = sim.processes[0].cache
    spans = {key: lock_spans(sim, lock_key(cache, key)) for key in range(config.keys)}
    slack = 1 + max(map(abs, config.skews)) + 2 * MAX_LATENCY  # whole seconds, skew, trips
    lives = config.ttl * (1 + config.jitter) + config.stale_ttl + slack
    found = []
    for read in history.calls:
        if read.kind != "read" or read.outcome != "ok" or not read.stale:
            continue
        _, _, number = read.value
        build = history.builds[number]
        at = read.ended
        stalled = sum(
            e.until - e.at
            for e in history.events
            if e.kind == "pause"
            and e.detail.startswith(f"{read.process} ")
            and e.during(read.invoked, at)
        )
        if stalled and at <= build.ended + lives + stalled:
            continue  # its own process stopped mid-call: it answered what it had read
        rebuilding = any(
            began - MAX_LATENCY <= at <= ended + MAX_LATENCY for began, ended, _ in spans[read.key]
        )
        failed = [b for b in history.builds if b.call == read.number and b.failed]
        # stale-if-error after its own rebuild failed: kept until the rebuild under way ends
        own_failed = any(at <= (b.ended or at) + 2 * MAX_LATENCY for b in failed)
        # A thread that shared its process's call of the key: its leader was rebuilding
        # it, or trying to (guarantee 2: "callers that arrive while another caller rebuilds").
        if read.shared_flight and at <= build.ended + lives:
            continue
        if rebuilding or own_failed or (read.store_failed and at <= build.ended + lives):
            continue
        why = "outlived ttl + stale_ttl" if at > build.ended + lives else "nobody rebuilding it"
        found.append(
            Violation(
                "guarantee 2 (stale only while rebuilt, and bounded)",
                f"call {read.number} (process {read.process}) was served build {number}'s"
                f" value stale at {at:.4f} ({why}; built {build.began:.4f}-{build.ended:.4f})",
            )
        )
    return found


def no_lock_outlives_its_build(sim: Simulation) -> list[Violation]:
    """Rule 4, liveness: once every call has ended, no process still renews a lock (one
    renewed with no build under way would keep its key's rebuilds away for ever)."""
    return [
        Violation(
            "rule 4 (a lock lives as long as its build)",
            f"{key} is still renewed after every call ended",
        )
        for key in sim.renewed_at_end
    ]


def live_after_faults(sim: Simulation) -> list[Violation]:
    """Liveness: after the faults heal and every lock has had time to free, a fresh process
    reads each key fresh at its row's latest version (a key whose last write could not
    invalidate is exempt: that write returned ``{}``, the cache being down)."""
    found = []
    calls = sim.history.calls
    for key, read in enumerate(sim.liveness):
        writes = [c for c in calls if c.kind == "write" and c.key == key]
        if any(not w.invalidated for w in writes):
            continue
        latest = sim.database.rows[key]
        if read.outcome != "ok" or read.stale or read.value is None or read.value[1] != latest:
            found.append(
                Violation(
                    "liveness (served fresh at the latest version)",
                    f"row {key} is at v{latest}; the final read got {read.value!r}"
                    f" ({read.outcome}{', stale' if read.stale else ''})",
                )
            )
    return found


CHECKERS = (
    fresh_after_write,
    builds_once,
    stale_bounded,
    locks_freed,
    no_lock_outlives_its_build,
    live_after_faults,
)


def check(sim: Simulation) -> list[Violation]:
    """Every checker's violations."""
    return [violation for checker in CHECKERS for violation in checker(sim)]
