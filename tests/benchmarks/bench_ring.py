"""Server selection and cluster reads, against other clients' schemes, in one run.

    python -m tests.benchmarks.bench_ring [--keys 100000] [--calls 2000] [--markdown]

Part 1 (no servers): for each scheme, the share of keys that move when a fifth
server joins four, how evenly 4 equal servers are loaded (max/min and standard
deviation as % of the mean), and the lookup time per key.

Part 2 (three memcached started on loopback): a get hit through the 3-node
``MemcachedStore`` and through Django's ``PyMemcacheCache`` on the same 3 nodes,
each divided by a raw pymemcache ``get`` on a single node.
"""

from __future__ import annotations

import collections
import statistics
import time
from collections.abc import Callable

from pymemcache.client.base import Client
from pymemcache.client.rendezvous import RendezvousHash
from uhashring import HashRing

from mcache.model.ring import KetamaRing, ModuloRing, Server
from mcache.stores import MemcachedStore
from tests.benchmarks.common import Figure, arguments, latency_row, measure, report, table
from tests.servers import memcached_process

FOUR = [Server(f"10.0.0.{i}", 11211) for i in range(1, 5)]
FIVE = [*FOUR, Server("10.0.0.5", 11211)]


def _lookups(servers: list[Server]) -> dict[str, Callable[[str], str]]:
    names = [s.name for s in servers]
    ketama, dense, modulo = KetamaRing(servers), KetamaRing(servers, 4000), ModuloRing(servers)
    rendezvous = RendezvousHash(nodes=names)
    uhash = HashRing(names)
    return {
        "mcache ketama (libketama, 160 points)": lambda k: ketama.server_for(k).name,
        "mcache ketama (ketama_points=4000)": lambda k: dense.server_for(k).name,
        "mcache modulo (classic crc32 hash)": lambda k: modulo.server_for(k).name,
        "pymemcache RendezvousHash": rendezvous.get_node,
        "uhashring (default)": uhash.get_node,
    }


def placement(keys: list[str]) -> list[list[str]]:
    """Return one row per scheme: moved 4→5, spread, lookup µs/key."""
    rows = []
    before, after = _lookups(FOUR), _lookups(FIVE)
    for name, lookup in before.items():
        started = time.perf_counter()
        owners = [lookup(k) for k in keys]
        per_key = (time.perf_counter() - started) / len(keys) * 1e6
        moved = sum(o != after[name](k) for o, k in zip(owners, keys, strict=True)) / len(keys)
        loads = list(collections.Counter(owners).values())
        spread = statistics.pstdev(loads) / statistics.mean(loads) * 100
        rows.append(
            [
                name,
                f"{moved:.1%}",
                f"{max(loads) / min(loads):.3f}",
                f"{spread:.1f}%",
                f"{per_key:.2f}",
            ]
        )
    return rows


def cluster_reads(rounds: int, calls: int) -> list[list[str]]:
    """Return get-hit rows for the 3-node store and Django's backend vs raw pymemcache."""
    nodes = [memcached_process().start() for _ in range(3)]
    try:
        raw = Client(("127.0.0.1", nodes[0].port), default_noreply=False, no_delay=True)
        raw.set("bench:hit", b"v" * 100)
        store = MemcachedStore([n.address for n in nodes])
        store.set("bench:hit", b"v" * 100)
        subjects: dict[str, Callable[[], object]] = {
            "mcache MemcachedStore, 3 nodes": lambda: store.get("bench:hit"),
        }
        django_get = _django_cache([n.address for n in nodes])
        if django_get is not None:
            subjects["Django PyMemcacheCache, 3 nodes"] = django_get
        rows = []
        for name, subject in subjects.items():
            mine, theirs = measure(subject, lambda: raw.get("bench:hit"), rounds, calls)
            rows.append(latency_row(name, mine, theirs))
        return rows
    finally:
        for node in nodes:
            node.kill()


def _django_cache(addresses: list[str]) -> Callable[[], object] | None:
    try:
        from django.conf import settings
    except ImportError:
        return None
    if not settings.configured:
        settings.configure()
    from django.core.cache.backends.memcached import PyMemcacheCache

    cache = PyMemcacheCache(addresses, {})
    cache.set("bench:hit", b"v" * 100)
    return lambda: cache.get("bench:hit")


def figures(schemes: list[list[str]], reads: list[list[str]]) -> list[Figure]:
    """The headline figures: keys moved by ketama when a server joins, a 3-node get."""
    moved = float(schemes[0][1].rstrip("%"))
    ratio = float(reads[0][3].rstrip("×"))
    return [
        Figure(
            "ketama: keys moved adding a 5th server",
            f"{moved:.1f}%",
            f"{schemes[2][1]} (modulo)",
            "",
            "≤ 22%",
            moved <= 22,
        ),
        Figure(
            "3-node MemcachedStore get ÷ raw 1-node get",
            f"{reads[0][1]} µs",
            f"{reads[0][2]} µs",
            f"{ratio:.2f}×",
            "≤ 1.2×",
            ratio <= 1.2,
        ),
    ]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    keys = [f"user:{i}:profile" for i in range(args.keys)]
    header = ["scheme", "moved 4→5", "max/min load", "stddev % of mean", "lookup µs/key"]
    schemes = placement(keys)
    print(table(header, schemes, args.markdown))
    print()
    rows = cluster_reads(args.rounds, args.calls)
    header = ["get hit", "p50 µs", "raw pymemcache 1 node p50 µs", "ratio"]
    print(table(header, rows, args.markdown))
    report(figures(schemes, rows), args.figures)


if __name__ == "__main__":
    main()
