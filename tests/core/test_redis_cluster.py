"""What the Redis Cluster store does beyond the contract: placing, replicas, roles, a late start."""

from __future__ import annotations

import pytest
import redis

from mcache import Cache
from mcache.errors import StoreUnavailable
from mcache.stores import from_url
from mcache.stores.redis.cluster import ClusterRedisStore
from mcache.testing.async_driver import driven
from tests.redis_groups import ClusterGroup
from tests.servers import HOST, free_port


def gets_per_node(cluster: ClusterGroup) -> dict[int, int]:
    """How many GETs each primary has answered so far."""
    counts = {}
    for node in cluster.primaries():
        client = redis.Redis(host=HOST, port=node.port)
        counts[node.port] = client.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
        client.close()
    return counts


def test_a_tagged_hit_reads_one_node(cluster_url: str, cluster_group: ClusterGroup) -> None:
    cache = Cache(cluster_url, namespace="place")
    pages = [f"page {n}" for n in range(30)]
    for page in pages:
        cache.get_or_build(page, lambda page=page: page, tags=["posts", "authors"])
    for page in pages:
        before = gets_per_node(cluster_group)
        assert cache.get_or_build(page, lambda: "rebuilt", tags=["posts", "authors"]) == page
        after = gets_per_node(cluster_group)
        touched = {port: after[port] - n for port, n in before.items() if after[port] != n}
        assert len(touched) == 1, f"{page}: the entry and both tag copies on one node: {touched}"
        assert list(touched.values()) == [3]


def test_every_primary_holds_a_copy_of_each_tag_and_a_bump_moves_them_all(
    cluster_url: str, cluster_group: ClusterGroup
) -> None:
    store = from_url(cluster_url)
    assert isinstance(store, ClusterRedisStore)
    copies = store.spread("site:t:posts")
    assert copies[0] == "site:t:posts" and len(copies) == 16, "one per slot range"
    owners = {node.port for node in cluster_group.serving_each(list(copies))}
    assert len(owners) == 3, "every primary serves some copy"
    cache = Cache(store, namespace="site")
    cache.get_or_build("home", lambda: "v1", tags=["posts"])
    cache.invalidate("posts")
    assert cache.get_or_build("home", lambda: "v2", tags=["posts"]) == "v2"
    assert len(store.get_many(copies)) == 16, "the bump wrote every copy"


@pytest.mark.parametrize("driver", ["sync", "async twin"])
def test_replica_reads_serve_hits_from_replicas(
    cluster_url: str, cluster_group: ClusterGroup, driver: str
) -> None:
    url = cluster_url + "?replica_reads=true"
    store = from_url(url) if driver == "sync" else driven(url)
    store.set("page", b"cached")
    primary_ports = {node.port for node in cluster_group.primaries()}
    replicas = [node for node in cluster_group.nodes if node.port not in primary_ports]

    def replica_hits() -> int:
        total = 0
        for node in replicas:
            client = redis.Redis(host=HOST, port=node.port)
            total += client.info("stats")["keyspace_hits"]
            client.close()
        return total

    before = replica_hits()
    for _ in range(50):  # replication is asynchronous: the first reads may miss
        if store.get("page") == b"cached":
            break
    assert [store.get("page") for _ in range(10)] == [b"cached"] * 10
    assert replica_hits() - before >= 10, "plain reads went to a replica"
    _value, token = store.gets("page")
    assert store.cas("page", b"new", token), "a lease's read and write are on the primary"
    store.close()


def test_stats_list_every_node_with_its_role(cluster_url: str) -> None:
    stats = from_url(cluster_url).stats()
    roles = sorted(fields["role"] for fields in stats.values())
    assert roles == ["primary"] * 3 + ["replica"] * 3
    assert all("curr_items" in fields for fields in stats.values())


def test_pfcount_needs_keys_of_one_slot(cluster_url: str) -> None:
    store = from_url(cluster_url)
    store.pfadd("{visits}:1", b"a", 60)
    store.pfadd("{visits}:2", b"b", 60)
    assert store.pfcount(["{visits}:1", "{visits}:2"]) == 2
    with pytest.raises(ValueError, match="one hash slot"):
        store.pfcount(["visits:1", "visits:2"])


def test_a_site_starts_while_the_cluster_is_down_and_its_cache_misses() -> None:
    store = from_url(f"redis+cluster://{HOST}:{free_port()}")
    with pytest.raises(StoreUnavailable, match="no node answered"):
        store.get("page")
    with pytest.raises(StoreUnavailable, match="no node answered"):
        store.get_many(["a", "b"])  # the second attempt waits for the interval, without I/O
    cache = Cache(store, namespace="down")
    assert cache.get_or_build("page", lambda: "built") == "built"


@pytest.mark.parametrize(
    ("url", "store_class"),
    [("valkey+cluster", "ClusterRedisStore"), ("valkey", "RedisStore")],
)
def test_valkey_urls_are_the_redis_stores(url: str, store_class: str, cluster_url: str) -> None:
    target = cluster_url.replace("redis+cluster", url)
    if url == "valkey":
        target = f"valkey://{HOST}:6379/0"
    assert type(from_url(target)).__name__ == store_class
