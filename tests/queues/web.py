"""The web side of the queue tests: spawned processes whose threads read stale keys together.

Each process takes its configuration from the environment it is given (as a
web server's would), imports the builders, and on a signal has every thread
read every key once, in its own order. It reports what each read returned and
its pid, after its refresher has sent what it had to send.
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any


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


def hammer(env: dict[str, str], keys: int, threads: int, ready: Any, go: Any, results: Any) -> None:
    """Read ``keys`` keys from ``threads`` threads at once; report ((key, value, seconds)…, pid)."""
    module = builders(env)
    values: list[tuple[int, str, float]] = []
    guard = threading.Lock()

    def reader() -> None:
        order = list(range(keys))
        random.shuffle(order)
        go.wait()
        for number in order:
            started = time.perf_counter()
            value = module.report(number)
            took = time.perf_counter() - started
            with guard:
                values.append((number, value, took))

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for worker in workers:
        worker.start()
    ready.put(os.getpid())
    for worker in workers:
        worker.join()
    module.cache.refresher.wait_idle(30)
    module.cache.metrics.flush()
    results.put((values, os.getpid()))


def read_once(env: dict[str, str], numbers: list[int]) -> None:
    """Read each key once, wait for the refresher, print ``{"values": […], "pid": …}``."""
    import json

    module = builders(env)
    values = [module.report(number) for number in numbers]
    module.cache.refresher.wait_idle(30)
    print(json.dumps({"values": values, "pid": os.getpid()}))


if __name__ == "__main__":
    import json
    import sys

    read_once(json.loads(sys.argv[1]), json.loads(sys.argv[2]))
