"""Memcached pools: placement, failover, safe rejoin, replication, tiers, per-server stats."""

from __future__ import annotations

import collections
import random
import signal
import threading
import time

import pytest
from uhashring import HashRing

from mcache import NO_VALUE
from mcache.model.ring import KetamaRing, ModuloRing, Server
from mcache.stores import MemcachedStore, MemoryStore, TieredStore
from mcache.stores.memcached import store as memcached_module
from tests.memcached_reads import record_reads
from tests.servers import ServerProcess

FOUR = [Server(f"10.0.0.{i}", 11211) for i in range(1, 5)]
KEYS = [f"user:{i}:profile" for i in range(100_000)]


def shares(ring, keys=KEYS) -> dict[str, float]:
    counts = collections.Counter(ring.server_for(k).name for k in keys)
    return {name: count / len(keys) for name, count in counts.items()}


# -- placement ----------------------------------------------------------------------------


def test_ketama_matches_uhashring_with_weights() -> None:
    servers = [Server("10.0.0.1", 11211, 1), Server("10.0.0.2", 11211, 3), Server("cache-3", 11212)]
    nodes = {s.name: {"hostname": s.host, "port": s.port, "weight": s.weight} for s in servers}
    theirs = HashRing(nodes, hash_fn="ketama")
    ours = KetamaRing(servers)
    differing = [k for k in KEYS[:10_000] if ours.server_for(k).name != theirs.get_node(k)]
    assert differing == []


def test_libketama_points_spread_unevenly_and_more_points_fix_it() -> None:
    libketama = shares(KetamaRing(FOUR))
    assert max(abs(s / 0.25 - 1) for s in libketama.values()) > 0.05  # why the option exists
    dense = shares(KetamaRing(FOUR, points=4000))
    for name, share in dense.items():
        assert abs(share / 0.25 - 1) <= 0.05, (name, share)


@pytest.mark.parametrize("points", [160, 4000])
def test_weights_three_to_one(points: int) -> None:
    servers = [Server("10.0.0.1", 11211, 3), Server("10.0.0.2", 11211, 1)]
    got = shares(KetamaRing(servers, points=points))
    assert abs(got["10.0.0.1:11211"] - 0.75) <= 0.03
    assert abs(got["10.0.0.2:11211"] - 0.25) <= 0.03


@pytest.mark.parametrize("points", [160, 4000])
def test_adding_a_server_moves_only_its_share(points: int) -> None:
    before = KetamaRing(FOUR, points=points)
    after = KetamaRing([*FOUR, Server("10.0.0.5", 11211)], points=points)
    moved = [k for k in KEYS if before.server_for(k) != after.server_for(k)]
    assert len(moved) / len(KEYS) <= 0.22
    assert {after.server_for(k).name for k in moved} == {"10.0.0.5:11211"}


def test_modulo_moves_most_keys() -> None:
    before = ModuloRing(FOUR)
    after = ModuloRing([*FOUR, Server("10.0.0.5", 11211)])
    moved = sum(before.server_for(k) != after.server_for(k) for k in KEYS)
    assert moved / len(KEYS) > 0.6


def test_iter_servers_visits_each_server_once_owner_first() -> None:
    for ring in (KetamaRing(FOUR), ModuloRing(FOUR)):
        for key in KEYS[:200]:
            order = list(ring.iter_servers(key))
            assert order[0] == ring.server_for(key)
            assert sorted(order, key=lambda s: s.name) == FOUR


# -- real servers: a private trio per test (conftest), so killing one disturbs nobody ----------


def _store(nodes: list[ServerProcess], **options) -> MemcachedStore:
    defaults = {"connect_timeout": 0.2, "timeout": 0.3, "dead_timeout": 1.0}
    return MemcachedStore([n.address for n in nodes], **{**defaults, **options})


def _owned_by(store: MemcachedStore, node: ServerProcess, keys: list[str]) -> list[str]:
    return [k for k in keys if store.ring.server_for(k).port == node.port]


def test_multi_key_calls_send_one_request_per_server(trio, monkeypatch) -> None:
    store = _store(trio)
    keys = [f"k{i}" for i in range(60)]
    store.set_many(dict.fromkeys(keys, b"v"))
    requests = collections.Counter()
    original = memcached_module.send_get

    def counting(client, group):
        requests[client.server] += 1
        return original(client, group)

    monkeypatch.setattr(memcached_module, "send_get", counting)
    assert len(store.get_many(keys)) == 60
    assert sorted(requests.values()) == [1, 1, 1]


