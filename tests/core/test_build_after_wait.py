"""A caller that builds after waiting for another's build records the tag versions it
reads after the wait, not those it read before (guarantee 1 holds either way; this is
about not storing an entry that is stale on arrival).

Found by the simulation (tests/sim, on the meta protocol): a follower in the same
process waited for its leader, whose build returned ``Uncacheable``; meanwhile a write
invalidated the key's tag. The follower then built its own value from the new row, but
stored it recording the tag's version from before the invalidation, so the entry was
stale the moment it was written: the next reader rebuilt it (and on the meta protocol,
where the server cannot see a bumped tag, readers were served it stale with nobody
rebuilding). Now it reads the versions again before it builds.
"""

from __future__ import annotations

import threading

import pytest

from mcache import Cache
from mcache.errors import Uncacheable
from mcache.sansio.steps import Pause, perform, run_steps

OPTIONS = {"ttl": 60, "stale_ttl": 0, "wait": 10}


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_follower_building_after_its_leader_records_the_versions_after_the_wait(
    request: pytest.FixtureRequest, server: str
) -> None:
    cache = Cache(request.getfixturevalue(server), namespace="build-after-wait")
    cache.clear()
    leading, finish_leader = threading.Event(), threading.Event()
    builds: list[str] = []

    def leader_build() -> str:
        leading.set()
        finish_leader.wait(10)
        raise Uncacheable("for the leader alone")

    def follower_build() -> str:
        builds.append("follower")
        return "row v1"

    results: dict[str, object] = {}
    leader = threading.Thread(
        target=lambda: results.update(
            leader=cache.get_or_build("k", leader_build, tags=["t"], **OPTIONS)
        )
    )
    leader.start()
    assert leading.wait(10), "the leader's build did not start"
    follower = threading.Thread(
        target=lambda: results.update(
            follower=cache.get_or_build("k", follower_build, tags=["t"], **OPTIONS)
        )
    )
    follower.start()
    while cache.stats()["cache"]["coalesced"] < 1:  # the follower has joined the leader's flight
        threading.Event().wait(0.01)
    cache.invalidate("t")  # the row changes while the follower waits
    finish_leader.set()
    leader.join(10)
    follower.join(10)
    assert results == {"leader": "for the leader alone", "follower": "row v1"}
    assert builds == ["follower"], "the follower built its own value after the leader's"

    def rebuilt() -> str:
        builds.append("next reader")
        return "row v1 again"

    assert cache.get_or_build("k", rebuilt, tags=["t"], **OPTIONS) == "row v1", (
        "the follower's entry was stored stale on arrival (recording the version from"
        " before the invalidation), so the next reader rebuilt it"
    )
    assert builds == ["follower"]


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_forced_refresh_that_waited_for_the_lock_records_the_versions_after_the_wait(
    request: pytest.FixtureRequest, server: str
) -> None:
    """Found by the simulation (tests/sim, a large seed CI drew, 149851079765): a forced
    refresh read its tags, waited out another process's rebuild, then built recording
    the versions from before its wait, so a bump meanwhile made its entry stale on
    arrival (and, with ``replication_lag``, its build read the replica, the bump unseen).
    The refresh's steps are driven here with its pauses skipped: the bump lands at its
    first pause, deterministically."""
    cache = Cache(request.getfixturevalue(server), namespace="refresh-after-wait")
    cache.clear()
    holding, release = threading.Event(), threading.Event()

    def holder_build() -> str:
        holding.set()
        assert release.wait(10), "the test never let the holder finish"
        raise Uncacheable("the holder stores nothing")

    holder = threading.Thread(
        target=lambda: cache.get_or_build("k", holder_build, tags=["t"], **OPTIONS)
    )
    holder.start()
    assert holding.wait(10), "the holder's build did not start"
    steps = cache.builder.rebuilds.force_steps(
        cache._store_key("k"), lambda: "row v1", ["t"], cache.call_options(ttl=60, wait=0.2)
    )
    bumped: list[bool] = []

    def perform_bumping_at_the_first_pause(operation: object) -> object:
        if not isinstance(operation, Pause):
            return perform(operation)
        if not bumped:
            cache.invalidate("t")  # the row changes while the refresh waits
            bumped.append(True)
        return None  # the pause skipped

    assert run_steps(steps, perform_bumping_at_the_first_pause) == "row v1"
    release.set()
    holder.join(10)
    assert bumped, "the refresh never waited for the holder's lock"
    assert cache.get_or_build("k", lambda: "rebuilt", tags=["t"], **OPTIONS) == "row v1", (
        "the refresh's entry was stored stale on arrival (recording the tag's version from"
        " before its wait), so the next reader rebuilt it"
    )
