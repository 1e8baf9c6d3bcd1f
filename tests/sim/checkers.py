"""The rules of ``docs/explanation/consistency.md``, each checked on a run's history.

Each checker returns the violations it finds; an allowance names the sentence of
``consistency.md`` that grants it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tests.sim.allowances import (
    LOCK_FAULTS,
    MAX_LATENCY,
    backed_off,
    bumped_past,
    entries,
    finishing_span,
    holder_found_store_down,
    holder_killed,
    kept_alive_until,
    lease_lost_at_its_start,
    lease_taken_by_a_write,
    leased_in_its_last_second,
    left_in_the_queue,
    lock_spans,
    lossy,
    stored_at,
    stored_stale_looks_fresh,
    widest_skew,
)
from tests.sim.dead_leases import dead_leases_taken_over
from tests.sim.fresh_current import (
    current_entries_fresh,
    entries_record_versions_read_after_waits,
    row_entries_stored_fresh,
    tags_move_only_when_written,
)
from tests.sim.history import Violation
from tests.sim.keys import entry_key, lock_key
from tests.sim.queue import circuit_windows, queue_drained
from tests.sim.routing import failover_during, redis_replica_behind, replica_unrouted
from tests.sim.transactions import uncommitted_never_stored

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation


def fresh_after_write(sim: Simulation) -> list[Violation]:
    """Guarantee 1: once a write's ``invalidate()`` returned, no reader that began after it
    gets an older value as fresh. Allowed (guarantee 1: "and the threads of its process
    that shared the call"): a thread that joined a call of its own process under way,
    which gets what that call got, built or read when it began."""
    return _old_as_fresh(sim, "row", "guarantee 1 (no old value as fresh)")


def dependencies_propagate(sim: Simulation) -> list[Violation]:
    """Rule 1: a page records the tags of the row entry its build read, so once a bump of
    the row's tag returned, no reader that began after it gets a page showing an older
    version as fresh. Only bumps count: a ``delete`` of the row's entry is of that key
    alone (guarantee 1 names the entry's tags, "and those of every cached value read
    inside the build"), so the page over it stays valid. Allowed as in guarantee 1, and a
    page its reader's own call built: what that page shows, its nested read got, and that
    read is itself checked by guarantee 1."""
    return _old_as_fresh(sim, "page", "rule 1 (dependencies propagate upward)")


def _old_as_fresh(sim: Simulation, entry: str, rule: str) -> list[Violation]:
    calls, builds = sim.history.calls, sim.history.builds
    writes = [
        c
        for c in calls
        if c.kind == "write"
        and c.invalidated
        and c.outcome == "ok"
        and (entry == "row" or not c.by_delete)
    ]
    found = []
    for read in calls:
        if read.kind != "read" or read.entry != entry or read.outcome != "ok":
            continue
        if read.stale or read.value is None or read.shared_flight:
            continue
        before = [w for w in writes if w.key == read.key and w.ended < read.invoked]
        if not before:
            continue
        newest = max(before, key=lambda w: w.version)
        key, version, number = read.value[:3]
        build = builds[number]
        if version >= newest.version or (entry == "page" and build.call == read.number):
            continue
        if (build.part_stale or build.part_unknown) and stored_stale_looks_fresh(sim, read, build):
            continue
        if failover_during(sim, newest.ended, read.ended) or replica_unrouted(sim, build):
            continue
        if redis_replica_behind(sim, newest, read):
            continue
        if entry == "page" and replica_unrouted(sim, builds[read.value[3]]):
            continue  # built over a row's entry that the replica made
        found.append(
            Violation(
                rule,
                f"call {read.number} (process {read.process}, began {read.invoked:.4f}) got"
                f" {entry} {key} at row v{version} from build {number} (process"
                f" {build.process}, began {build.began:.4f}) as fresh; write {newest.number}"
                f" of v{newest.version} had returned at {newest.ended:.4f}",
            )
        )
    return found


def no_stale_consumed(sim: Simulation) -> list[Violation]:
    """Rule 2 and guarantee 3: a page whose build read its row's entry stale is stored
    already stale, so no other caller gets it as fresh. Allowed: the build's own caller
    (rule 3: "its own caller still gets what it built"), which is told it is stale, and
    the threads of its process that shared that call (guarantee 1)."""
    builds = sim.history.builds
    found = []
    for read in sim.history.calls:
        if read.kind != "read" or read.entry != "page" or read.outcome != "ok":
            continue
        if read.stale or read.value is None or read.shared_flight:
            continue
        build = builds[read.value[2]]
        if not build.part_stale or build.call == read.number:
            continue
        if stored_stale_looks_fresh(sim, read, build):
            continue
        found.append(
            Violation(
                "rule 2 (a build never consumes stale data silently)",
                f"call {read.number} (process {read.process}) got page {read.key} as fresh"
                f" from build {build.number} (process {build.process}), whose read of row"
                f" {read.key} was served stale",
            )
        )
    return found


def no_stale_sets(sim: Simulation) -> list[Violation]:
    """Rule 3: a build that began before a delete of its key never leaves a fresh entry
    behind: once a write that deleted a row's entry returned, no store of that entry holds
    an older version of the row, fresh. Stored already stale is allowed (rule 3 says
    "fresh"), and so is a store after a bump its recorded tag version predates: that
    entry is not fresh to any reader (guarantee 1 checks the readers)."""
    deletes = [
        c
        for c in sim.history.calls
        if c.kind == "write" and c.by_delete and c.invalidated and c.outcome == "ok"
    ]
    if not deletes:
        return []
    found = []
    for at, key, entry in row_entries_stored_fresh(sim):
        value = entry[1]
        version = value[1]
        newer = [d for d in deletes if d.key == key and d.ended < at and d.version > version]
        if not newer or bumped_past(sim, key, entry[4], at):
            continue  # (stale on arrival: no reader takes it as fresh)
        unrouted = replica_unrouted(sim, sim.history.builds[value[2]])
        if not failover_during(sim, newer[0].invoked, at) and not unrouted:
            found.append(
                Violation(
                    "rule 3 (no stale sets)",
                    f"row {key} v{version} (build {value[2]}) was stored fresh at {at:.4f},"
                    f" after write {newer[0].number} of v{newer[0].version} deleted its entry"
                    f" and returned at {newer[0].ended:.4f}",
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
            if (second.key, second.entry) != (first.key, first.entry):
                continue
            if second.began >= first.ended:
                continue
            # won when its add was applied, up to a reply's latency before its holder knew
            won = first.locked_at - MAX_LATENCY
            if dropping or any(e.during(won, second.began) for e in faults):
                continue
            # the lease a write took may be of the build that began second (won, then slow)
            taken = lease_taken_by_a_write(sim, first, second)
            if taken or lease_taken_by_a_write(sim, second, first):
                continue
            if lease_lost_at_its_start(sim, first) or failover_during(sim, won, first.ended):
                continue
            found.append(
                Violation(
                    "guarantee 5 (builds run once)",
                    f"builds {first.number} (process {first.process}) and {second.number}"
                    f" (process {second.process}) of {first.entry} {first.key} both held its lock,"
                    f" {first.began:.4f}-{first.ended:.4f} and from {second.began:.4f}",
                )
            )
    return found


def locks_freed(sim: Simulation) -> list[Violation]:
    """Rule 4: a lock lives as long as its build. One that expires on its own, rather than
    being released, must have a holder that died, stalled or could not reach the server
    (a kill, a pause, a late or failed renewal, a crash, dropped requests, a store call
    that failed under it)."""
    cache = sim.processes[0].cache
    faults = [e for e in sim.history.events if e.kind in LOCK_FAULTS]
    if sim.config.drop_rate or sim.config.lost_reply_rate:
        return []
    found = []
    for entry, key in entries(sim):
        lock = lock_key(cache, key, entry)
        for began, ended, how in lock_spans(sim, lock):
            # a killed holder's add may still land after it died, a reply's latency later
            if how != "expired" or any(e.during(began - MAX_LATENCY, ended) for e in faults):
                continue
            if backed_off(sim, entry, key, began, ended):
                continue
            if holder_found_store_down(sim, entry, key, began):
                continue
            if left_in_the_queue(sim, entry, key, began, ended):
                continue
            if leased_in_its_last_second(sim, lock, began) or failover_during(sim, began, ended):
                continue
            found.append(
                Violation(
                    "rule 4 (a lock lives as long as its build)",
                    f"the lock of {entry} {key}, taken at {began:.4f}, was never released: it"
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
    spans = {
        (entry, key): lock_spans(sim, lock_key(cache, key, entry)) for entry, key in entries(sim)
    }
    skew = widest_skew(sim)
    slack = 1 + skew + 2 * MAX_LATENCY  # whole seconds, skew, trips
    dropping = lossy(sim)
    lives = config.ttl * (1 + config.jitter) + config.stale_ttl + slack
    found = []
    for read in history.calls:
        if read.kind != "read" or read.outcome != "ok" or not read.stale:
            continue
        number = read.value[2]
        build = history.builds[number]
        if build.call == read.number and build.part_stale:
            continue  # a page stale for its row's sake, which is checked as a read itself
        at = read.ended
        stalled = history.paused_during(read)
        stored = stored_at(sim, entry_key(cache, read.key, read.entry), build)
        life_ends = stored + lives + stalled  # a stopped process answers what it read
        here = spans[read.entry, read.key]
        finishing = finishing_span(here, build, read)
        rebuilding = any(
            began - MAX_LATENCY <= at <= ended + MAX_LATENCY
            for began, ended, how in here
            if (began, ended, how) != finishing
        )
        # a rebuild under way when the entry's life ended keeps it until that rebuild ends
        # (its lock's span, or the build itself if its lock was lost under it meanwhile;
        # and a rebuild that took it over while it was under way, in turn); a reader
        # answers with what the server held a reply's latency before its answer, so "when
        # its life ended" is counted as seen from there
        rebuilds = [(began, ended) for began, ended, _ in here] + [
            (b.began, b.ended if b.ended is not None else math.inf)
            for b in history.builds
            if b.under_lock and (b.entry, b.key) == (read.entry, read.key) and b.number != number
        ]
        # A lease's give-back lost on the way, or with its killed process, leaves the
        # life of the keep-alive before it (consistency.md: "a rebuild whose process dies
        # leaves its stale entry the life its last keep-alive gave it"); killed, only the
        # keep-alives of the rebuilds up to the one under way when the entry's life ended
        # count, a later rebuild keeps no entry past its own life alive
        if dropping:
            kept_before = at
        elif holder_killed(sim, read.entry, read.key):
            under_way = rebuilt_until(rebuilds, life_ends - MAX_LATENCY)
            kept_before = min(at, max(life_ends, under_way) + MAX_LATENCY)
        else:
            kept_before = -math.inf
        if kept_before > -math.inf:
            key = entry_key(cache, read.key, read.entry)
            life_ends = max(life_ends, kept_alive_until(sim, key, kept_before))
        kept = at <= rebuilt_until(rebuilds, life_ends - MAX_LATENCY) + MAX_LATENCY
        failed = [b for b in history.builds if b.call == read.number and b.failed]
        # stale-if-error after its own rebuild failed: kept until the rebuild under way ends
        own_failed = any(at <= (b.ended or at) + 2 * MAX_LATENCY for b in failed)
        kept = kept or any(b.began <= life_ends for b in failed if own_failed)
        # A thread that shared its process's call of the key: its leader was rebuilding
        # it, or trying to (guarantee 2: "callers that arrive while another caller rebuilds").
        reason = stalled or rebuilding or own_failed or read.shared_flight or read.store_failed
        if failover_during(sim, at - config.lock_timeout, at):
            continue
        if at > life_ends and not kept:
            why = "outlived ttl + stale_ttl"
        elif reason:
            continue
        else:
            why = "nobody rebuilding it"
        found.append(
            Violation(
                "guarantee 2 (stale only while rebuilt, and bounded)",
                f"call {read.number} (process {read.process}) was served build {number}'s"
                f" value stale at {at:.4f} ({why}; built {build.began:.4f}-{build.ended:.4f})",
            )
        )
    return found


def rebuilt_until(rebuilds: list[tuple[float, float]], since: float) -> float:
    """When the rebuilding under way at ``since`` ended: the end of the run of overlapping
    ``rebuilds`` (each from when it began to when it ended) that holds ``since``, or
    ``-inf`` if none was under way then."""
    until = -math.inf
    for began, ended in sorted(rebuilds):
        if began - MAX_LATENCY <= max(since, until):
            if ended >= since:
                until = max(until, ended)
        elif until > -math.inf:
            break
    return until


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
    reads each row's entry, and each page, fresh at its row's latest version (exempt: a
    key whose write could not invalidate, having returned ``{}`` with the cache down, and
    a page whose row was written by a delete, which is of the row's entry alone)."""
    found = []
    calls = sim.history.calls
    for read in sim.liveness:
        key = read.key
        writes = [c for c in calls if c.kind == "write" and c.key == key]
        if any(not w.invalidated or (read.entry == "page" and w.by_delete) for w in writes):
            continue
        latest = sim.database.rows[key]
        if read.outcome != "ok" or read.stale or read.value is None or read.value[1] != latest:
            found.append(
                Violation(
                    "liveness (served fresh at the latest version)",
                    f"row {key} is at v{latest}; the final read of its {read.entry} got"
                    f" {read.value!r} ({read.outcome}{', stale' if read.stale else ''})",
                )
            )
    return found


CHECKERS = (
    fresh_after_write,
    dependencies_propagate,
    no_stale_consumed,
    no_stale_sets,
    builds_once,
    stale_bounded,
    locks_freed,
    dead_leases_taken_over,
    no_lock_outlives_its_build,
    live_after_faults,
    current_entries_fresh,
    entries_record_versions_read_after_waits,
    tags_move_only_when_written,
    queue_drained,
    circuit_windows,
    uncommitted_never_stored,
)


def check(sim: Simulation) -> list[Violation]:
    """Every checker's violations."""
    return [violation for checker in CHECKERS for violation in checker(sim)]
