"""Counter latency against a raw pymemcache ``incr``, and online-visitor memory.

    python -m tests.benchmarks.bench_counters [--visitors 100000] [--markdown]

Part 1 times ``Counter.incr`` and ``OnlineCounter.hit`` (a repeat visitor: one
failed marker ``add``; and a new visitor: marker ``add`` + slot ``incr``) on one
loopback memcached, alternating with a raw pymemcache ``incr`` in the same run.

Part 2 counts N distinct online visitors both ways and reports the memory the
server needed: memcached markers (one key per visitor, ``bytes`` from stats) and
Redis HyperLogLog slots (``MEMORY USAGE`` of the slot keys), with the count each
reported.
"""

from __future__ import annotations

import itertools

import redis
from pymemcache.client.base import Client

from mcache import Cache, FakeClock
from tests.benchmarks.common import (
    Figure,
    arguments,
    latency_row,
    measure,
    report,
    table,
)
from tests.servers import memcached_process, redis_process


def latency(address: str, port: int, rounds: int, calls: int) -> list[list[str]]:
    """Return rows: operation, p50 µs, raw incr p50 µs, ratio."""
    raw = Client(("127.0.0.1", port), default_noreply=False, no_delay=True)
    raw.set("bench:raw", b"0")
    cache = Cache(f"memcached://{address}", namespace="bench")
    counter = cache.counter("hits")
    online = cache.online_counter("site", window=300, slots=6, unique="markers")
    online.hit("regular")
    fresh = itertools.count()
    subjects = {
        "Counter.incr": counter.incr,
        "OnlineCounter.hit, repeat visitor": lambda: online.hit("regular"),
        "OnlineCounter.hit, new visitor": lambda: online.hit(next(fresh)),
    }
    rows = []
    for name, subject in subjects.items():
        mine, theirs = measure(subject, lambda: raw.incr("bench:raw", 1), rounds, calls)
        rows.append(latency_row(name, mine, theirs))
    return rows


def memory(memcached_address: str, redis_port: int, visitors: int) -> list[list[str]]:
    """Return rows: scheme, visitors counted, bytes used, bytes per visitor."""
    clock = FakeClock(1_800_000_000.0)
    rows = []
    cache = Cache(f"memcached://{memcached_address}", namespace="mem", clock=clock)
    before = cache.store.stats()[memcached_address]["bytes"]
    markers = cache.online_counter("site", window=300, slots=6, unique="markers")
    for visitor in range(visitors):
        markers.hit(visitor)
    used = int(cache.store.stats()[memcached_address]["bytes"]) - int(before)
    clock.advance(60)
    rows.append(_memory_row("memcached markers", markers.count(), used, visitors))

    raw = redis.Redis(host="127.0.0.1", port=redis_port)
    cache = Cache(f"redis://127.0.0.1:{redis_port}/0", namespace="mem", clock=clock)
    hll = cache.online_counter("site", window=300, slots=6, unique="hll")
    for visitor in range(visitors):
        hll.hit(visitor)
    clock.advance(60)
    slot_keys = [hll.unique_key(hll._slot() - back) for back in range(6)]
    used = sum(raw.memory_usage(key) or 0 for key in slot_keys)
    rows.append(_memory_row("Redis HyperLogLog", hll.count(), used, visitors))
    return rows


def _memory_row(name: str, counted: int, used: int, visitors: int) -> list[str]:
    return [name, f"{visitors:,}", f"{counted:,}", f"{used:,}", f"{used / visitors:.1f}"]


def figures(latencies: list[list[str]], memories: list[list[str]]) -> list[Figure]:
    """The headline figures, reported without targets: incr, and a visitor's memory."""
    incr = latencies[0]
    markers, hll = memories
    return [
        Figure("Counter.incr ÷ raw incr", f"{incr[1]} µs", f"{incr[2]} µs", incr[3], "", None),
        Figure(
            f"online visitors ({markers[1]}): bytes per visitor, HyperLogLog",
            f"{hll[4]} B ({hll[2]} counted)",
            f"{markers[4]} B (markers, exact)",
            "",
            "",
            None,
        ),
    ]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--visitors", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    memcached, redis_server = memcached_process().start(), redis_process().start()
    try:
        latencies = latency(memcached.address, memcached.port, args.rounds, args.calls)
        header = ["operation", "p50 µs", "raw pymemcache incr p50 µs", "ratio"]
        print(table(header, latencies, args.markdown))
        print()
        memories = memory(memcached.address, redis_server.port, args.visitors)
        header = ["online visitors as", "visitors", "counted", "bytes", "bytes per visitor"]
        print(table(header, memories, args.markdown))
        report(figures(latencies, memories), args.figures)
    finally:
        memcached.kill()
        redis_server.kill()


if __name__ == "__main__":
    main()
