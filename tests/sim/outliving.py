"""Builds that outlive their entry's ``ttl + stale_ttl`` (``outliving_builds``; rule 3).

A cold key's build puts a placeholder under the key for the entry's life, and keeps it
alive at its lock's renewals for as long as it builds: a delete or a newer write then
takes the placeholder away, and the build's ``cas`` fails. On memcached's whole seconds a
placeholder of ``t`` seconds may end after ``t - 1``; a keep-alive that comes a renewal
late finds it gone, a delete finds nothing to take away, and the build's write lands over
the delete. The aimed fault: another process deletes the row's entry just after the
placeholder's own life, while the build is still under way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.sim.keys import entry_key

if TYPE_CHECKING:
    from tests.sim.host import SimProcess
    from tests.sim.simulation import Simulation

AFTER_LIFE = 0.3
"""Seconds after the placeholder's own life that the aimed delete comes."""


def delete_over_outliving(
    sim: Simulation, builder: SimProcess, key: int, entry: str, seconds: float
) -> None:
    """A cold row's build that outlives its placeholder's TTL: another process deletes the
    row's entry ``AFTER_LIFE`` after that TTL, before the build ends (the first three)."""
    config = sim.config
    life = config.ttl + config.stale_ttl
    if not config.outliving_builds or entry != "row" or seconds <= life or sim.healed:
        return
    if sim.outliving_deletes >= 3:
        return
    if sim.server.holds_entry(entry_key(sim.processes[0].cache, key, entry)):
        return  # a stale entry's rebuild: no placeholder of its own
    others = sim.others_alive(builder)
    if not others:
        return
    sim.outliving_deletes += 1
    sim.history.event("delete_over_outliving", f"row {key}")
    writer = sim.world.rng.choice(others)
    thread = writer.thread(f"p{writer.number}outlived{sim.outliving_deletes}")
    sim.workload.write(thread, key, min(life + AFTER_LIFE, seconds - 0.05), by_delete=True)
