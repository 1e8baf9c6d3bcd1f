"""The edge: a stored page answered before Django runs, against the framework's own floor.

    python -m tests.benchmarks.bench_edge [--seconds 5] [--rounds 3] [--markdown]

One page (a query and ~3 KB of HTML, ``tests/benchmarks/django_site``) on one memcached,
served several ways in one run: behind ``mcache.edge`` (the stored page answered before
Django builds a request), on the cache alone and on a cache with a near tier; by
``@cached_view`` inside Django; by Django's ``cache_page``; as the trivial uncached view
(the same HTML, no query, no cache: the most requests/s Django serves here, which no
cache inside a view can beat); and from a bare WSGI or ASGI function sending the same
HTML (the server's own floor, which nothing in the application can pass). Under gunicorn
with one sync worker and the sync view, and under one uvicorn worker with the
``async def`` view (``cache_page`` on the sync one, in a thread, as Django runs it).

One worker process, so the server can use one of the machine's two cores and ``wrk``
(written in C, cheap per request) and memcached have the other: the worker is kept busy
(the "busy" column: its CPU seconds over the round's seconds, from ``/proc``), so its
requests/s are what one worker process serves, not what the load generator could send.
With two workers the load generator takes its share of the same two cores from every
row alike, which pulls every ratio toward 1. The "CPU per request" column is the
worker's own CPU per request, whatever shares the machine. Rounds alternate the pages;
every request after the first is a hit. Nothing is pinned.

Starts its own memcached, gunicorn and uvicorn on free loopback ports and stops them;
needs ``wrk`` (``apt-get install wrk``)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from tests.benchmarks.bench_django import SITE
from tests.benchmarks.common import (
    Figure,
    arguments,
    cpu_seconds,
    gunicorn,
    report,
    table,
    uvicorn,
    wrk,
)
from tests.servers import memcached_process, redis_process

ROOT = Path(__file__).resolve().parents[2]
EDGE, EDGE_NEAR, EDGE_PUSHED = "edge", "edge, near", "edge, near, pushed"
CACHE_PAGE, TRIVIAL = "cache_page", "trivial"
"""The rows the figures compare, by role."""
WSGI_PAGES = {
    "edge (WSGIEdge), the page stored by @cached_view": (EDGE, "edge", "/mcache/"),
    "edge, the page on memcached with a near tier": (EDGE_NEAR, "edge", "/near/"),
    "edge, the page on Redis with a near tier (invalidations pushed)": (
        EDGE_PUSHED,
        "edge",
        "/redis-near/",
    ),
    "@cached_view": ("", "application", "/mcache/"),
    "cache_page (Django PyMemcacheCache)": (CACHE_PAGE, "application", "/django/"),
    "trivial uncached view": (TRIVIAL, "application", "/plain/"),
    "no framework: the same HTML from a bare WSGI function": ("", "bare", "/"),
}
ASGI_PAGES = {
    "edge (ASGIEdge), the page stored by @cached_view": (EDGE, "edge", "/async/mcache/"),
    "edge, the page on memcached with a near tier": (EDGE_NEAR, "edge", "/async/near/"),
    "edge, the page on Redis with a near tier (invalidations pushed)": (
        EDGE_PUSHED,
        "edge",
        "/async/redis-near/",
    ),
    "@cached_view, async def view": ("", "application", "/async/mcache/"),
    "cache_page (sync view, in a thread)": (CACHE_PAGE, "application", "/django/"),
    "trivial uncached async view": (TRIVIAL, "application", "/async/plain/"),
    "no framework: the same HTML from a bare ASGI function": ("", "bare", "/"),
}


class Round(NamedTuple):
    """One page's round: what wrk saw and what the worker spent."""

    rate: float
    p99: float
    cpu_us: float
    """The server's CPU per request, in µs."""
    busy: float
    """The server's CPU seconds over the round's seconds."""


def _environment(address: str, db: str, redis: str = "") -> dict[str, str]:
    env = {**os.environ, "MCACHE_BENCH_MEMCACHED": address, "MCACHE_BENCH_DB": db,
           **({"MCACHE_BENCH_REDIS": redis} if redis else {}),
           "DJANGO_SETTINGS_MODULE": f"{SITE}.settings", "PYTHONPATH": str(ROOT)}  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "-v", "0"], env=env, check=True, cwd=ROOT
    )
    return env


