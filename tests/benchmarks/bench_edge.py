"""The edge: a stored page answered before Django runs, against the framework's own floor.

    python -m tests.benchmarks.bench_edge [--seconds 5] [--rounds 3] [--markdown]

One page (a query and ~3 KB of HTML, ``tests/benchmarks/django_site``) on one memcached,
served four ways in one run: behind ``mcache.edge`` (the stored page answered before
Django builds a request), by ``@cached_view`` inside Django, by Django's ``cache_page``,
and the trivial uncached view (the same HTML, no query, no cache: the most requests/s
Django serves here, which no cache inside a view can beat), and a bare WSGI or ASGI
function sending the same HTML (the server's own floor, which nothing in the application
can pass). Under gunicorn (2 gthread workers × 4 threads) with the sync view, and under
one uvicorn worker with the ``async def`` view (and ``cache_page`` on the sync one, in a
thread, as Django runs it). The load generator is bench_django's (asyncio, keep-alive
connections balanced over the workers), in rounds that alternate the pages; every
request after the first is a hit. It shares the machine's two cores with the server, so
the fastest rows are understated, never overstated.

Starts its own memcached, gunicorn and uvicorn on free loopback ports and stops them."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.benchmarks.bench_django import SITE, requests_per_second
from tests.benchmarks.common import Figure, arguments, gunicorn, report, table, uvicorn
from tests.servers import memcached_process

ROOT = Path(__file__).resolve().parents[2]
WSGI_PAGES = {
    "edge (WSGIEdge), the page stored by @cached_view": ("edge", "/mcache/"),
    "@cached_view": ("application", "/mcache/"),
    "cache_page (Django PyMemcacheCache)": ("application", "/django/"),
    "trivial uncached view": ("application", "/plain/"),
    "edge, the page on a cache with a near cache": ("edge", "/near/"),
    "no framework: the same HTML from a bare WSGI function": ("bare", "/"),
}
ASGI_PAGES = {
    "edge (ASGIEdge), the page stored by @cached_view": ("edge", "/async/mcache/"),
    "@cached_view, async def view": ("application", "/async/mcache/"),
    "cache_page (sync view, in a thread)": ("application", "/django/"),
    "trivial uncached async view": ("application", "/async/plain/"),
    "no framework: the same HTML from a bare ASGI function": ("bare", "/"),
}


def _environment(address: str, db: str) -> dict[str, str]:
    env = {**os.environ, "MCACHE_BENCH_MEMCACHED": address, "MCACHE_BENCH_DB": db,
           "DJANGO_SETTINGS_MODULE": f"{SITE}.settings", "PYTHONPATH": str(ROOT)}  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "-v", "0"], env=env, check=True, cwd=ROOT
    )
    return env


def _serve(kind: str, app: str, env: dict[str, str], paths: tuple[str, ...]) -> tuple:
    if kind == "gunicorn":
        return gunicorn(f"{SITE}.wsgi:{app}", env, str(ROOT), paths)
    return uvicorn(f"{SITE}.asgi:{app}", env, str(ROOT), paths)


Rounds = dict[str, list[tuple[float, float]]]
"""Per page: (requests/s, p99 ms) of each round."""


def measure_pages(
    kind: str, pages: dict[str, tuple[str, str]], env: dict[str, str], args: Any
) -> Rounds:
    """Return requests/s and p99 per page and round, the rounds alternating the pages."""
    apps = sorted({app for app, _ in pages.values()})
    servers = {app: _serve(kind, app, env, tuple(p for a, p in pages.values() if a == app))
               for app in apps}  # fmt: skip
    workers = 2 if kind == "gunicorn" else 1
    results: Rounds = {name: [] for name in pages}
    try:
        for round_number in range(args.rounds):
            order = list(pages) if round_number % 2 == 0 else list(reversed(pages))
            for name in order:
                app, page = pages[name]
                latencies: list[float] = []
                port = servers[app][1]
                rate = requests_per_second(
                    port, page, args.seconds, args.connections, workers, latencies
                )
                p99 = statistics.quantiles(latencies, n=100)[98] * 1000
                results[name].append((rate, p99))
    finally:
        for server, _ in servers.values():
            server.terminate()
            server.wait(10)
    return results


def _median_rate(rounds: list[tuple[float, float]]) -> float:
    return statistics.median(rate for rate, _ in rounds)


def rows_of(results: Rounds) -> list[list[str]]:
    return [
        [
            name,
            f"{_median_rate(got):,.0f}",
            f"{statistics.median(p99 for _, p99 in got):.1f}",
            " / ".join(f"{rate:,.0f}" for rate, _ in got),
        ]
        for name, got in results.items()
    ]


def figures_of(kind: str, results: Rounds) -> list[Figure]:
    edge, _, theirs, trivial, *_ = [_median_rate(got) for got in results.values()]
    return [
        Figure(
            f"edge ÷ cache_page requests/s ({kind})",
            f"{edge:,.0f}/s",
            f"{theirs:,.0f}/s",
            f"{edge / theirs:.2f}×",
            "≥ 3×",
            edge / theirs >= 3,
        ),
        Figure(
            f"edge ÷ trivial uncached view requests/s ({kind})",
            f"{edge:,.0f}/s",
            f"{trivial:,.0f}/s",
            f"{edge / trivial:.2f}×",
            "≥ 1.5×",
            edge / trivial >= 1.5,
        ),
    ]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one load round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    head = "### " if args.markdown else ""
    node = memcached_process().start()
    figures: list[Figure] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = _environment(node.address, str(Path(tmp) / "site.sqlite3"))
            for number, (kind, pages) in enumerate(
                (("gunicorn", WSGI_PAGES), ("uvicorn", ASGI_PAGES)), 1
            ):
                results = measure_pages(kind, pages, env, args)
                runs = f"{args.rounds} × {args.seconds:g} s per page"
                print(
                    f"{head}{number}. {kind}, {args.connections} keep-alive connections, {runs}\n"
                )
                header = ["page", "requests/s (median)", "p99 ms (median)", "rounds"]
                print(table(header, rows_of(results), args.markdown))
                print()
                figures += figures_of(kind, results)
    finally:
        node.kill()
    report(figures, args.figures)


if __name__ == "__main__":
    main()