def test_killed_server_costs_no_errors_and_rejoins(trio) -> None:
    # A killed server refuses at once; generous timeouts keep a busy machine's slow
    # answers from the live servers from counting as failures (seen once under load).
    store = _store(trio, connect_timeout=1.0, timeout=2.0)
    victim = trio[1]
    errors: list[BaseException] = []
    operations = collections.Counter()
    stop = threading.Event()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            key = f"load:{rng.randrange(2000)}"
            try:
                store.set(key, b"x" * rng.randrange(1, 500), 60)
                store.get(key)
                store.get_many([key, f"load:{rng.randrange(2000)}"])
                operations[seed] += 1
            except Exception as error:
                errors.append(error)

    stable = _owned_by(store, victim, [f"stable:{i}" for i in range(300)])
    store.set_many(dict.fromkeys(stable, b"before the kill"))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    victim.kill()
    time.sleep(1.5)
    assert store.dead_servers() == [victim.address]
    store.set_many(dict.fromkeys(stable, b"rewritten while it was away"))
    during = sum(operations.values())
    victim.restart()
    time.sleep(2.0)
    stop.set()
    for thread in threads:
        thread.join()
    assert errors == []
    assert b"before the kill" not in set(store.get_many(stable).values())
    assert sum(operations.values()) > during, "traffic went on while the server was away"
    assert store.dead_servers() == []
    assert store.stats()[victim.address]["curr_items"] > 0, "the rejoined server gets keys again"


@pytest.mark.parametrize("flush_on_rejoin", [True, False])
def test_rejoin_after_a_pause_never_serves_old_values(trio, flush_on_rejoin: bool) -> None:
    store = _store(trio, flush_on_rejoin=flush_on_rejoin)
    victim = trio[0]
    keys = _owned_by(store, victim, [f"page:{i}" for i in range(600)])
    assert keys
    for key in keys:
        store.set(key, b"old")
    victim.process.send_signal(signal.SIGSTOP)  # cut off, memory intact
    try:
        for key in keys:
            store.set(key, b"new")  # the stand-in takes the writes
        assert store.dead_servers() == [victim.address]
    finally:
        victim.process.send_signal(signal.SIGCONT)
    time.sleep(1.1)
    seen = {store.get(key) for key in keys}
    assert store.dead_servers() == []
    if flush_on_rejoin:
        assert b"old" not in seen
        assert seen <= {b"new", NO_VALUE}
    else:
        assert b"old" in seen  # the hazard the default guards against


@pytest.mark.parametrize("victim", [0, 1, 2])
def test_replicated_keys_survive_any_one_server(trio, victim: int) -> None:
    store = _store(trio, replicas=2)
    items = {f"session:{i}": f"user-{i}".encode() for i in range(1000)}
    assert store.set_many(items, 3600) == []
    trio[victim].kill()
    assert store.get_many(list(items)) == items
    sample = random.Random(victim).sample(sorted(items), 50)
    assert all(store.get(k) == items[k] for k in sample)
    trio[victim].restart()
    time.sleep(1.1)
    assert store.get_many(list(items)) == items, "a rejoined, empty owner does not hide replicas"
    assert store.dead_servers() == []


def test_replicated_add_incr_delete(trio) -> None:
    store = _store(trio, replicas=2)
    assert store.add("lock", b"me", 60) is True
    assert store.add("lock", b"you", 60) is False
    store.set("n", b"10")
    assert store.incr("n", 5) == 15
    owner = store.ring.server_for("n")
    trio_by_port = {n.port: n for n in trio}
    trio_by_port[owner.port].kill()
    assert store.get("n") == b"15", "the replica counted along"
    assert store.incr("n", 1) == 16
    assert store.delete("lock") is True
    assert store.get("lock") is NO_VALUE


def test_all_servers_down_raises_store_unavailable_quickly(trio) -> None:
    from mcache.errors import StoreUnavailable

    store = _store(trio)
    for node in trio:
        node.kill()
    with pytest.raises(StoreUnavailable):
        store.get("k")
    started = time.monotonic()
    for _ in range(100):
        with pytest.raises(StoreUnavailable):
            store.get("k")
    assert time.monotonic() - started < 1.0, "no call waits on a dead server"


# -- tiers --------------------------------------------------------------------------------------


