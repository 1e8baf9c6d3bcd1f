"""Every store passes the one contract suite, against real servers."""

from __future__ import annotations

import functools

import pytest

from mcache.clock import FakeClock
from mcache.stores import MemoryStore, from_url
from mcache.testing import StoreContract


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def store(self, clock: FakeClock) -> MemoryStore:
        self._clock = clock
        return MemoryStore(clock=clock)

    @pytest.fixture
    def store_factory(self) -> None:
        return None

    def wait(self, seconds: float) -> None:
        self._clock.advance(seconds)


class TestMemcachedStore(StoreContract):
    @pytest.fixture
    def store(self, memcached_url: str):
        store = from_url(memcached_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, memcached_url: str):
        return functools.partial(from_url, memcached_url)


class TestMemcachedCluster(StoreContract):
    """The same semantics hold when keys spread over three servers."""

    @pytest.fixture
    def store(self, memcached_cluster_url: str):
        store = from_url(memcached_cluster_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, memcached_cluster_url: str):
        return functools.partial(from_url, memcached_cluster_url)


class TestRedisStore(StoreContract):
    @pytest.fixture
    def store(self, redis_url: str):
        store = from_url(redis_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, redis_url: str):
        return functools.partial(from_url, redis_url)
