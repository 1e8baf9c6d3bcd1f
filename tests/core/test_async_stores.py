"""Async stores under the async read path: a hit awaits the store on the event loop.

The contract suite holds the async twins to the stores' semantics (see
test_store_contract.py); these tests hold ``aget_or_build`` to the point of
having them: on a store with an async twin, a hit (tagged or not) never hands
work to a thread, and the twin reads what the sync store wrote.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import quote

import pytest

from mcache import Cache
from mcache.stores import MemcachedStore, MemoryStore, RedisStore, from_url


@pytest.fixture(
    params=[
        "memory",
        "redis",
        "memcached",
        "memcached-pool",
        "redis-sentinel",
        "redis-cluster",
        "postgres",
        "tiered",
    ]
)
def cache(request: pytest.FixtureRequest) -> Cache:
    if request.param == "memory":
        return Cache("memory://", namespace="async-hit")
    if request.param == "tiered":
        cold = request.getfixturevalue("redis_url")
        return Cache(f"tiered://?hot=memory://&cold={quote(cold)}", namespace="async-hit")
    fixture = {
        "memcached-pool": "memcached_cluster_url",
        "redis-sentinel": "sentinel_url",
        "redis-cluster": "cluster_url",
    }.get(request.param, f"{request.param}_url")
    return Cache(request.getfixturevalue(fixture), namespace="async-hit")


def forbid_thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Make ``asyncio.to_thread`` and executors record and refuse every hop from here on."""
    hops: list[Any] = []

    def refuse(function: Any, *args: Any) -> Any:
        hops.append(function)
        raise AssertionError(f"thread hop: {function!r}")

    def refuse_executor(loop: Any, executor: Any, function: Any, *args: Any) -> Any:
        return refuse(function)

    monkeypatch.setattr(asyncio, "to_thread", refuse)
    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", refuse_executor)
    return hops


