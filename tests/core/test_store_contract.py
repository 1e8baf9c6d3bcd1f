"""Every store passes the one contract suite, against real servers."""

from __future__ import annotations

import functools
from urllib.parse import urlencode

import pytest

from mcache.clock import FakeClock
from mcache.stores import MemoryStore, from_url
from mcache.testing import StoreContract
from mcache.testing.async_driver import AsyncStoreContract, BlockingDriver, driven


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


class TestSentinelStore(StoreContract):
    """Redis behind Sentinel: the primary the sentinels name, found through them."""

    @pytest.fixture
    def store(self, sentinel_url: str):
        store = from_url(sentinel_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, sentinel_url: str):
        return functools.partial(from_url, sentinel_url)


class TestClusterStore(StoreContract):
    """Redis Cluster: keys spread by slot over three primaries, each with a replica."""

    @pytest.fixture
    def store(self, cluster_url: str):
        store = from_url(cluster_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, cluster_url: str):
        return functools.partial(from_url, cluster_url)


class TestReplicatedMemcached(StoreContract):
    """Writing every key to two of three servers keeps memcached's semantics."""

    @pytest.fixture
    def store(self, memcached_cluster_url: str):
        store = from_url(memcached_cluster_url + "?replicas=2")
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, memcached_cluster_url: str):
        return functools.partial(from_url, memcached_cluster_url + "?replicas=2")


class TestTieredStore(StoreContract):
    """A memory near cache over memcached behaves like memcached."""

    @pytest.fixture
    def url(self, memcached_url: str) -> str:
        return "tiered://?" + urlencode({"hot": "memory://?max_bytes=8m", "cold": memcached_url})

    @pytest.fixture
    def store(self, url: str):
        store = from_url(url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, url: str):
        return functools.partial(from_url, url)


class TestPostgresStore(StoreContract):
    """A table of PostgreSQL behaves like memcached, races included."""

    @pytest.fixture
    def store(self, postgres_url: str):
        store = from_url(postgres_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, postgres_url: str):
        return functools.partial(from_url, postgres_url)


class TestSqliteStore(StoreContract):
    """A table of an SQLite file behaves like memcached, across processes too."""

    @pytest.fixture
    def store(self, sqlite_url: str):
        store = from_url(sqlite_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, sqlite_url: str):
        return functools.partial(from_url, sqlite_url)


class TestAsyncMemoryStore(AsyncStoreContract):
    """The in-process store's async twin: the same items, awaited."""

    @pytest.fixture
    def store(self, clock: FakeClock):
        self._clock = clock
        driver = BlockingDriver(MemoryStore(clock=clock).asynchronous())
        yield driver
        driver.close()

    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def store_factory(self) -> None:
        return None

    def wait(self, seconds: float) -> None:
        self._clock.advance(seconds)


class DrivenContract(AsyncStoreContract):
    """The async twin of the store ``url`` names, driven; each class names its ``url``."""

    @pytest.fixture
    def url(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    def store(self, url: str):
        driver = driven(url)
        yield driver
        driver.close()

    @pytest.fixture
    def store_factory(self, url: str):
        return functools.partial(driven, url)


class TestAsyncRedisStore(DrivenContract):
    """Redis through redis-py's asyncio client: the sync store's steps, awaited."""

    @pytest.fixture
    def url(self, redis_url: str) -> str:
        return redis_url


class TestAsyncMemcachedStore(DrivenContract):
    """memcached on asyncio connections: the blocking store's steps, awaited."""

    @pytest.fixture
    def url(self, memcached_url: str) -> str:
        return memcached_url


class TestAsyncReplicatedMemcached(DrivenContract):
    """Three servers, every key on two of them: the same ring and replicas, awaited."""

    @pytest.fixture
    def url(self, memcached_cluster_url: str) -> str:
        return memcached_cluster_url + "?replicas=2"


class TestAsyncSentinelStore(DrivenContract):
    """Redis behind Sentinel through redis.asyncio's Sentinel client, awaited."""

    @pytest.fixture
    def url(self, sentinel_url: str) -> str:
        return sentinel_url


class TestAsyncClusterStore(DrivenContract):
    """Redis Cluster through redis.asyncio's cluster client: slots and pipelines, awaited."""

    @pytest.fixture
    def url(self, cluster_url: str) -> str:
        return cluster_url


class TestAsyncPostgresStore(DrivenContract):
    """A PostgreSQL table on psycopg's async connections: the sync store's steps, awaited."""

    @pytest.fixture
    def url(self, postgres_url: str) -> str:
        return postgres_url


class TestAsyncTieredStore(DrivenContract):
    """A memory near cache over memcached, each tier awaited on its own twin."""

    @pytest.fixture
    def url(self, memcached_url: str) -> str:
        return "tiered://?" + urlencode({"hot": "memory://?max_bytes=8m", "cold": memcached_url})


class TestAsyncTieredOverDurable(DrivenContract):
    """Memory over SQLite: the hot tier awaited, the durable one (no twin) in a thread."""

    @pytest.fixture
    def url(self, sqlite_url: str) -> str:
        return "tiered://?" + urlencode({"hot": "memory://", "cold": sqlite_url})


class OlderContractStore:
    """A store of one's own written before ``prepend`` and ``replace`` joined the contract:
    every other operation, from a memory store."""

    def __init__(self) -> None:
        self._inner = MemoryStore()

    def __getattr__(self, name: str) -> object:
        if name in {"prepend", "replace"}:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_a_store_lacking_operations_is_refused_naming_them() -> None:
    from mcache import Cache
    from mcache.errors import ConfigError

    with pytest.raises(ConfigError, match=r"got OlderContractStore \(it lacks prepend, replace\)"):
        Cache(OlderContractStore())
