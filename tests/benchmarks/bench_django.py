"""The Django adapter against Django's own memcached cache, in one run.

    python -m tests.benchmarks.bench_django [--seconds 5] [--rounds 3] [--markdown]

1. **Backend get.** ``caches["default"].get`` through MCacheBackend and through
   Django's ``PyMemcacheCache`` on the same memcached, each timed alternately
   with a raw pymemcache ``get`` of the same bytes (nothing pinned to a CPU, as
   in every latency benchmark here: alternation keeps drift off the ratio).
2. **A cached page under load.** One view (a query and ~3 KB of HTML) served
   by gunicorn (2 workers, gthread) under ``@cached_view`` and under Django's
   ``cache_page``, both on that memcached, hit by a loopback load generator
   (asyncio, keep-alive connections spread evenly over the two workers) in
   alternating rounds. Every request after the first is a hit; requests/s is
   the figure. The same view on a cache with a near cache (``near_ttl=30``)
   shows what a hit that makes no round trip is worth.

Starts its own memcached and gunicorn on free loopback ports and stops them.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pymemcache.client.base import Client

from tests.benchmarks.common import Figure, arguments, gunicorn, measure, report, table
from tests.servers import memcached_process

ROOT = Path(__file__).resolve().parents[2]
VALUE = {"id": 7, "title": "a cached fragment", "rows": [{"n": i, "s": f"r{i}"} for i in range(30)]}
SITE = "tests.benchmarks.django_site"


# -- 1. backend get ------------------------------------------------------------------------------


def backend_get(address: str, rounds: int, calls: int) -> tuple[list[list[str]], float]:
    """Return the get table and MCacheBackend get ÷ raw pymemcache get."""
    os.environ["MCACHE_BENCH_MEMCACHED"] = address
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", f"{SITE}.settings")
    import django
    from django.core.cache import caches

    django.setup()
    host, port = address.rsplit(":", 1)
    raw = Client((host, int(port)), default_noreply=False, no_delay=True)
    raw.set("bench:anchor", b"v" * len(pickle.dumps(VALUE, pickle.HIGHEST_PROTOCOL)))
    subjects = {
        "MCacheBackend.get": caches["default"],
        "Django PyMemcacheCache.get": caches["django"],
    }
    rows, ratios = [], {}
    for name, cache in subjects.items():
        cache.set("fragment", VALUE, 3600)
        assert cache.get("fragment") == VALUE
        mine, theirs = measure(
            lambda c=cache: c.get("fragment"), lambda: raw.get("bench:anchor"), rounds, calls
        )
        ratio = statistics.median(mine) / statistics.median(theirs)
        ratios[name] = ratio
        rows.append(
            [
                name,
                f"{statistics.median(mine):.1f}",
                f"{statistics.median(theirs):.1f}",
                f"{ratio:.2f}×",
            ]
        )
    return rows, ratios["MCacheBackend.get"]


# -- 2. a cached page under load ---------------------------------------------------------------


def start_site(address: str, db: str) -> tuple[subprocess.Popen[bytes], int]:
    """Migrate the SQLite file and start gunicorn; return the process and its port."""
    env = {**os.environ, "MCACHE_BENCH_MEMCACHED": address, "MCACHE_BENCH_DB": db,
           "DJANGO_SETTINGS_MODULE": f"{SITE}.settings", "PYTHONPATH": str(ROOT)}  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "-v", "0"], env=env, check=True, cwd=ROOT
    )
    return gunicorn(f"{SITE}.wsgi", env, str(ROOT), ("/mcache/", "/near/", "/django/"))


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _get(connection: Connection, path: str) -> bytes:
    """Send one keep-alive GET; return the response head (the body is read and dropped)."""
    reader, writer = connection
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head[:80].decode(errors="replace"))
    fields = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
    await reader.readexactly(int(fields[b"content-length"]))
    return head


async def _balanced(port: int, path: str, count: int, workers: int = 2) -> list[Connection]:
    """Open ``count`` connections spread evenly over the gunicorn workers.

    A worker accepts whatever connections are pending when it wakes, so left
    alone one of two workers often gets all sixteen and the other idles: the
    same page then measured 1,500 or 3,800 requests/s from round to round. Each
    response names its worker (``X-Worker``); a connection to a worker that
    already has its share is closed and opened again.
    """
    kept: list[Connection] = []
    per_worker: dict[bytes, int] = {}
    for _attempt in range(count * 50):
        if len(kept) == count:
            return kept
        connection = await asyncio.open_connection("127.0.0.1", port)
        head = await _get(connection, path)
        worker = next(
            (line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
             if line.lower().startswith(b"x-worker:")), b"?",
        )  # fmt: skip
        if per_worker.get(worker, 0) < count // workers:
            per_worker[worker] = per_worker.get(worker, 0) + 1
            kept.append(connection)
        else:
            connection[1].close()
    raise RuntimeError(f"could not spread {count} connections over {workers} workers")


def requests_per_second(
    port: int,
    path: str,
    seconds: float,
    connections: int,
    workers: int = 2,
    latencies: list[float] | None = None,
) -> float:
    """Hit ``path`` over ``connections`` keep-alive connections (balanced over ``workers``)
    for ``seconds``; each request's seconds go to ``latencies`` if given."""
    counts = [0]

    async def client(connection: Connection, until: float) -> None:
        try:
            while (sent := time.monotonic()) < until:
                await _get(connection, path)
                counts[0] += 1
                if latencies is not None:
                    latencies.append(time.monotonic() - sent)
        finally:
            connection[1].close()

    async def run() -> float:
        pool = await _balanced(port, path, connections, workers)
        started = time.monotonic()
        await asyncio.gather(*(client(c, started + seconds) for c in pool))
        return time.monotonic() - started

    elapsed = asyncio.run(run())
    return counts[0] / elapsed


