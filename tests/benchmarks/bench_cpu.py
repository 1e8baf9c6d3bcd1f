"""CPU per hit: what a cache read costs this process, against the anchors, in one run.

    python -m tests.benchmarks.bench_cpu [--rounds 9] [--calls 3000] [--only TEXT] [--markdown]

Latency ratios against a loopback round trip swing with the VM's scheduling; the CPU a
call burns in the calling process does not (``time.process_time``: user and system time
of this process, so the socket calls are counted and the server's work is not). Every
subject runs ``--calls`` calls per block (more, for a block to take 50 ms of CPU), in blocks
interleaved with its anchor (the order reversed each round, unpinned); the figure is the
median of the blocks' µs per call.

Subjects read the same small value (a dict of four fields, about 100 bytes pickled) as
their anchors, so the figure is the path's own cost, not the value's decoding:

* **near hit** (``get_or_build`` with 2 tags, ``near_ttl``) and **tagged hit on memory://**
  against the floor of any near cache that hands out copies: a ``cachetools.TTLCache``
  lookup and a pickle round trip of the value;
* **tagged hit** on 1 and 3 memcached nodes and on Redis against a raw pymemcache ``get``
  (or redis-py ``GET``) of as many bytes, and Django's ``PyMemcacheCache.get`` /
  ``RedisCache.get`` of the value;
* **Django ``cache.get`` through ``MCacheBackend``** (signed, as by default) against
  Django's ``PyMemcacheCache.get``;
* dogpile's ``get_or_create`` on 1 node, for scale;
* what counting key families costs a hit (``metrics=["families"]``, for the dashboard's
  chart): the tagged 3-node hit and the near hit with it, against the same without;
* what sets the 3-node hit's floor: the store's read of the hit's keys alone (the entry and
  its tags' versions, one request) against the raw ``get``, and the hit against a raw ``get``
  followed by the same hit on ``memory://`` (a round trip plus the decoding and checks any
  tagged hit must do, the two interleaved as they are in the hit).
"""

from __future__ import annotations

import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis
from cachetools import TTLCache
from pymemcache.client.base import Client

from mcache import Cache, Codec
from tests.benchmarks.bench_get_or_build import _django, _django_redis, _dogpile, _node
from tests.benchmarks.common import Figure, arguments, report, table
from tests.servers import memcached_process, redis_process

Call = Callable[[], object]
TAGS = ["posts", "users"]
VALUE = {"id": 4242, "title": "A cached page fragment", "score": 1.5, "tags": ["a", "b"]}
PICKLED = pickle.dumps(VALUE, pickle.HIGHEST_PROTOCOL)


def cpu_us(call: Call, calls: int) -> float:
    """Return the CPU this process spends per call of ``call``, in µs."""
    clock = time.process_time
    started = clock()
    for _ in range(calls):
        call()
    return (clock() - started) / calls * 1e6


BLOCK_SECONDS = 0.05
"""CPU a block takes at least: a few-µs subject runs more than ``--calls`` calls per block,
so a block spans many scheduler ticks and one neighbour's burst moves its median less."""


