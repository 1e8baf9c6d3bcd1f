"""What the checkers may excuse, read off a run's history: when a lock was held, how
long an entry was kept alive, how far the hosts' clocks were apart, whether requests
could be lost. Each allowance names the sentence of ``consistency.md`` that grants it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mcache.engine.writing import BUSY_SECONDS
from mcache.model.tags import version_ms
from tests.sim.keys import entry_key, lock_key
from tests.sim.nodes import LEASE, STALE_LEASE
from tests.sim.world import EPOCH

if TYPE_CHECKING:
    from tests.sim.history import Build, Call
    from tests.sim.simulation import Simulation


LOCK_FAULTS = {
    "crash",
    "kill",
    "evict_lock",
    "pause",
    "late_renewer",
    "lock_lost",
    "renewal_failed",
    "partition",
    "rejoin_flush",
    "race_keep",
}
"""What may let two builds hold one key's lock at once (rule 4: a lock lost under its
holder, a holder stalled past ``lock_timeout`` (its renewer too: ``race_keep`` holds
back the reply to a keep-alive, and the process's renewals wait behind it), a server
that lost the lock; how-to/clusters.md, "Safe rejoin": a process whose own network was
cut off flushes a server that was healthy for everyone else, "its locks and tag
versions included")."""


MAX_LATENCY = 0.25
"""The longest a simulated request or reply takes (tests/sim/simulation.py's Network)."""


def skews_of(sim: Simulation, process: int) -> list[float]:
    """Every skew ``process``'s clock had in the run (a clock jump adds one); the liveness
    process's clock has none."""
    return sim.skews_seen[process] if process < len(sim.skews_seen) else [0.0]


def widest_skew(sim: Simulation) -> float:
    """The largest skew, either way, any host's clock had in the run."""
    return max(abs(skew) for skews in sim.skews_seen for skew in skews)


def lossy(sim: Simulation) -> bool:
    """Whether requests or replies could be lost: dropped, lost, or cut by a partition."""
    config = sim.config
    partitioned = any(f.kind == "partition" for f in config.faults)
    return bool(config.drop_rate or config.lost_reply_rate or partitioned)


def stored_stale_looks_fresh(sim: Simulation, read: Call, build: Build) -> bool:
    """Whether ``read`` may take the entry ``build`` stored already stale as fresh, its
    clock lagging the builder's (consistency.md, the stated exceptions: "fresh-until times
    are written with the builder's clock and compared with the reader's, so skew shifts
    when an entry expires"; one stored stale is fresh until the builder's now)."""
    lag = max(skews_of(sim, build.process)) - min(skews_of(sim, read.process))
    return lag > 0 and build.ended is not None and read.ended <= build.ended + lag + MAX_LATENCY


def lock_spans(sim: Simulation, lock_key: str) -> list[tuple[float, float, str]]:
    """When the server held ``lock_key``: from each ``add`` (or ``set``) that stored it to
    its release, its deletion, a crash or its expiry (:func:`expiry`), extensions followed;
    each span with how it ended ("released", "deleted", "flushed" or "expired").

    On memcached's meta protocol a key's lease is held on its entry's server, and while
    that server is marked dead its stand-in locks the key portably under the lock's own
    name, on the server that name maps to: the two are told apart by what they hold (a
    lease, or a holder's token), so that one's release does not end the other's span."""
    families = {
        lock_family(args[1])
        for _, method, args, _, raised in sim.history.applied
        if method in ("add", "set") and not raised and args and args[0] == lock_key
    }
    return sorted(span for family in families for span in family_spans(sim, lock_key, family))


def expiry(sim: Simulation, at: float, ttl: float) -> float:
    """When a key given ``ttl`` seconds at ``at`` expires: memcached counts whole seconds of
    its own clock, Redis milliseconds (0: never)."""
    if not ttl:
        return math.inf
    if sim.config.store == "redis":
        return at + float(ttl)
    return math.floor(at + EPOCH) + int(ttl) - EPOCH


def lock_family(held: object) -> object:
    """Which lock a value held under a lock's name belongs to: memcached's lease (won, or a
    stale item's), or the portable lock its token names."""
    return LEASE if held in (LEASE, STALE_LEASE) else "portable"


def family_spans(sim: Simulation, lock_key: str, family: object) -> list[tuple[float, float, str]]:
    """``lock_spans`` of the lock ``family`` names."""
    spans: list[tuple[float, float, str]] = []
    start, until = None, 0.0

    for at, method, args, result, raised in sim.history.applied:
        if start is not None and at >= until:
            spans.append((start, until, "expired"))
            start = None
        if raised or (method != "flush" and (not args or args[0] != lock_key)):
            continue
        if method in ("add", "set", "cas") and lock_family(args[1]) != family:
            continue
        if method in ("add", "set") and (result or method == "set"):
            if start is None:
                start = at
            until = expiry(sim, at, args[2])
        elif method == "cas" and result and start is not None:
            if int(args[3]) < 0:
                spans.append((start, at, "released"))
                start = None
            else:
                until = expiry(sim, at, args[3])
        elif method in ("delete", "flush") and start is not None:
            spans.append((start, at, "deleted" if method == "delete" else "flushed"))
            start = None
    if start is not None:
        spans.append((start, until, "expired"))
    return spans


def finishing_span(
    spans: list[tuple[float, float, str]], build: Build, read: Call
) -> tuple[float, float, str] | None:
    """The span of ``build``'s own lock, if ``read`` waited on it from before ``build`` ended
    and was served ``build``'s value stale within a quarter second of that end: a lock's
    last moments, after its holder's write, are no rebuild of the value it wrote
    (consistency.md: "a lock waiter whose entry arrives stale while the lock is held ...
    asks for the lock again for a quarter second")."""
    if not build.under_lock or build.ended is None or read.invoked + MAX_LATENCY >= build.ended:
        return None
    if read.ended is None or read.ended >= build.ended + BUSY_SECONDS:
        return None
    own = [span for span in spans if span[0] <= build.locked_at]
    return own[-1] if own else None


def stored_at(sim: Simulation, key: str, build: Build) -> float:
    """When the server first stored ``build``'s value under ``key`` (its end, if never): a
    holder stopped between its build and its write (a pause, a slow request) gives its
    entry its whole life from the write. (A keep-alive's rewrite of the same bytes later
    gives it no more life of its own.)"""
    ended = build.ended if build.ended is not None else 0.0
    for t, method, args, result, raised in sim.history.applied:
        if t < ended or raised or not result or method not in ("add", "set", "cas"):
            continue
        if args[0] != key:
            continue
        entry = sim.codec.loads(args[1], args[0])
        if isinstance(entry, list) and entry[0] == "mc1" and entry[1] == build.value:
            return t
    return ended


def kept_alive_until(sim: Simulation, key: str, before: float) -> float:
    """When the last keep-alive of ``key`` applied before ``before`` let it expire: a
    ``cas`` writing back the bytes the key held, as a build's lease keeps a stale entry
    (its give-back, if a request of it is dropped, never comes)."""
    held, until = None, 0.0
    for at, method, args, result, raised in sim.history.applied:
        if at >= before:
            break
        if raised or not args or args[0] != key:
            continue
        if method == "cas" and result and args[1] == held and int(args[3]) > 0:
            whole_seconds = 0.0 if sim.config.store == "redis" else 1.0  # memcached's slack
            until = expiry(sim, at, args[3]) + whole_seconds
        if method in ("add", "set", "cas") and result:
            held = args[1]
    return until


def deaths(sim: Simulation) -> list[tuple[float, int]]:
    """When each process was killed, and which (the kill of a whole process, as the
    history records it, not the aimed faults' notes of what it cut short)."""
    return [
        (e.at, int(e.detail.split()[1]))
        for e in sim.history.events
        if e.kind == "kill" and e.detail.startswith("process ")
    ]


def holder_killed(sim: Simulation, entry: str, key: int) -> bool:
    """Whether a build of ``entry`` ``key`` under its lock had its process killed while it
    ran: its lease's give-back never comes (consistency.md: "a rebuild whose process dies
    leaves its stale entry the life its last keep-alive gave it")."""
    return any(
        b.under_lock
        and b.process == process
        and b.began <= at <= (b.ended if b.ended is not None else math.inf)
        for at, process in deaths(sim)
        for b in sim.history.builds
        if (b.entry, b.key) == (entry, key)
    )


def backed_off(sim: Simulation, entry: str, key: int, began: float, ended: float) -> bool:
    """Whether a lock held from ``began`` to ``ended`` was a failed background rebuild's,
    kept unrenewed for two lock timeouts so nobody retries at once (rule 4: "After a
    background rebuild fails, its lock is kept, unrenewed, for two lock timeouts")."""
    return any(
        b.background and b.failed and b.ended is not None and began <= b.ended <= ended
        for b in sim.history.builds
        if (b.entry, b.key) == (entry, key)
    )


def left_in_the_queue(sim: Simulation, entry: str, key: int, began: float, ended: float) -> bool:
    """Whether the lock held from ``began`` to ``ended`` was handed off with a queued job
    that was lost, or that no worker took before the lock's hold ran out
    (how-to/task-queue.md: "held for ``hold`` seconds until a worker takes it over";
    "a job lost with its broker stops renewing")."""
    cache = sim.processes[0].cache
    names = {lock_key(cache, key, entry), entry_key(cache, key, entry)}  # a lock's, a lease's
    return any(
        e.kind in ("job_queued", "job_lost")
        and e.detail in names
        and began <= e.at <= ended
        and e.until >= ended - MAX_LATENCY
        for e in sim.history.events
    )


def holder_found_store_down(sim: Simulation, entry: str, key: int, began: float) -> bool:
    """Whether the lock the server took at ``began`` went to a build whose call had a store
    call fail, so that its pool marked the server dead and sent neither its entry nor the
    lock's release (rule 4: "a holder that finds the server down, its pool marking it dead
    for ``dead_timeout``, leaves its lock to expire within ``lock_timeout`` too")."""
    return any(
        b.under_lock
        and began <= b.locked_at <= began + 2 * MAX_LATENCY
        and 0 <= b.call < len(sim.history.calls)
        and sim.history.calls[b.call].store_failed
        for b in sim.history.builds
        if (b.entry, b.key) == (entry, key)
    )


def entries(sim: Simulation) -> list[tuple[str, int]]:
    """Every entry a run may have made: each row's, and each page's if it reads pages."""
    entries = ("row", "page") if sim.config.pages else ("row",)
    return [(entry, key) for entry in entries for key in range(sim.config.keys)]


def lease_taken_by_a_write(sim: Simulation, first: Build, second: Build) -> bool:
    """Whether ``first``'s lease went with a write of its row before ``second`` began
    (consistency.md, guarantee 5: "on memcached's meta protocol the lock is the server's
    lease on the entry: a delete, a newer write or an invalidation during a build takes
    it, and the next reader builds the new data while the first build's write is
    refused"). A span the server held from ``first``'s call's start to when its build knew
    it held the lease (a lease won in a read may be handed to the refresher's thread, and
    held from there, later) ended by a release or a delete, not by expiring, before
    ``second`` began, with a write of the row applied in between, or another build's store
    of the entry ending it."""
    if sim.config.store != "meta":
        return False
    calls = sim.history.calls
    cache = sim.processes[0].cache
    asked = calls[first.call].invoked if 0 <= first.call < len(calls) else first.locked_at
    won = min(asked, first.locked_at) - MAX_LATENCY
    written = any(
        c.kind == "write" and c.key == first.key and won <= c.invoked <= second.began for c in calls
    )
    for start, end, how in lock_spans(sim, lock_key(cache, first.key, first.entry)):
        if not won <= start <= first.locked_at or how == "expired" or end > second.began:
            continue
        # "a newer write (another process's store of the entry among them ...)"
        stored = any(
            b is not first
            and (b.entry, b.key) == (first.entry, first.key)
            and not b.failed
            and b.ended is not None
            and won <= b.ended <= end + MAX_LATENCY
            for b in sim.history.builds
        )
        if written or stored:
            return True
    return False


def lease_lost_at_its_start(sim: Simulation, first: Build) -> bool:
    """Whether ``first``'s lease was lost before its holder's first touch of the entry
    (consistency.md, guarantee 5: "A lease won on an entry in the last second of its life,
    or with less than a lock's life left, is one round trip from its holder's first touch:
    the entry may expire first, or another reader take the rebuild over as from a dead
    holder, and both build"). Its span, as the server held it, expired within a second of
    being won, or was taken over (released, and won again at once) within two trips."""
    if sim.config.store != "meta":
        return False
    key = lock_key(sim.processes[0].cache, first.key, first.entry)
    spans = lock_spans(sim, key)
    starts = {start for start, _, _ in spans}
    for start, end, how in spans:
        if not first.locked_at - MAX_LATENCY <= start <= first.locked_at:
            continue
        if how == "expired" and leased_in_its_last_second(sim, key, start):
            return True
        if how == "released" and end - start <= 2 * MAX_LATENCY and end in starts:
            return True
    return False


def leased_in_its_last_second(sim: Simulation, key: str, at: float) -> bool:
    """Whether the lease recorded under ``key`` at ``at`` was won on an entry with a second
    or less left (memcached's whole seconds: maybe only milliseconds), which expired
    before its holder's first touch (consistency.md, guarantee 5, as above)."""
    return sim.config.store == "meta" and any(
        t == at and method == "add" and args[0] == key and int(args[2]) <= 1
        for t, method, args, _, raised in sim.history.applied
        if not raised
    )


def bumped_past(sim: Simulation, key: int, versions: dict[str, int], at: float) -> bool:
    """Whether row ``key``'s tag had been bumped past the version ``versions`` records by
    ``at``: a write of the row invoked after that version was made (on any host's clock)
    had returned. A bump moves a tag to ``max(now, old + 1)``, so an entry recording that
    version is stale to every reader from then on."""
    recorded = versions.get(f"t{key}")
    if recorded is None:
        return False
    made = version_ms(recorded) / 1000 - EPOCH + widest_skew(sim)
    return any(
        c.kind == "write"
        and c.key == key
        and c.invalidated
        and not c.by_delete
        and c.invoked > made
        and c.ended is not None
        and c.ended < at
        for c in sim.history.calls
    )