def page_load(
    address: str, seconds: float, rounds: int, connections: int
) -> tuple[list[list[str]], float, float]:
    """Return the requests/s table, @cached_view ÷ cache_page, and the same with a near cache."""
    with tempfile.TemporaryDirectory() as tmp:
        server, port = start_site(address, str(Path(tmp) / "site.sqlite3"))
        try:
            results: dict[str, list[float]] = {"/mcache/": [], "/near/": [], "/django/": []}
            for _ in range(rounds):
                for path in results:
                    results[path].append(requests_per_second(port, path, seconds, connections))
        finally:
            server.terminate()
            server.wait(10)
    mine, theirs = statistics.median(results["/mcache/"]), statistics.median(results["/django/"])
    near = statistics.median(results["/near/"])
    rounds_of = {path: " / ".join(f"{r:,.0f}" for r in got) for path, got in results.items()}
    rows = [
        ["@cached_view (mcache)", f"{mine:,.0f}", rounds_of["/mcache/"]],
        ["@cached_view, near cache (near_ttl=30)", f"{near:,.0f}", rounds_of["/near/"]],
        ["cache_page (Django PyMemcacheCache)", f"{theirs:,.0f}", rounds_of["/django/"]],
    ]
    return rows, mine / theirs, near / theirs


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one load round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    head = "### " if args.markdown else ""
    node = memcached_process().start()
    try:
        rows, get_ratio = backend_get(node.address, 10, 2000)
        print(f"{head}1. get of a ~1 KB value, one memcached; anchor: raw pymemcache get\n")
        print(table(["get", "p50 µs", "anchor p50 µs", "ratio"], rows, args.markdown))
        print()
        load, load_ratio, near_ratio = page_load(
            node.address, args.seconds, args.rounds, args.connections
        )
        print(f"{head}2. One cached page under load: gunicorn 2 workers (gthread, 4 threads),")
        runs = f"{args.rounds} × {args.seconds:g} s per page"
        print(f"{args.connections} keep-alive connections, {runs}\n")
        print(table(["page", "requests/s (median)", "rounds"], load, args.markdown))
        get_row = rows[0]
        report(
            [
                Figure(
                    "MCacheBackend get ÷ raw get",
                    f"{get_row[1]} µs",
                    f"{get_row[2]} µs",
                    f"{get_ratio:.2f}×",
                    "≤ 1.2×",
                    get_ratio <= 1.2,
                ),
                Figure(
                    "@cached_view ÷ cache_page requests/s (gunicorn)",
                    f"{load[0][1]}/s",
                    f"{load[2][1]}/s",
                    f"{load_ratio:.2f}×",
                    "≥ 1.2×",
                    load_ratio >= 1.2,
                ),
                Figure(
                    "@cached_view with a near cache ÷ cache_page requests/s",
                    f"{load[1][1]}/s",
                    f"{load[2][1]}/s",
                    f"{near_ratio:.2f}×",
                    "",
                    None,
                ),
            ],
            args.figures,
        )
    finally:
        node.kill()


if __name__ == "__main__":
    main()
