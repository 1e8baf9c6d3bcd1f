"""A cached async Django view under uvicorn: mcache against Django's own cache, in one run.

    python -m tests.benchmarks.bench_asgi [--seconds 5] [--rounds 3] [--connections 64]

The site is ``tests/asgi_site.py``: one ``async def`` view (a ~2 KB page) under
``@cached_view`` (``/mcache/1/``) and under Django's ``cache_page``
(``/django/1/``), served by one uvicorn worker, and the same page with no
cache and no render time (``/plain/1/``): the most requests/s Django and
uvicorn serve here, which no cache can beat. On Redis the anchor is
Django's ``RedisCache``, on memcached its ``PyMemcacheCache``, each on a
server of its own (Redis: the same server, another database), so the
connections each opens can be counted apart. ``wrk`` (1 thread, 64 keep-alive
connections) hits one page after another, in rounds whose order flips each time; every
request after the first is a hit. Figures: requests/s and p99 per page, and
the connections each cache holds to its server at the end.

Starts its own redis-server, memcached and uvicorn on free loopback ports and
stops them; needs ``wrk`` (``apt-get install wrk``).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tests.benchmarks.common import Figure, arguments, report, table, uvicorn, wrk
from tests.servers import ServerProcess, memcached_process, redis_process

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("/mcache/1/", "/django/1/", "/plain/1/")


def redis_connections(port: int) -> dict[int, int]:
    """Return the clients connected to a Redis server, per database (this one's left out)."""
    import redis

    with redis.Redis(port=port) as client:
        me = client.client_id()
        listed = client.client_list()
    counts: dict[int, int] = {}
    for entry in listed:
        if int(entry["id"]) != me:
            counts[int(entry["db"])] = counts.get(int(entry["db"]), 0) + 1
    return counts


def memcached_connections(port: int) -> int:
    """Return the clients connected to a memcached, less the one asking."""
    from pymemcache.client.base import Client

    client = Client(("127.0.0.1", port))
    try:
        return int(client.stats()[b"curr_connections"]) - 1
    finally:
        client.close()


def load(
    port: int,
    seconds: float,
    rounds: int,
    connections: int,
    connected: Callable[[], tuple[int, int]],
) -> tuple[dict[str, list[tuple[float, float]]], tuple[int, int]]:
    """Run wrk on each page in alternating rounds (ABBA); return each page's runs and the
    most connections each cache held to its server while under load (sampled mid-run)."""
    runs: dict[str, list[tuple[float, float]]] = {path: [] for path in PAGES}
    held = [0, 0]
    for round_number in range(rounds):
        order = PAGES if round_number % 2 == 0 else PAGES[::-1]
        for path in order:
            sample = threading.Timer(seconds / 2, _most, (held, connected))
            sample.start()
            load = wrk(port, path, seconds, connections)
            runs[path].append((load.rate, load.p99))
            sample.join()
    return runs, (held[0], held[1])


def _most(held: list[int], connected: Callable[[], tuple[int, int]]) -> None:
    """Raise each of ``held`` to the connections counted now, if more."""
    held[:] = [max(was, now) for was, now in zip(held, connected(), strict=True)]


Setup = tuple[dict[str, str], str, Callable[[], tuple[int, int]]]


def setups(redis: ServerProcess, mine: ServerProcess, theirs: ServerProcess) -> dict[str, Setup]:
    """Return, per store: the site's cache settings, the anchor's name, and what counts the
    connections (mcache's, Django's) each holds to its server."""
    redis_url = f"redis://{redis.address}"
    return {
        "Redis": (
            {"MCACHE_URL": f"{redis_url}/0", "DJANGO_CACHE_LOCATION": f"{redis_url}/1",
             "DJANGO_CACHE_BACKEND": "django.core.cache.backends.redis.RedisCache"},
            "Django RedisCache",
            lambda: tuple(redis_connections(redis.port).get(db, 0) for db in (0, 1)),
        ),
        "memcached": (
            {"MCACHE_URL": f"memcached://{mine.address}", "DJANGO_CACHE_LOCATION": theirs.address,
             "DJANGO_CACHE_BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache"},
            "Django PyMemcacheCache",
            lambda: (memcached_connections(mine.port), memcached_connections(theirs.port)),
        ),
    }  # fmt: skip


def measured(
    setup: Setup, seconds: float, rounds: int, connections: int
) -> tuple[dict[str, list[tuple[float, float]]], tuple[int, int]]:
    """Serve the site with ``setup``'s caches; return each page's runs and the connections."""
    settings, _anchor, connected = setup
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    site_env = {**env, **settings, "ASGI_SITE_RENDER_SECONDS": "0.01"}
    server, port = uvicorn("tests.asgi_site:application", site_env, str(ROOT), PAGES)
    try:
        return load(port, seconds, rounds, connections, connected)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one wrk run")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_asgi needs wrk: apt-get install wrk")
    servers = (redis_process().start(), memcached_process().start(), memcached_process().start())
    rows, figures = [], []
    try:
        for store, setup in setups(*servers).items():
            runs, held = measured(setup, args.seconds, args.rounds, args.connections)
            rate = {p: statistics.median(r for r, _ in runs[p]) for p in PAGES}
            tail = {p: statistics.median(t for _, t in runs[p]) for p in PAGES}
            names = {
                PAGES[0]: f"@cached_view (mcache, {store})",
                PAGES[1]: f"cache_page ({setup[1]})",
                PAGES[2]: "no cache, no render (Django + uvicorn's ceiling)",
            }
            for path, connections in zip(PAGES, [*map(str, held), "—"], strict=True):
                each = " / ".join(f"{r:,.0f}" for r, _ in runs[path])
                rows.append(
                    [names[path], f"{rate[path]:,.0f}", f"{tail[path]:.1f}", connections, each]
                )
            ratio = rate[PAGES[0]] / rate[PAGES[1]]
            goal = 3 if store == "Redis" else 2  # against RedisCache, the CPU-per-hit target
            figures.append(
                Figure(
                    f"@cached_view ÷ cache_page requests/s (uvicorn, {store})",
                    f"{rate[PAGES[0]]:,.0f}/s",
                    f"{rate[PAGES[1]]:,.0f}/s",
                    f"{ratio:.2f}×",
                    f"≥ {goal}×",
                    ratio >= goal,
                )
            )
            ceiling = rate[PAGES[0]] / rate[PAGES[2]]
            figures.append(
                Figure(
                    f"@cached_view ÷ the uncached page's requests/s (uvicorn, {store})",
                    f"{rate[PAGES[0]]:,.0f}/s", f"{rate[PAGES[2]]:,.0f}/s",
                    f"{ceiling:.2f}×", "≥ 1×", ceiling >= 1,
                )
            )  # fmt: skip
    finally:
        for node in servers:
            node.kill()
    head = "### " if args.markdown else ""
    print(f"{head}A cached async view under uvicorn (1 worker), wrk 1 thread,")
    print(
        f"{args.connections} keep-alive connections, {args.rounds} × {args.seconds:g} s per page\n"
    )
    header = [
        "page",
        "requests/s (median)",
        "p99 ms (median)",
        "connections to the cache (most, under load)",
        "rounds",
    ]
    print(table(header, rows, args.markdown))
    report(figures, args.figures)


if __name__ == "__main__":
    main()
