"""What the checkers excuse where a read went elsewhere than the data it stands for: a
pool's stand-in during a failover, the database's replica, a Redis replica serving the
hits. Each allowance names the sentence of ``consistency.md`` or ``read-replicas.md``
that grants it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.history import Build, Call
    from tests.sim.simulation import Simulation


def failover_windows(sim: Simulation) -> list[tuple[float, float]]:
    """When some process had a server of a pool of several marked dead: from its pool's
    marking to its taking the server back (or the process's death, which takes the pool
    with it), and the life of a lock or lease taken meanwhile after that (twice a lock's
    timeout, a stale item's hold on the meta protocol, and memcached's whole second)."""
    if len(sim.server.memcacheds) < 2:
        return []
    after = 2 * sim.config.lock_timeout + 1
    opened: dict[tuple[str, str], float] = {}
    windows = []
    for event in sim.history.events:
        if event.kind in ("node_dead", "node_up"):
            process, server = event.detail.split()
            if event.kind == "node_dead":
                opened.setdefault((process, server), event.at)
            elif (process, server) in opened:
                windows.append((opened.pop((process, server)), event.at + after))
        elif event.kind == "kill" and event.detail.startswith("process "):
            dead = event.detail.split()[1]
            for process, server in [k for k in opened if k[0] == dead]:
                windows.append((opened.pop((process, server)), event.at + after))
    return windows + [(at, math.inf) for at in opened.values()]


def failover_during(sim: Simulation, start: float, end: float) -> bool:
    """Whether a failover was under way at any time from ``start`` to ``end``: some
    process's pool had a server of several marked dead, and sent that server's keys, its
    writes and its tag bumps to the next server up while others still read and locked
    there (consistency.md: "A pool of several memcached servers during a failover")."""
    return any(opened <= end and closed >= start for opened, closed in failover_windows(sim))


def replica_unrouted(sim: Simulation, build: Build) -> bool:
    """Whether ``build`` read the database's replica where read-replicas.md does not
    promise the primary: its call found the cache down (no tag version to date a change:
    "the cache being down"), a host's clock was stepped beyond the lag's room for skew
    ("lag setting >= real lag + skew"), or its row's last write before it deleted the
    entry rather than bumping a tag ("a delete dates no change")."""
    if not build.replica:
        return False
    history = sim.history
    if 0 <= build.call < len(history.calls) and history.calls[build.call].store_failed:
        return True
    if any(e.kind == "clock_jump" and e.at <= build.began for e in history.events):
        return True
    writes = [
        c
        for c in history.calls
        if c.kind == "write" and c.key == build.key and c.invoked <= build.began
    ]
    return bool(writes) and writes[-1].by_delete


def redis_replica_behind(sim: Simulation, write: Call, read: Call) -> bool:
    """Whether ``read`` began before a Redis replica that serves the hits could have had
    ``write`` (its bump or delete, applied on the primary by the time it returned, reaches
    the replica a replication lag later): consistency.md, "``replica_reads=true``: ... its
    readers may be served the entry from before it as fresh"."""
    lag = sim.config.redis_replica_lag
    return bool(lag) and write.ended is not None and read.invoked <= write.ended + lag
