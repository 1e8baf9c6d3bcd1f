"""mcache on one Redis, behind Sentinel and on a Cluster, against raw redis-py on each, in one run.

    python -m tests.benchmarks.bench_redis_topologies [--rounds 6] [--calls 2000] [--markdown]

Starts a redis-server, a Sentinel group (primary, replica, three sentinels)
and a Cluster (three primaries, a replica each) on free loopback ports. On
each it times a plain ``get`` hit and a ``get_or_build`` hit carrying two tags
through mcache, and a ``get`` through the raw redis-py client of that topology
(``Redis``, ``Sentinel.master_for``, ``RedisCluster``): the physical limit,
one round trip. Subject and anchor alternate in rounds (ABBA); nothing is
pinned to a CPU. Then it SIGKILLs the Sentinel primary and the Cluster primary
serving a probe key, and reports how long after the kill that key is written
and read back through the store again (promotion plus the store finding it).
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.sentinel import Sentinel

from mcache import Cache
from tests.benchmarks.common import Figure, arguments, measure, p99, report, table
from tests.redis_groups import ClusterGroup, HitsAgain, SentinelGroup
from tests.servers import HOST, ServerProcess, redis_process

TAGS = ["posts", "authors"]
VALUE = "v" * 100


@dataclass
class Row:
    """One operation on one topology, with its anchor measured alongside."""

    topology: str
    op: str
    p50: float
    p99: float
    anchor_p50: float

    @property
    def ratio(self) -> float:
        return self.p50 / self.anchor_p50


def measure_topology(name: str, url: str, raw: Any, rounds: int, calls: int) -> list[Row]:
    """Time a get and a tagged get_or_build hit through mcache against raw ``get``."""
    cache = Cache(url, namespace="bench")
    cache.get_or_build("page", lambda: VALUE, tags=TAGS)
    cache.set("plain", VALUE)
    raw_key = cache.key("plain")
    subjects = {
        "get (hit)": lambda: cache.get("plain"),
        "get_or_build (hit, 2 tags)": lambda: cache.get_or_build("page", str, tags=TAGS),
    }
    rows = []
    for op, subject in subjects.items():
        mine, theirs = measure(subject, lambda: raw.get(raw_key), rounds, calls)
        rows.append(Row(name, op, statistics.median(mine), p99(mine), statistics.median(theirs)))
    return rows


def hits_again_after(url: str, key: str, kill: Any) -> float | None:
    """Kill a primary; return the seconds until ``key`` is written and read back again."""
    killed = threading.Event()
    probe = HitsAgain(url, key, killed)
    probe.start()
    kill()
    killed.set()
    probe.join(60)
    return probe.hits_again_after


def run(rounds: int, calls: int) -> tuple[list[Row], dict[str, float | None]]:
    """Start the three topologies, measure, kill a primary of each group, stop everything."""
    single: ServerProcess = redis_process().start()
    sentinel_group = SentinelGroup(service="bench")
    cluster = ClusterGroup()
    try:
        sentinel_group.wait_ready()
        cluster.wait_ready()
        sentinels = Sentinel([(HOST, s.port) for s in sentinel_group.sentinels])
        topologies = {
            "single": (f"redis://{single.address}/0", redis.Redis(host=HOST, port=single.port)),
            "sentinel": (sentinel_group.url(), sentinels.master_for("bench")),
            "cluster": (cluster.url(), RedisCluster(host=HOST, port=cluster.nodes[0].port)),
        }
        rows = []
        for name, (url, raw) in topologies.items():
            rows += measure_topology(name, url, raw, rounds, calls)
            raw.close()
        fast = "?socket_timeout=0.3&socket_connect_timeout=0.2"
        victim = cluster.serving("probe")
        recovery = {
            "sentinel": hits_again_after(
                sentinel_group.url(query=fast[1:]), "probe", sentinel_group.primary.kill
            ),
            "cluster": hits_again_after(cluster.url() + fast, "probe", victim.kill),
        }
    finally:
        single.kill()
        sentinel_group.kill()
        cluster.kill()
    return rows, recovery


def render(rows: list[Row], recovery: dict[str, float | None], markdown: bool) -> str:
    """The latency table, then the recovery times."""
    header = ["topology", "operation", "p50 µs", "p99 µs", "raw get p50 µs", "ratio"]
    cells = [
        [r.topology, r.op, f"{r.p50:.1f}", f"{r.p99:.1f}", f"{r.anchor_p50:.1f}", f"{r.ratio:.2f}×"]
        for r in rows
    ]
    lines = [table(header, cells, markdown), ""]
    for name, seconds in recovery.items():
        shown = "never (within 60 s)" if seconds is None else f"{seconds:.2f} s"
        lines.append(f"{name}: primary SIGKILLed → its keys hit again after {shown}")
    return "\n".join(lines)


def figures(rows: list[Row], recovery: dict[str, float | None]) -> list[Figure]:
    """Each topology's tagged hit against its raw get, and each failover's recovery time."""
    found = []
    for row in rows:
        if row.op.startswith("get_or_build"):
            found.append(
                Figure(
                    f"{row.topology}: tagged get_or_build hit ÷ raw redis-py get",
                    f"{row.p50:.1f} µs",
                    f"{row.anchor_p50:.1f} µs",
                    f"{row.ratio:.2f}×",
                    "",
                    None,
                )
            )
    for name, seconds in recovery.items():
        shown = "never" if seconds is None else f"{seconds:.2f} s"
        found.append(Figure(f"{name}: primary killed → hits again", shown, "", "", "", None))
    return found


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    rows, recovery = run(args.rounds, args.calls)
    print(render(rows, recovery, args.markdown))
    report(figures(rows, recovery), args.figures)


if __name__ == "__main__":
    main()
