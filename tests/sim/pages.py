"""Faults aimed at pages built over a stale row (``race_pages``; rule 2 of consistency.md).

A page whose build could only read its row stale is stored already stale: its own caller
is told, and no other caller may take it as fresh, those waiting on the page's lock while
it was built included. The moments: a row's stale entry being rebuilt, so that a page
read then can only have the row stale; and such a page, cold, being built while other
processes read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.sim.keys import entry_key

if TYPE_CHECKING:
    from tests.sim.host import SimProcess
    from tests.sim.simulation import Simulation

PAGE_READERS = (0.01, 0.03, 0.06)
"""When, after a cold page's build read its row stale, other processes read the page."""


PAGE_PART = 0.1
"""The seconds the aimed page's own part takes, after its read of the row: the readers of
:func:`page_over_stale` arrive while it is built."""


def page_over_rebuild(sim: Simulation, builder: SimProcess, key: int, entry: str) -> None:
    """A row's stale entry has begun to be rebuilt: its page is evicted (if there), and
    another process reads it 5 ms later; the page's build reads the row while the rebuild
    holds its lock, and so is served it stale, then takes ``PAGE_PART`` (the first three
    times)."""
    config = sim.config
    if not config.race_pages or sim.rebuilds_paged >= 3 or sim.healed or entry != "row":
        return
    if not sim.server.holds_entry(entry_key(sim.processes[0].cache, key, "row")):
        return  # a miss: nothing to serve stale
    others = sim.others_alive(builder)
    if not others:
        return
    sim.rebuilds_paged += 1
    sim.history.event("race_rebuild_page", f"row {key}")
    if sim.server.holds_entry(entry_key(sim.processes[0].cache, key, "page")):
        sim.history.event("evict_entry", f"page {key} (cold, to be built over the row)")
        sim.evict("evict_entry", key, "page")
    reader = sim.world.rng.choice(others)
    thread = reader.thread(f"p{reader.number}overrebuild{sim.rebuilds_paged}")
    sim.workload.read(thread, key, 0.05, 0.005, part_seconds=PAGE_PART)


def page_over_stale(sim: Simulation, builder: SimProcess, key: int) -> None:
    """A cold page's build read its row stale: other processes read the page 10, 30 and
    60 ms later, while it is built, and so wait for the page it stores, already stale (the
    first three times)."""
    if not sim.config.race_pages or sim.raced_pages >= 3 or sim.healed:
        return
    if sim.server.holds_entry(entry_key(sim.processes[0].cache, key, "page")):
        return  # a stale page's rebuild: readers are served the stale page, not waiting
    others = sim.others_alive(builder)
    if not others:
        return
    sim.raced_pages += 1
    sim.history.event("race_page", f"page {key}")
    for n, delay in enumerate(PAGE_READERS):
        reader = sim.world.rng.choice(others)
        thread = reader.thread(f"p{reader.number}page{sim.raced_pages}.{n}")
        sim.workload.read(thread, key, 0.05, delay, part_seconds=0.01)
