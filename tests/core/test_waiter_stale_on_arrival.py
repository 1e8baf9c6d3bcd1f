"""A lock waiter whose awaited entry arrives stale rebuilds it, or is served it stale
while another process does: never stale with nobody rebuilding (guarantee 2 of
docs/explanation/consistency.md).

Found by the simulation (tests/sim, on the meta protocol): a holder's build
read its tag, the tag was bumped, and the entry it stored was stale on arrival. The
waiter in another process found it stale, tried for the lock, and, the lock being the
server's lease on the entry, found none in play (the holder's write had ended it, and
the server cannot see a bumped tag), so it served the stale value while nobody rebuilt
it. Now, where the server leases rebuilds, the waiter reads the key again bidding, marks
the entry stale and rebuilds it. Two caches on one real server stand for two processes.
"""

from __future__ import annotations

import threading

import pytest

from mcache import Cache
from mcache.engine.build import STALE_SERVED
from tests.held_builds import hold_build

OPTIONS = {"ttl": 60, "stale_ttl": 60, "wait": 10}


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_waiter_rebuilds_an_entry_that_arrived_stale(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    holder, waiter = Cache(url, namespace="arrived-stale"), Cache(url, namespace="arrived-stale")
    holder.clear()
    held = hold_build(holder, "k", "built before the bump", ["t"], OPTIONS)
    answers: dict[str, object] = {}

    def wait_for_it() -> None:
        answers["value"] = waiter.get_or_build(
            "k", lambda: "rebuilt by the waiter", tags=["t"], **OPTIONS
        )
        answers["stale"] = STALE_SERVED.get()

    waiting = threading.Thread(target=wait_for_it)
    waiting.start()
    while waiter.stats()["cache"]["lock_waits"] < 1:  # it found the holder's lock
        threading.Event().wait(0.01)
    holder.invalidate("t")  # after the holder read the tag: its entry is stale on arrival
    held.let_go()
    waiting.join(10)
    assert answers == {"value": "rebuilt by the waiter", "stale": False}, (
        "the waiter was served the entry that arrived stale, with nobody rebuilding it"
    )
