"""Liveness: an entry nobody made stale is served fresh.

A build records the versions of its tags read before it began, and readers find its
entry fresh until its ``ttl`` ends unless a write bumped a tag since. An entry stored
with versions of no use (a queue worker that did not read them, say) would be served
stale to every reader and rebuilt by each: the old value always, a rebuild for nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tests.sim.allowances import MAX_LATENCY, bumped_past, lossy, stored_at, widest_skew
from tests.sim.history import Violation
from tests.sim.keys import entry_key
from tests.sim.routing import failover_during
from tests.sim.world import EPOCH

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation

UNSETTLING = {"evict_tag", "race_tag", "crash", "rejoin_flush", "flush", "clock_jump"}
"""Faults after which a current entry may be found stale: a tag recreated at a newer
version, a host clock stepped past its entry's time."""


def current_entries_fresh(sim: Simulation) -> list[Violation]:
    """Liveness: a row's entry read within its ``ttl`` of being stored, with no write of
    its row (nor a transaction's bump, nor a forced refresh) since its build read its
    tags, is served fresh."""
    history, config = sim.history, sim.config
    if lossy(sim) or any(e.kind in UNSETTLING for e in history.events):
        return []  # (a build whose tag read failed stores its entry already stale)
    cache = sim.processes[0].cache
    fresh_for = config.ttl * (1 - config.jitter) - widest_skew(sim) - 2 * MAX_LATENCY
    # a write, a transaction's bump, and a forced refresh, which a cancelled caller hands
    # back marked stale (memcached's lease: the next reader rebuilds, as it was asked to)
    writes = [c for c in history.calls if c.kind in ("write", "tx-read") or c.forced]
    found = []
    for read in history.calls:
        if read.kind != "read" or read.entry != "row" or read.outcome != "ok" or not read.stale:
            continue
        build = history.builds[read.value[2]]
        if build.ended is None or not 0 <= build.call < len(history.calls):
            continue
        stored = stored_at(sim, entry_key(cache, read.key, "row"), build)
        at = read.ended
        if at > stored + fresh_for:
            continue
        since = min(build.began, history.calls[build.call].invoked) - MAX_LATENCY
        if any(
            w.key == read.key and w.invoked - 2 * MAX_LATENCY <= at and (w.ended or at) >= since
            for w in writes
        ):
            continue
        found.append(
            Violation(
                "liveness (a current entry is served fresh)",
                f"call {read.number} (process {read.process}) was served row {read.key}'s"
                f" entry stale at {at:.4f}, stored at {stored:.4f} (ttl {config.ttl}) with"
                " no write of the row since its build read its tags",
            )
        )
    return found


def tags_move_only_when_written(sim: Simulation) -> list[Violation]:
    """Liveness, at its cause: a tag's version on the server moves at a bump, or where its
    copy was lost, never because a reader overwrote a copy the server held (every entry
    recorded against it would count as changed). A ``set`` of a tag's key is a
    recreation's, and is sent only where the copy was found missing after a failed
    ``add``. Allowed: during a pool's failover (consistency.md, "A pool of several
    memcached servers during a failover": a stand-in holds its own copies), and within
    ``RECREATION`` of the copy's loss (guarantee 3: a lost copy counts as changed)."""
    cache = sim.processes[0].cache
    tags = {cache.tags.key(f"{kind}{key}") for kind in "tp" for key in range(sim.config.keys)}
    held: set[str] = set()
    lost_at: dict[str, float] = {}
    found = []
    for at, method, args, result, raised in sim.history.applied:
        if method == "flush":
            held.clear()
            lost_at = dict.fromkeys(tags, at)
        if raised or not args or not isinstance(args[0], str) or args[0] not in tags:
            continue
        key = args[0]
        recreating = at - lost_at.get(key, -math.inf) <= RECREATION
        if (
            method == "set"
            and key in held
            and not recreating
            and not failover_during(sim, at - RECREATION, at)
        ):
            found.append(
                Violation(
                    "liveness (a tag moves only when written)",
                    f"tag {key} was set over the copy the server held, at {at:.4f}",
                )
            )
        if method in ("set", "incr") or (method == "add" and result):
            held.add(key)
        elif method == "delete" and result:
            held.discard(key)
            lost_at[key] = at
    return found


RECREATION = 1.0
"""Seconds a recreation of a lost copy may take, from its failed ``add`` to its ``set``:
a copy lost meanwhile and made again by another reader is overwritten by the first, as
losing a copy counts every entry recorded against it as changed anyway."""


def row_entries_stored_fresh(sim: Simulation) -> Iterator[tuple[float, int, list[Any]]]:
    """Every store of a row's entry that was fresh when stored, as ``(when, row, entry)``
    (``entry``: ``["mc1", value, fresh_until_ms, build_ms, {tag: version}]``); an entry
    no fresher than the clocks' spread counts as stored already stale."""
    skew = widest_skew(sim)
    keys = {entry_key(sim.processes[0].cache, key): key for key in range(sim.config.keys)}
    for at, method, args, result, raised in sim.history.applied:
        if raised or not result or method not in ("add", "set", "cas") or args[0] not in keys:
            continue
        if not args[1]:
            continue  # a placeholder withdrawn (a cas of nothing, deleting it)
        entry = sim.codec.loads(args[1], args[0])
        if not isinstance(entry, list) or entry[0] != "mc1":
            continue  # a placeholder, or a lock's token
        if entry[2] and entry[2] <= (at + EPOCH + skew) * 1000:
            continue
        yield at, keys[args[0]], entry


def entries_record_versions_read_after_waits(sim: Simulation) -> list[Violation]:
    """Liveness: an entry records its tags' versions as read after its caller's last wait.
    A build whose caller waited (for a lock, another's build) since it read them, and
    whose row was bumped meanwhile, would store an entry stale on arrival: rebuilt by the
    next reader, its build routed to the database's replica by a bump it did not see.
    Allowed: a call whose store failed it (its versions read again could not be), a
    failover (a stand-in's tag copies), a Redis replica behind the bump."""
    history = sim.history
    found = []
    for at, key, entry in row_entries_stored_fresh(sim):
        build = history.builds[entry[1][2]]
        if not build.waited_unread or not 0 <= build.call < len(history.calls):
            continue
        call = history.calls[build.call]
        # a Redis replica serving the reads learns of a bump its lag later
        seen_by = build.began - sim.config.redis_replica_lag
        if call.store_failed or not bumped_past(sim, key, entry[4], seen_by):
            continue
        if failover_during(sim, call.invoked, at):
            continue
        found.append(
            Violation(
                "liveness (an entry records the versions read after its wait)",
                f"build {build.number} (process {build.process}, call {call.number}) of row"
                f" {key} began at {build.began:.4f} after a wait, and stored at {at:.4f} an"
                " entry recording its tag at a version a bump had moved past before it began",
            )
        )
    return found
