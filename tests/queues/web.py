"""The web side of the queue tests: long-lived processes whose threads read keys together.

Each process takes its configuration from the environment it is given (as a
web server's would), imports the builders and keeps its reader threads, so
its connections and its refresher's are warm after the first burst, as a
running site's are. On each signal every thread reads every key once, in its
own order (``report`` or, by ``MCACHE_QUEUE_FUNCTION``, another builder of
:mod:`tests.queues.builders`). A burst reports what each read returned, how long it took, and the
process's pid, after the refresher has sent what it had to send.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import threading
import time
from types import TracebackType
from typing import Any

SPAWN = multiprocessing.get_context("spawn")

Read = tuple[int, str, float]


def builders(env: dict[str, str]) -> Any:
    """Set the process up as the environment says; return the module holding ``report``."""
    os.environ.update(env)
    if env.get("DJANGO_SETTINGS_MODULE"):
        import django

        django.setup()
        from tests.queues import django_builders

        return django_builders
    if env.get("MCACHE_CELERY_BROKER"):
        import tests.queues.celery_app  # noqa: F401  (the Celery app the refresher sends with)
    from tests.queues import builders

    return builders


def serve(env: dict[str, str], keys: int, threads: int, orders: Any, go: Any, results: Any) -> None:
    """A web process: run a burst of reads each time ``orders`` says so, until it says stop."""
    module = builders(env)
    read = getattr(module, env.get("MCACHE_QUEUE_FUNCTION", "report"))
    start, done = threading.Barrier(threads + 1), threading.Barrier(threads + 1)
    values: list[Read] = []
    guard = threading.Lock()
    running = True

    def reader() -> None:
        while True:
            start.wait()
            if not running:
                return
            order = list(range(keys))
            random.shuffle(order)
            for number in order:
                started = time.perf_counter()
                value = read(number)
                took = time.perf_counter() - started
                with guard:
                    values.append((number, value, took))
            done.wait()

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(threads)]
    for thread in readers:
        thread.start()
    results.put(os.getpid())
    while orders.get():
        values.clear()
        results.put(os.getpid())  # ready
        go.wait()
        start.wait()
        done.wait()
        module.cache.refresher.wait_idle(30)
        module.cache.counts.flush()
        results.put((list(values), os.getpid()))
    running = False
    start.wait()


class WebProcesses:
    """``processes`` web processes of ``threads`` threads each, reading ``keys`` keys a burst."""

    def __init__(self, env: dict[str, str], processes: int, threads: int, keys: int) -> None:
        self.go, self.results = SPAWN.Event(), SPAWN.Queue()
        self.orders = [SPAWN.Queue() for _ in range(processes)]
        self.processes = [
            SPAWN.Process(target=serve, args=(env, keys, threads, orders, self.go, self.results))
            for orders in self.orders
        ]

    def __enter__(self) -> WebProcesses:
        for process in self.processes:
            process.start()
        for _ in self.processes:
            self.results.get(timeout=120)  # set up
        return self

    def burst(self) -> tuple[list[Read], set[int]]:
        """All threads of all processes read every key at once; return the reads and the pids."""
        self.go.clear()
        for orders in self.orders:
            orders.put(True)
        for _ in self.processes:
            self.results.get(timeout=120)  # ready
        self.go.set()
        outcomes = [self.results.get(timeout=120) for _ in self.processes]
        self.go.clear()
        return [read for found, _ in outcomes for read in found], {pid for _, pid in outcomes}

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for orders in self.orders:
            orders.put(False)
        for process in self.processes:
            process.join(30)
            if process.is_alive():
                process.kill()


def read_once(env: dict[str, str], numbers: list[int], how: str = "read") -> None:
    """Read each key once (``how="refresh"``: rebuild it now, half of them through
    ``Cache.refresh``, half through the function's ``.refresh``), wait for the
    refresher, print ``{"values": […], "pid": …}``."""
    import json

    module = builders(env)
    read = getattr(module, env.get("MCACHE_QUEUE_FUNCTION", "report"))
    if how == "refresh":
        values = [
            module.cache.refresh(read, number) if index % 2 else read.refresh(number)
            for index, number in enumerate(numbers)
        ]
    else:
        values = [read(number) for number in numbers]
    module.cache.refresher.wait_idle(30)
    print(json.dumps({"values": values, "pid": os.getpid()}))


if __name__ == "__main__":
    import json
    import sys

    read_once(json.loads(sys.argv[1]), json.loads(sys.argv[2]), *sys.argv[3:4])