def _serve(kind: str, app: str, env: dict[str, str], paths: tuple[str, ...]) -> tuple:
    if kind == "gunicorn":
        return gunicorn(f"{SITE}.wsgi:{app}", env, str(ROOT), paths, sync_workers=1)
    return uvicorn(f"{SITE}.asgi:{app}", env, str(ROOT), paths)


def _round(server: subprocess.Popen, port: int, path: str, args: Any) -> Round:
    spent, started = cpu_seconds(server.pid), time.monotonic()
    load = wrk(port, path, args.seconds, args.connections)
    spent, took = cpu_seconds(server.pid) - spent, time.monotonic() - started
    return Round(load.rate, load.p99, spent / max(load.requests, 1) * 1e6, spent / took)


Rounds = dict[str, list[Round]]


def measure_pages(kind: str, pages: dict[str, tuple[str, str, str]], env: dict[str, str],
                  args: Any) -> Rounds:  # fmt: skip
    """Return each page's rounds, the rounds alternating the pages."""
    apps = sorted({app for _, app, _ in pages.values()})
    servers = {app: _serve(kind, app, env, tuple(p for _, a, p in pages.values() if a == app))
               for app in apps}  # fmt: skip
    results: Rounds = {name: [] for name in pages}
    try:
        for round_number in range(args.rounds):
            order = list(pages) if round_number % 2 == 0 else list(reversed(pages))
            for name in order:
                _, app, path = pages[name]
                server, port = servers[app]
                results[name].append(_round(server, port, path, args))
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(10)
    return results


def _median(rounds: list[Round], field: str) -> float:
    return statistics.median(getattr(each, field) for each in rounds)


def rows_of(results: Rounds) -> list[list[str]]:
    return [
        [
            name,
            f"{_median(got, 'rate'):,.0f}",
            f"{_median(got, 'p99'):.1f}",
            f"{_median(got, 'cpu_us'):,.0f}",
            f"{_median(got, 'busy'):.0%}",
            " / ".join(f"{each.rate:,.0f}" for each in got),
        ]
        for name, got in results.items()
    ]


def figures_of(kind: str, pages: dict[str, tuple[str, str, str]], results: Rounds) -> list[Figure]:
    rate = {pages[name][0]: _median(got, "rate") for name, got in results.items()}
    figures = []
    for role, which in ((EDGE_PUSHED, "the edge on Redis with a near tier"),
                        (EDGE_NEAR, "the edge on memcached with a near tier"),
                        (EDGE, "the edge on memcached")):  # fmt: skip
        for anchor, anchor_name, target in ((CACHE_PAGE, "cache_page", 3.0),
                                            (TRIVIAL, "trivial uncached view", 1.5)):  # fmt: skip
            ratio = rate[role] / rate[anchor]
            figures.append(Figure(
                f"{which} ÷ {anchor_name} requests/s ({kind})", f"{rate[role]:,.0f}/s",
                f"{rate[anchor]:,.0f}/s", f"{ratio:.2f}×", f"≥ {target:g}×", ratio >= target,
            ))  # fmt: skip
    return figures


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one load round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_edge needs wrk: apt-get install wrk")
    head = "### " if args.markdown else ""
    node, redis = memcached_process().start(), redis_process().start()
    figures: list[Figure] = []
    servers = ("gunicorn, 1 sync worker", "uvicorn, 1 worker")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = _environment(node.address, str(Path(tmp) / "site.sqlite3"), redis.address)
            for number, (kind, pages) in enumerate(
                (("gunicorn", WSGI_PAGES), ("uvicorn", ASGI_PAGES)), 1
            ):
                results = measure_pages(kind, pages, env, args)
                runs = f"{args.rounds} × {args.seconds:g} s per page"
                print(f"{head}{number}. {servers[number - 1]}, wrk with "
                      f"{args.connections} connections, {runs}\n")  # fmt: skip
                header = ["page", "requests/s (median)", "p99 ms", "CPU per request µs",
                          "busy", "rounds"]  # fmt: skip
                print(table(header, rows_of(results), args.markdown))
                print()
                figures += figures_of(kind, pages, results)
    finally:
        node.kill()
        redis.kill()
    report(figures, args.figures)


if __name__ == "__main__":
    main()
