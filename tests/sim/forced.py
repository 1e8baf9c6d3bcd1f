"""Forced refreshes that wait out a rebuild under way (``Cache.refresh``; liveness).

A forced refresh reads its tags' versions, then asks for the key's lock; held by another
build, it waits up to ``wait`` for it, and builds with it or, the wait over, without. The
versions its entry records must be read after that wait: those read before it may have
been bumped meanwhile, and its entry would be stale on arrival. The aimed fault: a row's
build under lock that will outlast ``wait``; another process refreshes the row 50 ms
after the lock is won, and a third writes it 50 ms later, while the refresh waits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.processes import SimThread
    from tests.sim.simulation import Simulation

REFRESH_AFTER = 0.05
"""Seconds after the lock is won that the aimed refresh comes, and then the write."""


def refresh_behind_a_long_build(sim: Simulation, thread: SimThread, lock_key: str) -> None:
    """``thread`` just won a row's lock for a build longer than ``wait``: another process
    forces a refresh of the row, and another writes it, while it builds (the first two
    per run, in seeds with forced refreshes)."""
    config, plan = sim.config, thread.building
    if not config.refreshes or plan is None or plan.call.forced or plan.entry != "row":
        return
    if plan.build_seconds <= config.wait + 2 * REFRESH_AFTER or sim.healed:
        return
    others = sim.others_alive(thread.process)
    if sim.refreshes_aimed >= 2 or not others:
        return
    sim.refreshes_aimed += 1
    sim.history.event("refresh_behind_a_long_build", lock_key)
    key, rng, n = sim.lock_rows[lock_key], sim.world.rng, sim.refreshes_aimed
    refresher, writer = rng.choice(others), rng.choice(others)
    sim.workload.read(
        refresher.thread(f"p{refresher.number}refresh{n}"), key, 0.01, REFRESH_AFTER, forced=True
    )
    sim.workload.write(writer.thread(f"p{writer.number}refreshwrite{n}"), key, 2 * REFRESH_AFTER)
