"""The async memcached store against asyncio memcached clients, on one event loop.

    python -m tests.benchmarks.bench_memcached_async [--rounds 6] [--calls 2000] [--markdown]

Starts its own memcached on a free loopback port and times, on one event
loop, a get hit (100-byte value) one await after another, and the same gets
from 64 concurrent tasks (requests/s), through mcache's
``AsyncMemcachedStore`` (the blocking store's ring, replicas and failover as
steps, on its own asyncio connections) and through emcache and aiomcache,
each given one server and a pool of 64 connections. Subjects alternate in
rounds (the order rotates each round) so drift hits each alike; nothing is
pinned to a CPU. Ratios are mcache ÷ emcache.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import aiomcache
import emcache

from mcache.stores import MemcachedStore
from tests.benchmarks.common import Figure, arguments, p99, report, table
from tests.servers import memcached_process

KEY = "bench:async:key"
VALUE = b"v" * 100
TASKS = 64

Get = Callable[[], Awaitable[object]]


async def _latencies(get: Get, calls: int) -> list[float]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(calls):
        start = clock()
        await get()
        samples.append((clock() - start) / 1000)
    return samples


async def _throughput(get: Get, calls: int) -> float:
    async def task() -> None:
        for _ in range(calls // TASKS):
            await get()

    start = time.perf_counter()
    await asyncio.gather(*(task() for _ in range(TASKS)))
    return (calls // TASKS) * TASKS / (time.perf_counter() - start)


async def _measure(subjects: dict[str, Get], rounds: int, calls: int) -> dict[str, tuple]:
    for get in subjects.values():  # warm: connections open, first-call imports done
        await _throughput(get, TASKS * 4)
    latency: dict[str, list[float]] = {name: [] for name in subjects}
    rate: dict[str, list[float]] = {name: [] for name in subjects}
    names = list(subjects)
    for number in range(rounds):
        for name in names[number % len(names) :] + names[: number % len(names)]:
            latency[name] += await _latencies(subjects[name], calls)
            rate[name].append(await _throughput(subjects[name], calls * 4))
    return {name: (latency[name], statistics.median(rate[name])) for name in names}


async def _run_async(address: str, rounds: int, calls: int) -> dict[str, tuple]:
    host, port = address.rsplit(":", 1)
    store = MemcachedStore([address], max_pool_size=TASKS)
    store.set(KEY, VALUE, 600)
    twin = store.asynchronous()
    em = await emcache.create_client(
        [emcache.MemcachedHostAddress(host, int(port))], max_connections=TASKS, timeout=1.0
    )
    aio = aiomcache.Client(host, int(port), pool_size=TASKS)
    key = KEY.encode()
    subjects: dict[str, Get] = {
        "mcache AsyncMemcachedStore": lambda: twin.get(KEY),
        "emcache": lambda: em.get(key),
        "aiomcache": lambda: aio.get(key),
    }
    try:
        return await _measure(subjects, rounds, calls)
    finally:
        await twin.close()
        await em.close()
        await aio.close()


def run(rounds: int, calls: int) -> dict[str, tuple]:
    memcached = memcached_process().start()
    try:
        return asyncio.run(_run_async(memcached.address, rounds, calls))
    finally:
        memcached.kill()


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    results = run(args.rounds, args.calls)
    header = ["client", "get p50 µs", "get p99 µs", f"{TASKS} tasks: gets/s"]
    rows = [
        [name, f"{statistics.median(lat):.1f}", f"{p99(lat):.1f}", f"{rate:,.0f}"]
        for name, (lat, rate) in results.items()
    ]
    print(table(header, rows, args.markdown))
    mine_lat, mine_rate = results["mcache AsyncMemcachedStore"]
    em_lat, em_rate = results["emcache"]
    latency_ratio = statistics.median(mine_lat) / statistics.median(em_lat)
    report(
        [
            Figure(
                "AsyncMemcachedStore get ÷ emcache get (p50)",
                f"{statistics.median(mine_lat):.1f} µs",
                f"{statistics.median(em_lat):.1f} µs",
                f"{latency_ratio:.2f}×",
                "",
                None,
            ),
            Figure(
                f"AsyncMemcachedStore ÷ emcache gets/s ({TASKS} tasks)",
                f"{mine_rate:,.0f}/s",
                f"{em_rate:,.0f}/s",
                f"{mine_rate / em_rate:.2f}×",
                "",
                None,
            ),
        ],
        args.figures,
    )


if __name__ == "__main__":
    main()
