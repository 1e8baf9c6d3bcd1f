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
