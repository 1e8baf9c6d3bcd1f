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
import time
from typing import Any

import pytest

from mcache import Cache
from mcache.engine.build import STALE_SERVED
from tests.held_builds import hold_build

OPTIONS = {"ttl": 60, "stale_ttl": 60, "wait": 10}


def answer_to_a_waiter(holder: Cache, waiter: Cache) -> dict[str, object]:
    """What ``waiter`` is answered, having waited on ``holder``'s build of ``k``, whose entry
    arrives stale: its tag is bumped after the holder read it."""
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
    return answers


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_waiter_rebuilds_an_entry_that_arrived_stale(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    holder, waiter = Cache(url, namespace="arrived-stale"), Cache(url, namespace="arrived-stale")
    holder.clear()
    assert answer_to_a_waiter(holder, waiter) == {
        "value": "rebuilt by the waiter",
        "stale": False,
    }, "the waiter was served the entry that arrived stale, with nobody rebuilding it"


@pytest.mark.parametrize("server", ["memcached_text_url", "redis_url"])
def test_a_waiter_is_not_served_stale_by_a_holder_freeing_its_lock(
    request: pytest.FixtureRequest, server: str
) -> None:
    """Seen in CI under load: with a portable lock the holder writes its entry, then frees
    its lock. A waiter that found the entry stale on arrival in between, the lock still
    held, was served it stale as if the holder were rebuilding it; nobody was. Here the
    holder's release is held back 0.15 s (within the quarter second a waiter gives a
    holder to free its lock), so the waiter, polling every 50 ms at most, looks in
    between."""
    url = request.getfixturevalue(server)
    holder, waiter = Cache(url, namespace="freeing"), Cache(url, namespace="freeing")
    holder.clear()
    lock_key = holder.parts.derived_key("l", holder.key("k"))
    cas = holder.store.cas

    def slow_release(key: str, value: bytes, token: Any, ttl: int) -> bool:
        if key == lock_key and ttl == -1:
            time.sleep(0.15)
        return cas(key, value, token, ttl)

    holder.store.cas = slow_release  # type: ignore[method-assign]
    assert answer_to_a_waiter(holder, waiter) == {
        "value": "rebuilt by the waiter",
        "stale": False,
    }, "the waiter was served the entry stale while its holder freed its lock: nobody rebuilt it"
