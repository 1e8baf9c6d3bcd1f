"""``python -m example_project stampede``: many visitors hit a hot page the moment it expires.

Each contender serves the same page, whose backend takes ``--build-seconds``:
Django's ``cache_page`` and ``cache.get_or_set`` on Django's own cache backend,
then mcache's ``@cached_view`` (one visitor rebuilds, or a background refresh)
and ``get_or_set`` on ``MCacheBackend``, all on the same server. For each, one
request warms the page, the page expires, and ``--clients`` requests are
released at once from ``--processes`` worker processes (threads in each, as in
a threaded WSGI server), each through Django's whole request cycle (the test
client: middleware, view, cache; no sockets). The table counts backend builds,
latency, and the answers that were the expired page (stale) rather than a
fresh build.

The store is ``--store``, else ``MCACHE_URL``, else a private memcached started
on a free loopback port when the ``memcached`` binary is installed. With only
the in-process ``memory://`` store, processes cannot share a cache, so the
demo runs one process (threads only) and says so. Keys go under a prefix of
their own for each run, so a server other things use is never emptied.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import queue
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from django.urls import path

__all__ = ["CONTENDERS", "Result", "main", "run"]

CONTENDERS = {
    "/django/cache_page/": "Django cache_page",
    "/django/get_or_set/": "Django get_or_set",
    "/mcache/cached_view/": "mcache @cached_view",
    "/mcache/background/": "mcache @cached_view, background",
    "/mcache/get_or_set/": "mcache get_or_set",
}
TTL = 1  # seconds a page is fresh: Django's timeout, mcache's ttl
STALE_TTL = 600  # mcache keeps an expired page this much longer, to serve while rebuilding

_build_seconds = float(os.environ.get("MCACHE_STAMPEDE_BUILD", "1.0"))
_builds: dict[str, int] = {}
_builds_lock = threading.Lock()


def _page(request) -> object:
    """The hot page: the latest posts, behind a backend that takes ``_build_seconds``."""
    from django.http import HttpResponse

    from example_project.blog.models import Post

    with _builds_lock:
        _builds[request.path] = _builds.get(request.path, 0) + 1
    titles = list(Post.objects.values_list("title", flat=True)[:10])
    time.sleep(_build_seconds)  # the slow query a real page would wait for
    return HttpResponse(f"built-at:{time.time():.6f}\n" + "\n".join(titles))


def _get_or_set_view(alias: str):
    def view(request) -> object:
        from django.core.cache import caches
        from django.http import HttpResponse

        body = caches[alias].get_or_set(
            f"stampede:{alias}", lambda: _page(request).content.decode(), TTL
        )
        return HttpResponse(body)

    return view


def _urlpatterns() -> list:
    from django.views.decorators.cache import cache_page

    from django_mcache.views import cached_view

    return [
        path("django/cache_page/", cache_page(TTL, cache="django")(_page)),
        path("django/get_or_set/", _get_or_set_view("django")),
        path("mcache/cached_view/", cached_view(TTL, stale_ttl=STALE_TTL)(_page)),
        path(
            "mcache/background/",
            cached_view(TTL, stale_ttl=STALE_TTL, refresh="background", key_prefix="bg")(_page),
        ),
        path("mcache/get_or_set/", _get_or_set_view("default")),
    ]


urlpatterns: list = []  # filled by _configure, once Django is set up


def _django_cache(url: str) -> dict:
    """Django's own backend on the same server as mcache's store."""
    if url.startswith("memcached://"):
        servers = url.removeprefix("memcached://").split("?")[0].split(",")
        locations = [s.rsplit(":", 1)[0] if s.count(":") == 2 else s for s in servers]  # no weight
        return {
            "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
            "LOCATION": locations,
        }
    if url.startswith(("redis://", "rediss://")):
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}


def check_store(url: str) -> str | None:
    """Return why the demo cannot run on ``url``, or None."""
    if url.startswith(("memcached://", "redis://", "rediss://", "memory://")):
        return None
    return f"--store must be memcached://, redis:// or memory:// (for Django's too), not {url!r}"


def _configure(store: str, build_seconds: float, prefix: str) -> None:
    """Set Django up on the example's settings, with both caches on ``store`` under ``prefix``.

    A fresh prefix per run instead of ``clear()``: the demo may run on a
    server other things use, and must not empty it.
    """
    global _build_seconds
    _build_seconds = build_seconds
    os.environ["MCACHE_URL"] = store
    os.environ["DJANGO_SETTINGS_MODULE"] = "example_project.settings"
    from django.conf import settings

    settings.CACHES = {
        "default": {
            "BACKEND": "django_mcache.backend.MCacheBackend",
            "LOCATION": store,
            "KEY_PREFIX": prefix,
            "OPTIONS": {"stale_ttl": STALE_TTL, "wait": 2 * build_seconds + 1},
        },
        "django": {**_django_cache(store), "KEY_PREFIX": f"{prefix}-django"},
    }
    settings.ROOT_URLCONF = __name__
    import django

    django.setup()
    urlpatterns[:] = _urlpatterns()


@dataclass
class Result:
    """What one contender's burst of requests did."""

    contender: str
    clients: int
    builds: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    stale: int
    errors: int