@pytest.mark.parametrize("tags", [None, ["articles", "article:1"]], ids=["untagged", "tagged"])
def test_an_async_hit_makes_no_thread_hop(
    cache: Cache, tags: list[str] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds = []

    async def build() -> str:
        builds.append(1)
        return "the page"

    async def visit() -> tuple[str, str]:
        first = await cache.aget_or_build("page", build, ttl=60, tags=tags)
        hops = forbid_thread_hops(monkeypatch)
        second = await cache.aget_or_build("page", build, ttl=60, tags=tags)
        assert hops == []
        await cache.store.asynchronous().close()
        return first, second

    assert asyncio.run(visit()) == ("the page", "the page")
    assert len(builds) == 1, "the second call was a hit"


def test_the_async_twin_reads_what_the_sync_store_wrote(
    redis_url: str, memcached_cluster_url: str
) -> None:
    for store in (MemoryStore(), RedisStore(redis_url), from_url(memcached_cluster_url)):
        store.set("written-sync", b"value", 60)

        async def read(twin: Any) -> Any:
            try:
                return await twin.get("written-sync")
            finally:
                await twin.close()

        assert asyncio.run(read(store.asynchronous())) == b"value"
        assert store.asynchronous() is store.asynchronous(), "one twin per store"


def test_a_loop_gets_its_own_bounded_client(redis_url: str) -> None:
    store = RedisStore(redis_url, max_connections=3)
    twin = store.asynchronous()

    async def burst() -> int:
        # Connections opened since: ids only grow, and others' closing does not count.
        newest = max(int(client["id"]) for client in store._redis.client_list())
        await asyncio.gather(*(twin.set(f"k{n}", b"v", 60) for n in range(50)))
        listed = store._redis.client_list()
        await twin.close()
        return sum(int(client["id"]) > newest for client in listed)

    assert 1 <= asyncio.run(burst()) <= 3, "50 concurrent commands share at most 3 connections"
    assert 1 <= asyncio.run(burst()) <= 3, "a second loop gets a client of its own"
    assert store.get("k49") == b"v"


def test_a_memcached_loop_opens_at_most_its_pool_size(memcached_url: str) -> None:
    store = MemcachedStore([memcached_url.removeprefix("memcached://")], max_pool_size=3)
    twin = store.asynchronous()

    async def burst() -> int:
        before = int(store.stats()[store.servers[0].name]["total_connections"])
        await asyncio.gather(*(twin.set(f"k{n}", b"v", 60) for n in range(50)))
        after = int(store.stats()[store.servers[0].name]["total_connections"])
        await twin.close()
        return after - before  # the blocking stats calls share one idle connection

    assert 1 <= asyncio.run(burst()) <= 3, "50 concurrent commands share at most 3 connections"
    assert 1 <= asyncio.run(burst()) <= 3, "a second loop gets pools of its own"
    assert store.get("k49") == b"v"


def test_a_postgres_loop_opens_at_most_max_connections(postgres_url: str) -> None:
    store = from_url(postgres_url, max_connections=3, table="mcache_bounded")
    twin = store.asynchronous()
    mine = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%%mcache_bounded%%'"

    async def burst() -> int:
        await asyncio.gather(*(twin.set(f"k{n}", b"v", 60) for n in range(50)))
        opened = (await twin.connections()).opened
        await twin.close()
        return opened

    assert 1 <= asyncio.run(burst()) <= 3, "50 concurrent statements share at most 3 connections"
    assert 1 <= asyncio.run(burst()) <= 3, "a second loop gets a pool of its own"
    assert store.get("k49") == b"v"
    deadline = time.monotonic() + 5  # a closed connection's backend exits a moment later
    while (sessions := store.connections.execute(mine, ()).fetchone()[0]) > 1:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert sessions == 1, "the loops' pools closed with them: only this query's session is left"
    store.close()


def test_a_store_given_its_client_is_reached_through_a_thread(redis_url: str) -> None:
    """The twin cannot copy a client it did not make: the async path hops, and still works."""
    import redis

    cache = Cache(RedisStore(redis_url, client=redis.Redis.from_url(redis_url)), namespace="nt")
    assert cache.store.asynchronous() is None

    async def build() -> str:
        return "built"

    async def twice() -> list[str]:
        return [await cache.aget_or_build("k", build, ttl=60) for _ in range(2)]

    assert asyncio.run(twice()) == ["built", "built"]
    assert cache.get("k") == "built", "the async path stored it through the sync store"


def test_the_sentinel_twin_sends_plain_reads_to_the_replica(
    sentinel_url: str, sentinel_group: Any
) -> None:
    import redis

    store = from_url(sentinel_url + "?replica_reads=true")
    replica = redis.Redis(host="127.0.0.1", port=sentinel_group.replica.port)

    def replica_hits() -> int:
        return int(replica.info("stats")["keyspace_hits"])

    async def reads() -> tuple[list[Any], bool]:
        twin = store.asynchronous()
        await twin.set("page", b"cached", 60)
        for _ in range(50):  # replication is asynchronous: the first reads may miss
            if await twin.get("page") == b"cached":
                break
            await asyncio.sleep(0.02)
        before = replica_hits()
        seen = [await twin.get("page") for _ in range(10)]
        gained = replica_hits() - before
        _value, token = await twin.gets("page")
        written = await twin.cas("page", b"new", token, 60)
        return seen, gained >= 10 and written

    seen, ok = asyncio.run(reads())
    replica.close()
    assert seen == [b"cached"] * 10
    assert ok, "plain reads went to the replica, the lease's gets and cas to the primary"


LOOPS_THAT_END = """
import asyncio, gc, sys
from mcache import Cache, Codec
cache = Cache(sys.argv[1], namespace="loops", codec=Codec(signing_key="k"))
for n in range(3):
    asyncio.run(cache.aset("k", n, 60))
    assert asyncio.run(cache.aget("k")) == n
gc.collect()
print("ok")
"""


@pytest.mark.parametrize("server", ["redis", "memcached", "postgres"])
def test_a_loop_that_ends_closes_its_connections_first(
    server: str, request: pytest.FixtureRequest
) -> None:
    """Each ``asyncio.run`` (asgiref's loop per Flask request, say) closes its own client."""
    import subprocess
    import sys

    url = request.getfixturevalue(f"{server}_url")
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", LOOPS_THAT_END, url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    assert "Warning" not in done.stderr and "Event loop is closed" not in done.stderr, done.stderr