def test_tiered_serves_and_promotes_what_the_hot_tier_evicted(trio) -> None:
    hot = MemoryStore(max_bytes=20_000, max_value_size=1000)
    store = TieredStore(hot, _store(trio[:1]), hot_ttl=60)
    for i in range(100):
        store.set(f"t:{i}", b"v" * 500, 300)
    assert hot.get("t:0") is NO_VALUE, "the small hot tier evicted the first keys"
    assert store.get("t:0") == b"v" * 500
    assert hot.get("t:0") == b"v" * 500, "promoted"
    got = store.get_many([f"t:{i}" for i in range(100)])
    assert len(got) == 100
    assert hot.stats()["memory"]["evictions"] > 0


def test_tiered_keeps_counters_cold(trio) -> None:
    cold = _store(trio[:1])
    store = TieredStore(MemoryStore(), cold)
    store.set("views", b"1")
    cold.incr("views", 41)  # another process counts
    assert store.get("views") == b"42"


# -- stats ---------------------------------------------------------------------------------------


def test_stats_per_server_with_slabs_and_items(trio) -> None:
    store = _store(trio)
    store.set_many({f"s:{i}": b"x" * (i * 10) for i in range(300)})
    report = store.stats()
    assert set(report) == {n.address for n in trio}
    assert sum(fields["curr_items"] for fields in report.values()) == 300
    slabs = store.stats_detail("slabs")
    for server, classes in slabs.items():
        assert "total" in classes and classes["total"]["active_slabs"] >= 1, server
        chunked = [c for name, c in classes.items() if name != "total"]
        assert chunked and all(c["chunk_size"] > 0 and c["total_pages"] >= 1 for c in chunked)
    items = store.stats_detail("items")
    assert sum(c["number"] for per in items.values() for c in per.values()) == 300
    # memcached 1.6 reports the bytes items really use per slab class under items
    assert all("mem_requested" in c for per in items.values() for c in per.values())
    trio[2].kill()
    assert store.stats()[trio[2].address]["dead"] == 1


def test_tag_bump_elsewhere_invalidates_a_near_cache_hit(trio) -> None:
    from mcache import Cache

    cold = _store(trio[:1])
    this_process = Cache(TieredStore(MemoryStore(), cold, hot_ttl=60), namespace="near")
    other_process = Cache(TieredStore(MemoryStore(), cold, hot_ttl=60), namespace="near")
    assert this_process.get_or_build("home", lambda: "v1", tags=["posts"]) == "v1"
    hot = this_process.store.hot  # type: ignore[attr-defined]
    assert hot.get(this_process.key("home")) is not NO_VALUE, "the entry sits in the near cache"
    other_process.invalidate("posts")
    assert this_process.get_or_build("home", lambda: "v2", tags=["posts"]) == "v2"


# -- tag versions next to their entries ------------------------------------------------------


def test_every_server_holds_one_copy_of_a_tag(trio) -> None:
    store = _store(trio)
    base = "ns:t:posts"
    copies = store.spread(base)
    assert copies[0] == base
    assert {store.ring.server_for(k) for k in copies} == set(store.servers)
    for key in [f"page:{i}" for i in range(50)]:
        assert store.ring.server_for(store.colocated(base, key)) == store.ring.server_for(key)


@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_a_tagged_hit_is_one_request_to_one_server(trio, monkeypatch, protocol: str) -> None:
    from mcache import Cache

    cache = Cache(_store(trio, protocol=protocol), namespace="colo")
    pages = [f"page:{i}" for i in range(30)]
    for page in pages:
        cache.get_or_build(page, lambda page=page: page, tags=["posts", "users"])
    requests = record_reads(monkeypatch)
    for page in pages:
        requests.clear()
        assert cache.get_or_build(page, lambda: "rebuilt", tags=["posts", "users"]) == page
        assert [n for _server, n in requests] == [3], "entry and both tag versions, one request"
    assert cache.counts.local()["hits"] == 30


def test_invalidate_moves_the_copies_on_every_server(trio) -> None:
    from mcache import Cache

    cache = Cache(_store(trio), namespace="colo")
    pages = [f"page:{i}" for i in range(60)]
    servers = {cache.store.ring.server_for(cache.key(p)) for p in pages}  # type: ignore[attr-defined]
    assert len(servers) == 3, "the pages live on every server"
    for page in pages:
        cache.get_or_build(page, lambda: "v1", tags=["posts"])
    assert [cache.get_or_build(p, lambda: "v2", tags=["posts"]) for p in pages] == ["v1"] * 60
    cache.invalidate("posts")
    assert [cache.get_or_build(p, lambda: "v2", tags=["posts"]) for p in pages] == ["v2"] * 60


