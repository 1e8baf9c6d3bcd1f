"""A release that its own lock's renewal overtakes still frees the lock (rule 4 of
docs/explanation/consistency.md: a lock lives as long as its build).

Found by the simulation (tests/sim): a renewal's ``cas`` landing between the release's
``gets`` and its ``cas`` gave the lock a new cas unique, the release's ``cas`` failed, and
the lock stayed until its timeout while every other caller waited. Here the two are
interleaved by hand against a real memcached: the release's steps are driven one
operation at a time, with the renewal done between its read and its write.
"""

from __future__ import annotations

import pytest

from mcache import NO_VALUE, Cache
from mcache.contract.store import LeaseBid
from mcache.engine.server_lease import ServerLease
from mcache.engine.write_lease import Lease
from mcache.sansio.steps import StoreCall, perform


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_release_overtaken_by_its_own_renewal_frees_the_lock(
    request: pytest.FixtureRequest, server: str
) -> None:
    cache = Cache(request.getfixturevalue(server), namespace="overtaken")
    lock = cache.lock("build", timeout=30)
    assert lock.try_acquire()
    release = lock.release_steps()
    read = next(release)
    assert isinstance(read, StoreCall) and read.method == "gets"
    found = perform(read)
    assert lock.extend(), "the renewal lands between the release's read and its write"
    operation = release.send(found)
    try:
        while True:
            operation = release.send(perform(operation))
    except StopIteration as done:
        assert done.value is True, "the release gave up"
    assert cache.store.get(lock.key) is NO_VALUE, "the lock was left to its timeout"


def test_a_lease_handed_back_keeps_its_own_life_when_its_renewal_lands_after(
    memcached_url: str,
) -> None:
    """The meta protocol's lease on a stale entry, after a rebuild that stored nothing: the
    release gives the entry back the life it had of its own and hands its rebuild to the next
    reader. A renewal of the same lease landing after the release must not give the entry a
    lock's life again (guarantee 2: a stale value is bounded by ``ttl + stale_ttl``).

    Found by the simulation (seed 50066080302): the release touched the entry to its own
    life, then let the lease go in a second request; a renewal landing between the two
    touched it to a lock's life again, and the stale value outlived its window.
    """
    cache = Cache(memcached_url, namespace="handed-back")
    store, key = cache.store, "handed-back:entry"
    store.set(key, b"stale value", 30)
    bid = LeaseBid(lease_ttl=10, early_ttl=60)  # 60 s or less left: leased for rebuilding
    store.get_many_leasing([key], bid)
    assert bid.outcome is True and bid.token is not None, "the read won the stale entry's lease"
    now = cache.clock.monotonic()
    lease = Lease(NO_VALUE, bid.token, False, b"", now + 60, native=True, own_expires=now + 3)
    held = ServerLease(store, key, 10, lease, cache.clock)
    assert held.extend(), "the build's renewal gives the entry a lock's life"

    release = held.release_steps()
    operation = next(release)
    try:
        while True:
            result = perform(operation)
            held.extend()  # the renewal under way lands after each request of the release
            operation = release.send(result)
    except StopIteration as done:
        assert done.value is True, "the lease was not handed back"

    successor = LeaseBid(lease_ttl=10, early_ttl=60)
    found = store.get_many_leasing([key], successor)
    assert found == {key: b"stale value"}
    assert successor.outcome is True, "the next reader was not handed the rebuild"
    left = successor.left
    assert left is not None and 0 < left <= 3, f"the stale entry lives {left} s more, not 3"
