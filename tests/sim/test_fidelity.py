"""The simulated memcached is held to the store contract every real store passes (the
traits contract included), on the simulation's own clock of whole seconds; the real Redis
store is held to it on the simulated Redis."""

from __future__ import annotations

import pytest

from mcache.testing import StoreContract
from tests.sim.redis import SimRedisServer
from tests.sim.redis_store import sim_redis_store
from tests.sim.simulation import Server
from tests.sim.world import EPOCH, World


class TestSimulatedMemcached(StoreContract):
    @pytest.fixture
    def store(self) -> object:
        self._world = World(seed=0)
        return Server(self._world).store

    @pytest.fixture
    def store_factory(self) -> None:
        return None

    def wait(self, seconds: float) -> None:
        self._world.run(until=self._world.now + seconds)


class TestSimulatedRedis(StoreContract):
    """The real Redis store on the simulated Redis (milliseconds, the store's scripts)."""

    @pytest.fixture
    def store(self) -> object:
        self._world = World(seed=0)
        server = SimRedisServer(lambda: self._world.now + EPOCH)
        return sim_redis_store(server)

    @pytest.fixture
    def store_factory(self) -> None:
        return None

    def wait(self, seconds: float) -> None:
        self._world.run(until=self._world.now + seconds)