def interleaved_cpu(subjects: list[Call], rounds: int, calls: int) -> list[float]:
    """Return each subject's median µs per call over ``rounds`` blocks, ABBA order."""
    sizes = []
    for subject in subjects:
        warm = cpu_us(subject, max(calls // 10, 1))
        sizes.append(max(calls, int(BLOCK_SECONDS * 1e6 / max(warm, 0.1))))
    blocks: list[list[float]] = [[] for _ in subjects]
    order = list(range(len(subjects)))
    for _ in range(rounds):
        for index in order:
            blocks[index].append(cpu_us(subjects[index], sizes[index]))
        order.reverse()
    return [statistics.median(samples) for samples in blocks]


def floor() -> Call:
    """The floor of a near cache that returns copies: a TTLCache lookup, a pickle round trip."""
    near: TTLCache[str, Any] = TTLCache(maxsize=10_000, ttl=60)
    near["page"] = VALUE
    dumps, loads, protocol = pickle.dumps, pickle.loads, pickle.HIGHEST_PROTOCOL
    return lambda: loads(dumps(near["page"], protocol))


def filled(cache: Cache) -> Call:
    """Return a tagged ``get_or_build`` hit on ``cache``, its entry built first."""
    read = lambda: cache.get_or_build("page", lambda: VALUE, tags=TAGS)  # noqa: E731
    assert read() == VALUE and read() == VALUE
    return read


def raw_memcached(address: str) -> Call:
    raw = Client(_node(address), default_noreply=False, no_delay=True)
    raw.set("bench:raw", PICKLED)
    return lambda: raw.get("bench:raw")


def raw_redis(url: str) -> Call:
    client = redis.Redis.from_url(url)
    client.set("bench:raw", PICKLED)
    return lambda: client.get("bench:raw")


def django_mcache(addresses: list[str]) -> Call:
    """Django's ``cache.get`` through ``MCacheBackend``, configured as the tutorial is."""
    from django_mcache.backend import MCacheBackend

    backend = MCacheBackend("memcached://" + ",".join(addresses), {"KEY_PREFIX": "cpu"})
    backend.set("page", VALUE, 3600)
    assert backend.mcache.codec.signed, "signed by default"
    return lambda: backend.get("page")


def store_read(cache: Cache) -> Call:
    """Return the store's read of what a hit on ``cache``'s entry reads (its plan's keys)."""
    key = cache.key("page")
    keys = cache.reader.plans[key][3]  # the plan the filled entry's hit made and kept
    assert key in cache.store.get_many(keys)
    return lambda: cache.store.get_many(keys)


def one_after_the_other(first: Call, then: Call) -> Call:
    return lambda: (first(), then())


def django_get(cache: Any) -> Call:
    cache.set("page", VALUE, 3600)
    return lambda: cache.get("page")


def pairs(addresses: list[str], redis_url: str) -> list[tuple[str, Call, str, Call, float]]:
    """Return ``(subject, call, anchor, call, target ratio or 0)`` rows."""
    from django.conf import settings

    if not settings.configured:  # before Django's anchors: MCacheBackend signs with it
        settings.configure(SECRET_KEY="benchmark-only")
    pool = "memcached://" + ",".join(addresses)
    one = "memcached://" + addresses[0]
    codec = Codec(trust_unsigned_pickle=True)  # the core's default codec, without the warning
    near = filled(Cache(pool, namespace="near", near_ttl=60, codec=codec))
    memory = filled(Cache("memory://", namespace="mem"))
    tagged1 = filled(Cache(one, namespace="t1", codec=codec))
    three = Cache(pool, namespace="t3", codec=codec)
    tagged3 = filled(three)
    tagged_redis = filled(Cache(redis_url, namespace="tr", codec=codec))
    raw1, raw_r = raw_memcached(addresses[0]), raw_redis(redis_url)
    django3, django_r = django_get(_django(addresses)), django_get(_django_redis(redis_url))
    region = _dogpile(addresses[:1])
    dogpile = lambda: region.get_or_create("page", lambda: VALUE)  # noqa: E731
    dogpile()
    return [
        ("near hit, 2 tags", near, "TTLCache lookup + pickle round trip", floor(), 1.5),
        ("tagged hit, memory://", memory, "TTLCache lookup + pickle round trip", floor(), 4.0),
        ("tagged hit, 1 memcached", tagged1, "raw pymemcache get, same bytes", raw1, 0),
        ("tagged hit, 3 memcached", tagged3, "raw pymemcache get, same bytes", raw1, 1.1),
        ("tagged hit, 3 memcached", tagged3, "Django PyMemcacheCache.get, 3 nodes", django3, 1.0),
        ("tagged hit, Redis", tagged_redis, "raw redis-py GET, same bytes", raw_r, 0),
        ("tagged hit, Redis", tagged_redis, "Django RedisCache.get", django_r, 0),
        ("Django cache.get, MCacheBackend", django_mcache(addresses),
         "Django PyMemcacheCache.get, 3 nodes", django3, 0),
        ("dogpile get_or_create, 1 node", dogpile, "raw pymemcache get, same bytes", raw1, 0),
        ("3-node store read of a hit's keys", store_read(three),
         "raw pymemcache get, same bytes", raw1, 0),
        ("tagged hit, 3 memcached", tagged3,
         "raw get, then a memory:// tagged hit", one_after_the_other(raw1, memory), 0),
        ("tagged hit, 3 memcached, families counted",
         filled(Cache(pool, namespace="t3f", codec=codec, metrics=["families"])),
         "tagged hit, 3 memcached", tagged3, 0),
        ("near hit, families counted",
         filled(Cache(pool, namespace="nearf", near_ttl=60, codec=codec, metrics=["families"])),
         "near hit, 2 tags", near, 0),
    ]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--only", default="", help="run only the rows whose subject has TEXT")
    args = parser.parse_args()
    nodes = [memcached_process(threads=1).start() for _ in range(3)]
    server = redis_process().start()
    try:
        rows, figures = [], []
        for name, call, anchor_name, anchor, target in pairs(
            [n.address for n in nodes], f"redis://{server.address}/0"
        ):
            if args.only not in name:
                continue
            mine, theirs = interleaved_cpu([call, anchor], args.rounds, args.calls)
            ratio = mine / theirs
            met = ratio <= target if target else None
            goal = f"≤ {target:g}×" if target else ""
            rows.append([name, f"{mine:.1f}", anchor_name, f"{theirs:.1f}", f"{ratio:.2f}×", goal])
            figures.append(
                Figure(
                    f"CPU per call, {name} against {anchor_name}",
                    f"{mine:.1f} µs",
                    f"{theirs:.1f} µs",
                    f"{ratio:.2f}×",
                    goal,
                    met,
                )
            )
        header = ["subject", "CPU µs", "anchor", "anchor CPU µs", "ratio", "target"]
        print(table(header, rows, args.markdown))
        report(figures, args.figures)
    finally:
        for node in nodes:
            node.kill()
        server.kill()


if __name__ == "__main__":
    main()
