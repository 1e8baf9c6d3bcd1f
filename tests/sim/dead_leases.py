"""Rule 4 on memcached's own lease: a dead holder's lease on a stale entry is taken over.

memcached keeps a stale item's lease until the item goes. Its holder holds the item to
twice its lock's life and touches it again at each renewal, so a reader that finds less
than a lock's life left knows the renewals stopped and takes the rebuild over
(``docs/explanation/memcached-protocols.md``, "What differs when a holder dies"). A reader
told that another builds (``Z``) later than that, with nothing else under way, served the
stale value for a holder nobody replaced.

The aimed fault (``kill_holders``) kills the first holder of a lock halfway through its
build, then has other processes read the key for a while: the moments where a dead
holder's lock has to free, or be taken over, within its stated bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.sim.allowances import MAX_LATENCY, entries
from tests.sim.history import Violation
from tests.sim.keys import lock_key
from tests.sim.nodes import STALE_LEASE

if TYPE_CHECKING:
    from tests.sim.host import SimProcess
    from tests.sim.simulation import Simulation

BUSY_SECONDS = 0.25
"""A process's readers serve a key stale this long, without asking, once one was told that
another rebuilds it (a stated exception of ``consistency.md``)."""

READS_AFTER = (0.5, 1.5, 3.0, 5.0, 8.0, 12.0)
"""When, after an aimed kill, other processes read the killed holder's key."""


def aim_kill(sim: Simulation, builder: SimProcess, key: int, entry: str, seconds: float) -> None:
    """``kill_holders``: kill the first holder of a lock halfway through its build (on
    memcached's lease, one of a stale entry's), back a second later, and read its key
    from the others meanwhile."""
    config = sim.config
    if not config.kill_holders or sim.holders_killed or sim.healed:
        return
    if config.store == "meta" and last_lease_value(sim, key, entry) != STALE_LEASE:
        return
    others = sim.others_alive(builder)
    if not others:
        return
    sim.holders_killed += 1

    def kill() -> None:
        if builder.alive:
            sim.history.event("kill", f"{builder.number} for 1.0 (a holder mid-build)")
            builder.kill()
            sim.world.after(1.0, builder.start)

    sim.world.after(seconds / 2, kill)
    part = 0.01 if entry == "page" else None
    for number, after in enumerate(READS_AFTER):
        reader = sim.world.rng.choice(others)
        thread = reader.thread(f"p{reader.number}afterkill{number}")
        sim.workload.read(thread, key, 0.05, seconds / 2 + after, part_seconds=part)


def last_lease_value(sim: Simulation, key: int, entry: str) -> bytes | None:
    """What the last lease won on ``entry`` ``key`` was recorded as (None: none yet)."""
    lock = lock_key(sim.processes[0].cache, key, entry)
    for _, method, args, result, raised in reversed(sim.history.applied):
        if method == "add" and result and not raised and args[0] == lock:
            return args[1]  # type: ignore[no-any-return]
    return None


def takeovers_due(sim: Simulation, lock: str) -> list[tuple[float, float, float]]:
    """Each time a stale item's lease on ``lock`` was won or touched: (when, when the next
    touch or the lease's end came, when a reader would take it over had nobody touched it
    again: once less than a lock's life is left on the server's whole seconds).

    Not between the win and the holder's first touch (one round trip): a holder killed
    there leaves the entry leased for the rest of its own life, a stated exception of
    rule 4, and a lease won with less than a lock's life left is served stale by its winner
    while its refresher rebuilds it, touched a round trip later."""
    lock_life = sim.config.lock_timeout + 1  # the lease's TTL: lock_timeout, and the slack
    found: list[tuple[float, float, float]] = []
    open_since: tuple[float, float] | None = None

    def close(at: float) -> None:
        nonlocal open_since
        if open_since is not None:
            found.append((open_since[0], at, open_since[1]))
        open_since = None

    for at, method, args, result, raised in sim.history.applied:
        if raised or (method != "flush" and (not args or args[0] != lock)):
            continue
        if method == "add" and result:
            close(at)
            if args[1] == STALE_LEASE:  # not before the holder's first touch: see the note
                open_since = (at, float("inf"))
        elif method == "cas" and result and open_since is not None:
            close(at)
            if int(args[3]) >= 0:
                open_since = (at, at + int(args[3]) - lock_life + 1)
        elif method in ("delete", "flush"):
            close(at)
    close(float("inf"))
    return found


def dead_leases_taken_over(sim: Simulation) -> list[Violation]:
    """Rule 4: "a dead holder's lock frees within ``lock_timeout``", on memcached's lease
    (see the module): no reader is served a stale value because another holds its lease
    past the moment a reader takes a lease nobody renews over.

    Not a read that built its key itself: it was served what its own build made (stale
    when its build failed, or when the build's nested read was served stale), not left
    behind by a holder that died."""

    if sim.config.store != "meta":
        return []
    history = sim.history
    cache = sim.processes[0].cache
    due = {
        (entry, key): takeovers_due(sim, lock_key(cache, key, entry)) for entry, key in entries(sim)
    }
    found = []
    for read in history.calls:
        if read.kind != "read" or read.outcome != "ok" or not read.stale or read.shared_flight:
            continue
        if read.store_failed or any(b.call == read.number for b in history.builds):
            continue  # a read that built was left waiting on nobody's lease: see the note
        at = read.ended
        stalled = history.paused_during(read)
        slack = 2 * MAX_LATENCY + BUSY_SECONDS + stalled
        for since, until, takeover in due[read.entry, read.key]:
            if since <= at <= until and at - slack > takeover:
                found.append(
                    Violation(
                        "rule 4 (a dead holder's lock frees within lock_timeout)",
                        f"call {read.number} (process {read.process}) was served {read.entry}"
                        f" {read.key} stale at {at:.4f}: its lease, last touched at"
                        f" {since:.4f}, was due to be taken over at {takeover:.4f}",
                    )
                )
                break
    return found