def test_a_lost_copy_invalidates_the_entries_next_to_it(trio) -> None:
    from mcache import Cache

    store = _store(trio)
    cache = Cache(store, namespace="colo")
    pages = [f"page:{i}" for i in range(60)]
    for page in pages:
        cache.get_or_build(page, lambda: "v1", tags=["posts"])
    lost = store.spread(cache.tags.key("posts"))[1]  # its server restarted, say
    store.delete(lost)
    next_to_it = {
        p for p in pages if store.colocated(cache.tags.key("posts"), cache.key(p)) == lost
    }
    assert next_to_it and len(next_to_it) < len(pages)
    for page in pages:
        expected = "v2" if page in next_to_it else "v1"
        assert cache.get_or_build(page, lambda: "v2", tags=["posts"]) == expected


def test_a_version_is_only_compared_with_the_copy_it_came_from(trio) -> None:
    from mcache import Cache, Entry

    store = _store(trio)
    cache = Cache(store, namespace="colo")
    base = cache.tags.key("posts")
    page = next(
        p for p in (f"page:{i}" for i in range(100)) if store.colocated(base, cache.key(p)) != base
    )
    key = cache.key(page)
    for copy in store.spread(base):
        store.set(copy, b"1000")  # every copy at the same number, by coincidence
    entry = Entry(
        "recorded against the first copy", cache.clock.time_ms() + 60_000, 1, {"posts": 1000}
    )
    store.set(key, cache.codec.dumps(entry.to_wire(), key), 60)
    assert cache.get_or_build(page, lambda: "rebuilt", tags=["posts"]) == "rebuilt"


@pytest.mark.parametrize("name", ["user café", "x" * 120])
def test_no_two_tags_share_a_label(trio, name: str) -> None:
    from mcache import Cache

    store = _store(trio)
    cache = Cache(store, namespace="N" * 100)  # long names fill the key
    base = cache.tags.key(name)
    for copy in store.spread(base)[1:]:
        other = name + copy[len(base) :]  # a tag named like one of the copies
        page = next(
            p for p in (f"p{i}" for i in range(1000)) if store.colocated(base, cache.key(p)) == copy
        )
        slots = cache.tags.near([name, other], cache.key(page))
        assert len({label for label, _ in slots}) == len({key for _, key in slots}) == 2
        assert cache.get_or_build(page, lambda: "v1", tags=[name, other]) == "v1"
        cache.invalidate(name)
        assert cache.get_or_build(page, lambda: "v2", tags=[name, other]) == "v2"


def test_a_tag_named_like_a_copy_is_not_that_copy(trio) -> None:
    from mcache import Cache

    cache = Cache(_store(trio), namespace="colo")
    copies = {key for _, key in cache.tags.everywhere("posts")}
    assert cache.tags.key("posts~1") not in copies
    assert cache.tags.key("#" + cache.tags.key("posts").rsplit(":", 1)[-1]) not in copies


def test_replicated_tagged_entries_survive_their_owner(trio) -> None:
    from mcache import Cache

    store = _store(trio, replicas=2, dead_timeout=60)
    cache = Cache(store, namespace="rep")
    pages = [f"page:{i}" for i in range(60)]
    for page in pages:
        cache.get_or_build(page, lambda: "v1", tags=["posts", "users"])
    victim = trio[0]
    owned = [p for p in pages if store.ring.server_for(cache.key(p)).port == victim.port]
    victim.kill()
    got = [cache.get_or_build(p, lambda: "v2", tags=["posts", "users"]) for p in owned]
    assert got == ["v1"] * len(owned), "their replicas still answer, tags included"
    cache.invalidate("posts")
    got = [cache.get_or_build(p, lambda: "v3", tags=["posts", "users"]) for p in pages]
    assert got == ["v3"] * len(pages), "an invalidation during the outage reaches every entry"


def test_a_server_without_points_costs_no_search() -> None:
    servers = [Server("127.0.0.1", 1, 100), Server("127.0.0.1", 2, 100), Server("127.0.0.1", 3, 1)]
    store = MemcachedStore(servers)
    ring_owners = store.ring.owning_servers()
    assert servers[2] not in ring_owners, "a weight of 1 against 100 gets no point"
    copies = store.spread("t:posts")
    assert {store.ring.server_for(k) for k in copies} == ring_owners
    assert len(copies) == len(ring_owners)
