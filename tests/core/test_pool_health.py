"""A memcached pool while one of its servers is down.

It counts ``dead_timeout`` on the store's clock, not on the ``time`` module: a server
marked dead stays out of the pool until the clock says its time is up, then rejoins once
it answers, however little real time went by (what lets a simulation drive a pool's
failover and rejoin on its own clock). And a key whose own server is up is leased there
as every other process leases it (meta protocol): only the dead server's keys, served by
a stand-in meanwhile, are locked portably, and only until their server answers again. A
leasing read cut off on a server that stays up is a store failure, not a server down.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcache.contract.store import LeaseBid
from mcache.errors import StoreUnavailable
from mcache.stores.memcached.store import MemcachedStore
from tests.clocks import StandingClock
from tests.memcached_proxy import MemcachedProxy, upstream_of
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
    owned = owned_by(store, lost.port)
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


def owned_by(store: MemcachedStore, port: int) -> str:
    return next(f"k{n}" for n in range(1000) if store.ring.server_for(f"k{n}").port == port)


def test_a_key_whose_server_is_up_is_leased_while_another_server_is_down(
    two_servers: tuple[ServerProcess, ServerProcess],
) -> None:
    kept, lost = two_servers
    store = MemcachedStore([kept.address, lost.address], retry_attempts=1, protocol="meta")
    elsewhere, here = owned_by(store, lost.port), owned_by(store, kept.port)
    lost.kill()
    store.set(elsewhere, b"v")  # marks the lost server dead
    assert store.dead_servers()
    bid = LeaseBid(lease_ttl=30, early_ttl=0)
    store.get_many_leasing([here], bid)
    assert not bid.unleased and bid.outcome is True, "leased on its own server, as elsewhere"
    stand_in = LeaseBid(lease_ttl=30, early_ttl=0)
    store.get_many_leasing([elsewhere], stand_in)
    assert stand_in.unleased, "the dead server's key, on a stand-in: locked portably"


def test_a_dead_servers_key_is_leased_again_once_the_server_answers(
    two_servers: tuple[ServerProcess, ServerProcess],
) -> None:
    """Found by the simulation (tests/sim, on the meta protocol): a process that
    had found the key's server down took the key's portable lock on that very server
    once it had come back, while other processes held its lease: two builds at once."""
    kept, lost = two_servers
    clock = StandingClock()
    store = MemcachedStore(
        [kept.address, lost.address],
        retry_attempts=1,
        dead_timeout=30,
        clock=clock,
        protocol="meta",
    )
    elsewhere, here = owned_by(store, lost.port), owned_by(store, kept.port)
    lost.kill()
    store.set(elsewhere, b"v")  # marks the lost server dead
    assert store.leases_key(here), "a key whose server is up is leased"
    assert not store.leases_key(elsewhere), "the dead server's key: locked portably"
    lost.restart()
    assert not store.leases_key(elsewhere), "its 30 seconds are not up"
    clock.now += 31
    assert store.leases_key(elsewhere), "it answers again: its lease decides who builds"


def test_a_leasing_read_cut_off_on_a_server_still_up_is_a_store_failure(
    memcached_url: str,
) -> None:
    """Found by the simulation (tests/sim, on the meta protocol): one lost ``mg``
    made the read lease nothing, so its caller took the key's portable lock on a server
    that was up and leasing the key to other processes: two builds at once."""
    with MemcachedProxy(upstream_of(memcached_url)) as proxy:
        store = MemcachedStore([proxy.address], retry_attempts=3, protocol="meta")
        store.set("warm", b"v")
        proxy.cut_next = b"mg "
        bid = LeaseBid(lease_ttl=30, early_ttl=0)
        with pytest.raises(StoreUnavailable):
            store.get_many_leasing(["cut"], bid)
        assert not bid.unleased, "not a server down: nothing to lock portably"
        assert store.dead_servers() == [], "one failure of three allowed"
        again = LeaseBid(lease_ttl=30, early_ttl=0)
        store.get_many_leasing(["next"], again)
        assert again.outcome is True and not again.unleased, "the next read leases as before"
