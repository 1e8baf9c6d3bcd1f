"""Store latency against the raw drivers, measured in one run.

    python -m tests.benchmarks.bench_stores [--rounds 10] [--calls 2000] [--markdown]

Starts its own memcached and redis-server on free loopback ports, then times
get (hit), get_many (3 keys) and set (100-byte values, no codec) through each
mcache store and through the bare driver it wraps: pymemcache's ``Client`` and
redis-py's ``Redis``. Subject and anchor alternate in rounds (ABBA) so drift on
a busy machine hits both alike; nothing is pinned to a CPU. The ratio compares
medians (p50).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import redis
from pymemcache.client.base import Client

from mcache.contract.store import Store
from mcache.stores import MemoryStore, from_url
from tests.benchmarks.common import Call, Figure, arguments, measure, p99, report, table
from tests.servers import memcached_process, redis_process

VALUE = b"v" * 100
KEYS = [f"bench:key:{i}" for i in range(3)]


@dataclass
class Row:
    """One measured operation."""

    store: str
    op: str
    p50: float
    p99: float
    anchor: str
    anchor_p50: float

    @property
    def ratio(self) -> float:
        return self.p50 / self.anchor_p50


def _operations(store: Store, raw: Any, is_redis: bool) -> dict[str, tuple[Call, Call]]:
    """Pair each store operation with the same operation on the raw driver."""
    raw_get_many = raw.mget if is_redis else raw.get_many
    return {
        "get (hit)": (lambda: store.get(KEYS[0]), lambda: raw.get(KEYS[0])),
        "get_many (3)": (lambda: store.get_many(KEYS), lambda: raw_get_many(KEYS)),
        "set": (
            lambda: store.set("bench:set", VALUE, 60),
            (lambda: raw.set("bench:set", VALUE, ex=60))
            if is_redis
            else (lambda: raw.set("bench:set", VALUE, 60)),
        ),
    }


def run(rounds: int, calls: int) -> list[Row]:
    """Start servers, measure every store, stop servers."""
    memcached = memcached_process().start()
    redis_server = redis_process().start()
    rows: list[Row] = []
    try:
        raw_mc = Client(("127.0.0.1", memcached.port), default_noreply=False, no_delay=True)
        raw_redis = redis.Redis(host="127.0.0.1", port=redis_server.port)
        subjects = {
            "MemcachedStore": (from_url(f"memcached://{memcached.address}"), "pymemcache", raw_mc),
            "RedisStore": (from_url(f"redis://{redis_server.address}/0"), "redis-py", raw_redis),
            "MemoryStore": (MemoryStore(), "pymemcache", raw_mc),
        }
        for key in KEYS:
            raw_mc.set(key, VALUE)
            raw_redis.set(key, VALUE)
        for name, (store, anchor_name, raw) in subjects.items():
            store.set_many(dict.fromkeys(KEYS, VALUE))
            ops = _operations(store, raw, is_redis=anchor_name == "redis-py")
            for op, (subject, anchor) in ops.items():
                mine, theirs = measure(subject, anchor, rounds, calls)
                rows.append(
                    Row(
                        name,
                        op,
                        statistics.median(mine),
                        p99(mine),
                        anchor_name,
                        statistics.median(theirs),
                    )
                )
    finally:
        memcached.kill()
        redis_server.kill()
    return rows


def render(rows: list[Row], markdown: bool) -> str:
    """Format the rows as a plain or Markdown table."""
    header = ["store", "operation", "p50 µs", "p99 µs", "anchor", "anchor p50 µs", "ratio"]
    cells = [
        [
            r.store,
            r.op,
            f"{r.p50:.1f}",
            f"{r.p99:.1f}",
            r.anchor,
            f"{r.anchor_p50:.1f}",
            f"{r.ratio:.2f}×",
        ]
        for r in rows
    ]
    return table(header, cells, markdown)


def figures(rows: list[Row]) -> list[Figure]:
    """The headline figures: each network store's get against its raw driver's."""
    found = []
    for store, target in (("MemcachedStore", 1.15), ("RedisStore", None)):
        row = next(r for r in rows if r.store == store and r.op == "get (hit)")
        found.append(
            Figure(
                f"{store} get ÷ raw {row.anchor} get",
                f"{row.p50:.1f} µs",
                f"{row.anchor_p50:.1f} µs",
                f"{row.ratio:.2f}×",
                "" if target is None else f"≤ {target}×",
                None if target is None else row.ratio <= target,
            )
        )
    return found


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    rows = run(args.rounds, args.calls)
    print(render(rows, args.markdown))
    report(figures(rows), args.figures)


if __name__ == "__main__":
    main()