def _request(page: str, released: float, ready: threading.Barrier, go) -> tuple[float, bool, bool]:
    """Return (latency ms, answered with the expired page, error) for one GET."""
    from django.test import Client

    client = Client()
    ready.wait()
    go.wait()
    start = time.perf_counter()
    try:
        response = client.get(page)
        built_at = float(response.content.split(b"\n", 1)[0].removeprefix(b"built-at:"))
        failed = response.status_code != 200
    except Exception:  # counted as an error, never a request lost from the table
        return (time.perf_counter() - start) * 1000, False, True
    return (time.perf_counter() - start) * 1000, built_at < released and not failed, failed


def percentile(values: list[float], share: float) -> float:
    """Return the nearest-rank percentile: a latency some request really had (0 for none)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)] if ordered else 0.0


def _serve_burst(page: str, threads: int, released: float, go, events) -> None:
    """Start ``threads`` requests that wait for ``go``; report each as it completes."""
    ready = threading.Barrier(threads + 1)

    def one() -> None:
        events.put(("done", _request(page, released, ready, go)))

    pool = [threading.Thread(target=one) for _ in range(threads)]
    for thread in pool:
        thread.start()
    ready.wait()  # every thread has its client and is about to wait for go
    events.put(("armed", threads))
    for thread in pool:
        thread.join()


def _worker(store: str, build_seconds: float, prefix: str, commands, events, go) -> None:
    """One 'web worker' process: serve each burst it is given with that many threads."""
    from django.core.cache import caches

    _configure(store, build_seconds, prefix)
    refresher = caches["default"].mcache.refresher
    events.put(("ready", os.getpid()))
    while (command := commands.get()) is not None:
        page, threads, released = command
        with _builds_lock:
            before = _builds.get(page, 0)
        _serve_burst(page, threads, released, go, events)
        if hasattr(refresher, "wait_idle"):  # a background rebuild counts once it has run
            refresher.wait_idle(build_seconds + 10)
        with _builds_lock:
            events.put(("builds", _builds.get(page, 0) - before))


@contextlib.contextmanager
def private_memcached() -> Iterator[str | None]:
    """Yield ``memcached://127.0.0.1:<port>`` of a memcached started here, or None."""
    binary = shutil.which("memcached")
    if binary is None:
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64"]
    if os.geteuid() == 0:
        argv += ["-u", "nobody"]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while server.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                yield f"memcached://127.0.0.1:{port}"
                return
            time.sleep(0.05)
        raise RuntimeError(f"could not start memcached on 127.0.0.1:{port}; pass --store")
    finally:
        server.kill()
        server.wait()


def _burst(page: str, clients: int, processes: int, channels, on_done) -> Result:
    """Warm ``page``, let it expire, release ``clients`` requests at once; measure."""
    from django.test import Client

    commands, events, go = channels
    Client().get(page)  # warm: the entry every contender then sees expire
    time.sleep(TTL + 1.1)  # memcached expires on whole seconds
    released = time.time()
    go.clear()
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    for share in shares:
        commands.put((page, share, released))
    armed = builds = 0
    outcomes: list[tuple[float, bool, bool]] = []
    reports = 0
    while reports < processes:
        kind, payload = events.get(timeout=120)
        if kind == "armed":
            armed += payload
            if armed == clients:
                go.set()
        elif kind == "done":
            outcomes.append(payload)
            on_done()
        elif kind == "builds":
            builds += payload
            reports += 1
    took = sorted(o[0] for o in outcomes)
    return Result(
        CONTENDERS[page],
        clients,
        builds,
        round(percentile(took, 0.50), 1),
        round(percentile(took, 0.99), 1),
        round(took[-1], 1),
        sum(o[1] for o in outcomes),
        sum(o[2] for o in outcomes),
    )


