"""A memcached pool counts ``dead_timeout`` on the store's clock, not on the ``time``
module: a server marked dead stays out of the pool until the clock says its time is up,
then rejoins once it answers, however little real time went by (what lets a simulation
drive a pool's failover and rejoin on its own clock)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcache.stores.memcached.store import MemcachedStore
from tests.clocks import StandingClock
from tests.servers import ServerProcess, memcached_process


@pytest.fixture
def two_servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    first, second = memcached_process().start(), memcached_process().start()
    yield first, second
    first.kill()
    second.kill()


def test_a_dead_server_rejoins_when_the_stores_clock_says_so(
    two_servers: tuple[ServerProcess, ServerProcess],
) -> None:
    kept, lost = two_servers
    clock = StandingClock()
    store = MemcachedStore(
        [kept.address, lost.address], retry_attempts=1, dead_timeout=30, clock=clock
    )
    owned = next(f"k{n}" for n in range(1000) if store.ring.server_for(f"k{n}").port == lost.port)
    lost.kill()
    store.set(owned, b"v")  # fails over to the other server, marking this one dead
    assert store.dead_servers() == [f"127.0.0.1:{lost.port}"]
    lost.restart()
    store.set(owned, b"v")
    assert store.dead_servers(), "the clock stood still: its 30 seconds are not up"
    clock.now += 31
    store.set(owned, b"v2")
    assert store.dead_servers() == [], "the clock's 30 seconds are up and the server answers"
    assert store.get(owned) == b"v2", "written on the rejoined server"
