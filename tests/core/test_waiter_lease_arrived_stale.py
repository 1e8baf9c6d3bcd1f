"""A lock waiter on memcached's meta protocol whose awaited entry arrived stale, and that
then won the entry's lease, held it as a miss's placeholder: it never held the stale
item a lock's life more (so a reader took it for a dead holder's), and a rebuild that
stored nothing deleted the stale entry as if it were the placeholder, rather than
giving it back its own life (found by the simulation, docs/explanation/simulation.md,
"What it found")."""

from __future__ import annotations

import threading
import time

from mcache import NO_VALUE, Cache
from mcache.errors import Uncacheable

OPTIONS = {"ttl": 60, "stale_ttl": 60, "lock_timeout": 2, "wait": 5.0}


def test_a_waiter_that_won_an_entry_arrived_stale_hands_its_lease_back(
    memcached_url: str,
) -> None:
    builder, waiter, reader = (Cache(memcached_url, namespace="arrived") for _ in range(3))

    def invalidated_while_built() -> str:
        time.sleep(0.3)
        builder.invalidate("t")  # the entry is stored already stale
        time.sleep(0.3)
        return "built before the invalidation"

    def stores_nothing() -> str:
        raise Uncacheable("the waiter's", "not to be stored")

    first = threading.Thread(
        target=lambda: builder.get_or_build("k", invalidated_while_built, tags=["t"], **OPTIONS)
    )
    first.start()
    time.sleep(0.1)  # the waiter finds the builder's placeholder, and waits for its entry
    assert waiter.get_or_build("k", stores_nothing, tags=["t"], **OPTIONS) == "the waiter's"
    first.join(5)
    kept = waiter.store.get(waiter._store_key("k"))
    assert kept is not NO_VALUE and b"built before the invalidation" in kept, (
        "the stale entry was deleted as if it were the waiter's placeholder"
    )

    builds: list[str] = []

    def rebuilt() -> str:
        builds.append("rebuilt")
        return "rebuilt"

    assert reader.get_or_build("k", rebuilt, tags=["t"], **OPTIONS) == "rebuilt", (
        "the next reader was told that another rebuilds, and served the stale entry"
    )
    assert builds == ["rebuilt"]