def run(
    store: str, clients: int, processes: int, build_seconds: float, progress=None
) -> list[Result]:
    """Run every contender on ``store``; return one Result each.

    ``progress``, when given, is called as ``progress(contender, done, clients)``.
    """
    prefix = f"stampede-{secrets.token_hex(4)}"
    _configure(store, build_seconds, prefix)
    from example_project.seed import migrate_and_seed

    migrate_and_seed()
    context = multiprocessing.get_context("spawn")
    commands, events, go = context.Queue(), context.Queue(), context.Event()
    workers = [
        context.Process(
            target=_worker,
            args=(store, build_seconds, prefix, commands, events, go),
            daemon=True,
        )
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            kind, _pid = events.get(timeout=120)
            assert kind == "ready", kind
        results = []
        for page, name in CONTENDERS.items():
            done = 0

            def tick(name: str = name) -> None:
                nonlocal done
                done += 1
                if progress is not None:
                    progress(name, done, clients)

            results.append(_burst(page, clients, processes, (commands, events, go), tick))
        return results
    finally:
        for _ in workers:
            commands.put(None)
        for worker in workers:
            worker.join(timeout=10)
            if worker.is_alive():
                worker.kill()
        with contextlib.suppress(queue.Empty, OSError, ValueError):
            events.get_nowait()


SINGLE_FLIGHT = {
    "lease": "memcached's own lease, won in the read itself (the meta protocol)",
    "lock": "a lock key taken with the store's atomic add",
}
"""What elected the one visitor who rebuilds, by :attr:`mcache.Cache.single_flight`."""


def single_flight() -> str:
    """Say how mcache's cache (configured by :func:`run`) elected its one builder."""
    from django.core.cache import caches

    return SINGLE_FLIGHT[caches["default"].mcache.single_flight]


def _render(
    results: list[Result], store: str, processes: int, build_seconds: float, elected: str
) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    clients = results[0].clients
    table = Table(
        title=f"{clients} visitors on an expired page: {processes} process(es), {store},"
        f" a {build_seconds:g} s backend",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("contender", no_wrap=True)
    for column in ("backend builds", "p50 ms", "p99 ms", "max ms", "stale answers", "errors"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r.contender,
            str(r.builds),
            *(f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" for ms in (r.p50_ms, r.p99_ms, r.max_ms)),
            str(r.stale),
            str(r.errors),
        )
    console = Console()
    if not console.is_terminal:  # a pipe or a file: rich would assume 80 columns
        console = Console(width=max(console.width, 100))
    console.print(table)
    console.print(
        "backend builds: runs of the page's backend during the burst (background ones"
        " included); stale answers: the expired page; p99 is nearest-rank, a latency some"
        " request had.\n"
        "Django's backends keep no expired value, so every visitor who misses runs the backend."
        f" mcache lets one visitor rebuild (elected here by {elected}) and serves the expired"
        " page to the others; with a background refresh no visitor waits at all."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m example_project stampede", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--build-seconds", type=float, default=1.0)
    parser.add_argument("--store", help="memcached://host:port or redis://host:port/db")
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.processes < 1:
        parser.error("--clients and --processes must be at least 1")
    store = args.store or os.environ.get("MCACHE_URL")
    with contextlib.ExitStack() as servers:
        if store is None:  # a private memcached when the machine has one, else memory://
            store = servers.enter_context(private_memcached()) or "memory://"
        if (problem := check_store(store)) is not None:
            parser.error(problem)
        processes = min(args.processes, args.clients)
        if store.startswith("memory:"):
            print("No memcached or Redis: one process (threads only) on the memory store.")
            processes = 1
        from rich.progress import BarColumn, MofNCompleteColumn, Progress

        with Progress("{task.description}", BarColumn(), MofNCompleteColumn()) as bars:
            tasks = {name: bars.add_task(name, total=args.clients) for name in CONTENDERS.values()}
            results = run(
                store,
                args.clients,
                processes,
                args.build_seconds,
                lambda name, done, total: bars.update(tasks[name], completed=done),
            )
        _render(results, store, processes, args.build_seconds, single_flight())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump([asdict(r) for r in results], out, indent=2)
    return 0
