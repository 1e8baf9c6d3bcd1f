"""Soak: the example site under load while a memcached node dies and comes back.

    python -m tests.benchmarks.soak [--seconds 60] [--connections 16] [--markdown]

Starts three memcached on loopback, migrates and seeds the example blog into a
temporary SQLite file, serves it with gunicorn (2 workers, gthread) on the
three-node pool (failover after one refused connection, a dead node retried
after 2 s), and drives it for ``--seconds`` from a loopback load generator
(keep-alive connections walking the home page, blog lists, posts, the
calendar and the feed; a tag bump every 5 s forces rebuilds). One node is
SIGKILLed at a third of the run and restarted, empty, at two thirds. Reported:
requests served, errors (any answer but 200, or a broken connection; target
0), p50/p99 latency per 10 s window, and the backend builds mcache counted.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from example_project.stampede import percentile
from mcache import Cache
from tests.benchmarks.common import Figure, arguments, gunicorn, report, table
from tests.servers import ServerProcess, memcached_process

ROOT = Path(__file__).resolve().parents[2]
PATHS = [
    "/",
    "/blogs/cooking/",
    "/blogs/astronomy/?page=2",
    "/blogs/gardens/?page=3",
    "/calendar/",
    "/feed/",
    *(f"/posts/{pk}/" for pk in range(1, 121, 7)),
]
POOL_OPTIONS = "connect_timeout=0.2&timeout=0.5&retry_attempts=1&dead_timeout=2"


def start_site(url: str, db: str) -> tuple[subprocess.Popen[bytes], int]:
    """Prepare the database and start gunicorn on the example; return it and its port."""
    env = {
        **os.environ,
        "MCACHE_URL": url,
        "MCACHE_EXAMPLE_DB": db,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "PYTHONPATH": str(ROOT),
    }
    prepare = "from example_project.__main__ import prepare; prepare()"
    subprocess.run([sys.executable, "-c", prepare], env=env, check=True, cwd=ROOT)
    return gunicorn("example_project.wsgi", env, str(ROOT))


Sample = tuple[float, float, bool]  # (seconds since start, latency ms, ok)


async def _client(port: int, offset: int, started: float, until: float, out: list[Sample]) -> None:
    """Walk PATHS over one keep-alive connection, reconnecting after any failure."""
    n = offset
    connection = None
    while time.monotonic() < until:
        path = PATHS[n % len(PATHS)]
        n += 1
        sent = time.monotonic()
        ok = False
        try:
            if connection is None:
                connection = await asyncio.open_connection("127.0.0.1", port)
            reader, writer = connection
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
            fields = dict(
                line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line
            )
            await reader.readexactly(int(fields.get(b"content-length", b"0")))
            ok = head.startswith(b"HTTP/1.1 200")
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError):
            if connection is not None:
                connection[1].close()
            connection = None
        out.append((sent - started, (time.monotonic() - sent) * 1000, ok))
    if connection is not None:
        connection[1].close()


def load(port: int, seconds: float, connections: int, events: list) -> list[Sample]:
    """Drive the site for ``seconds``; ``events`` (at, callable) run on the way."""
    samples: list[Sample] = []
    started = time.monotonic()
    timers = [threading.Timer(at, action) for at, action in events]
    for timer in timers:
        timer.start()

    async def run() -> None:
        until = started + seconds
        await asyncio.gather(
            *(_client(port, i * 3, started, until, samples) for i in range(connections))
        )

    asyncio.run(run())
    for timer in timers:
        timer.join()
    return samples


def windows(samples: list[Sample], seconds: float, width: float = 10.0) -> list[list[str]]:
    """One row per window: requests, errors, p50, p99, max."""
    rows = []
    for start in range(0, math.ceil(seconds), int(width)):
        inside = [s for s in samples if start <= s[0] < start + width]
        latencies = [s[1] for s in inside]
        rows.append(
            [
                f"{start}–{start + int(width)} s",
                f"{len(inside):,}",
                str(sum(not s[2] for s in inside)),
                f"{percentile(latencies, 0.5):.1f}",
                f"{percentile(latencies, 0.99):.1f}",
                f"{max(latencies, default=0.0):.1f}",
            ]
        )
    return rows


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    nodes: list[ServerProcess] = [memcached_process().start() for _ in range(3)]
    url = "memcached://" + ",".join(n.address for n in nodes) + "?" + POOL_OPTIONS
    victim = nodes[1]
    kill_at, restart_at = args.seconds / 3, 2 * args.seconds / 3
    bumper = Cache(url, namespace="example")
    bumps = [
        (at, lambda: bumper.invalidate("calendar", "feed")) for at in range(5, int(args.seconds), 5)
    ]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            server, port = start_site(url, str(Path(tmp) / "soak.sqlite3"))
            try:
                events = [(kill_at, victim.kill), (restart_at, victim.restart), *bumps]
                samples = load(port, args.seconds, args.connections, events)
            finally:
                server.terminate()  # its workers flush their statistics as they exit
                server.wait(20)
        builds = Cache(url, namespace="example").stats()["cache"]["builds"]
    finally:
        for node in nodes:
            node.kill()
    errors = sum(not ok for _, _, ok in samples)
    print(
        f"example site, gunicorn 2 workers × 4 threads, {args.connections} keep-alive"
        f" connections, {args.seconds:g} s; memcached {victim.address} killed at"
        f" {kill_at:g} s, restarted empty at {restart_at:g} s; a tag bump every 5 s\n"
    )
    header = ["window", "requests", "errors", "p50 ms", "p99 ms", "max ms"]
    print(table(header, windows(samples, args.seconds), args.markdown))
    print(
        f"\nrequests: {len(samples):,}; errors: {errors}; backend builds (mcache stats): {builds}"
    )
    outage = [s[1] for s in samples if kill_at <= s[0] < restart_at]
    before = [s[1] for s in samples if s[0] < kill_at]
    report(
        [
            Figure(
                f"soak: errors in {args.seconds:g} s, a node killed and restarted",
                f"{errors} of {len(samples):,}",
                "",
                "",
                "== 0",
                errors == 0,
            ),
            Figure(
                "soak: p99 with the node down ÷ before",
                f"{percentile(outage, 0.99):.1f} ms",
                f"{percentile(before, 0.99):.1f} ms",
                f"{percentile(outage, 0.99) / max(percentile(before, 0.99), 0.001):.2f}×",
                "",
                None,
            ),
        ],
        args.figures,
    )


if __name__ == "__main__":
    main()
