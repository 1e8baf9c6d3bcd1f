"""The simulated memcached is held to the store contract every real store passes (the
traits contract included), on the simulation's own clock of whole seconds."""

from __future__ import annotations

import pytest

from mcache.testing import StoreContract
from tests.sim.simulation import Server
from tests.sim.world import World


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
