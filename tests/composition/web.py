"""The web side of the composition site: long-lived processes that run what a test asks.

Each process sets itself up from the environment it is given (the cell), as
a web server's would, imports :mod:`tests.composition.site_app` and keeps its
cache, so its connections, near cache and refresher are warm from one
request to the next. Every command runs on a thread of its own, so a test can
ask one process to rebuild a key while it asks another (or the same) to
invalidate it. A burst reads keys on many threads at once, with the cell's
driver: ``get_or_build`` or, per thread, an event loop awaiting
``aget_or_build``.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import random
import threading
import time
import traceback
from types import TracebackType
from typing import Any

SPAWN = multiprocessing.get_context("spawn")
Keys = list[tuple[str, int]]


def _setup(env: dict[str, str]) -> Any:
    os.environ.update(env)
    if env.get("DJANGO_SETTINGS_MODULE"):
        import django

        django.setup()
    from tests.composition import site_app

    return site_app


def _burst(site: Any, command: dict[str, Any]) -> list[tuple[str, int, str, float]]:
    """``threads`` threads each read every key once, in its own order, from ``at`` on."""
    driver = os.environ.get("MCACHE_CELL_DRIVER", "sync")
    function = site.BUILDERS[driver][command.get("fn", "page")]
    keys: Keys = [tuple(key) for key in command["keys"]]  # type: ignore[misc]
    reads: list[tuple[str, int, str, float]] = []
    guard = threading.Lock()

    async def read_async(order: Keys) -> None:
        for rule, number in order:
            started = time.perf_counter()
            value = await function(rule, number)
            with guard:
                reads.append((rule, number, value, time.perf_counter() - started))

    def reader() -> None:
        order = random.sample(keys, len(keys))
        time.sleep(max(0.0, command.get("at", 0) - time.time()))
        if driver == "async":
            asyncio.run(read_async(order))
            return
        for rule, number in order:
            started = time.perf_counter()
            value = function(rule, number)
            with guard:
                reads.append((rule, number, value, time.perf_counter() - started))

    threads = [threading.Thread(target=reader) for _ in range(command.get("threads", 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return reads


def _run(site: Any, command: dict[str, Any]) -> Any:
    cache, op = site.cache, command["op"]
    driver = os.environ.get("MCACHE_CELL_DRIVER", "sync")
    page = site.BUILDERS[driver][command.get("fn", "page")]  # its keys are this driver's
    if op == "read":
        return _burst(site, command)
    if op == "refresh":  # half through Cache.refresh, half through the function's .refresh
        return [
            cache.refresh(page, *key) if index % 2 else page.refresh(*key)
            for index, key in enumerate(command["keys"])
        ]
    if op == "idle":
        return cache.refresher.wait_idle(30)
    if op == "invalidate":
        return cache.invalidate(*command["tags"])
    if op == "delete":
        return cache.delete(page.key(*command["key"]))
    if op == "set":
        return cache.set(page.key(*command["key"]), command["value"], 600)
    if op == "get":  # the fresh value, or None
        return cache.get(page.key(*command["key"]), None)
    if op == "counts":
        found = cache.store.get_many([site.plain_key(name) for name in command["names"]])
        return {name: int(found.get(site.plain_key(name), b"0")) for name in command["names"]}
    if op == "flag":
        flag = site.plain_key(command["name"])
        if command.get("value") is None:
            return cache.store.delete(flag)
        return cache.store.set(flag, str(command["value"]).encode(), 600)
    raise ValueError(f"unknown command {op!r}")


def serve(env: dict[str, str], inbox: Any, outbox: Any) -> None:
    """A web process: answer each command of ``inbox`` from a thread of its own."""
    site = _setup(env)
    outbox.put(("ready", os.getpid(), None))

    def answer(number: int, command: dict[str, Any]) -> None:
        try:
            outbox.put((number, _run(site, command), None))
        except BaseException:
            outbox.put((number, None, traceback.format_exc()))

    while (message := inbox.get()) is not None:
        threading.Thread(target=answer, args=message, daemon=True).start()


class WebProcess:
    """One web process of the site, asked from the test's process."""

    _numbers = itertools.count()

    def __init__(self, env: dict[str, str]) -> None:
        self.inbox, self.outbox = SPAWN.Queue(), SPAWN.Queue()
        self.process = SPAWN.Process(target=serve, args=(env, self.inbox, self.outbox))
        self.pid = 0
        self._answers: dict[int, tuple[Any, str | None]] = {}

    def start(self) -> WebProcess:
        self.process.start()
        return self

    def wait_ready(self, timeout: float = 120) -> None:
        tag, self.pid, _ = self.outbox.get(timeout=timeout)
        assert tag == "ready"

    def send(self, **command: Any) -> int:
        """Start ``command`` here; return its number, for :meth:`answer`."""
        number = next(self._numbers)
        self.inbox.put((number, command))
        return number

    def answer(self, number: int, timeout: float = 120) -> Any:
        """Wait for command ``number``'s result; raise what it raised."""
        deadline = time.monotonic() + timeout
        while number not in self._answers:
            got, result, error = self.outbox.get(timeout=max(0.1, deadline - time.monotonic()))
            self._answers[got] = (result, error)
        result, error = self._answers.pop(number)
        if error is not None:
            raise AssertionError(f"web process {self.pid} failed:\n{error}")
        return result

    def ask(self, timeout: float = 120, **command: Any) -> Any:
        return self.answer(self.send(**command), timeout)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(10)

    def stop(self) -> None:
        if self.process.is_alive():
            self.inbox.put(None)
            self.process.join(10)
        self.kill()


class WebProcesses:
    """The site's web processes, started together."""

    def __init__(self, env: dict[str, str], count: int) -> None:
        self.env = env
        self.all = [WebProcess(env) for _ in range(count)]

    def __enter__(self) -> WebProcesses:
        for web in self.all:
            web.start()
        for web in self.all:
            web.wait_ready()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for web in self.all:
            web.stop()

    @property
    def pids(self) -> set[int]:
        return {web.pid for web in self.all}

    def burst(self, keys: Keys, threads: int = 4, fn: str = "page") -> list[tuple[str, int, str]]:
        """Every thread of every process reads ``keys`` at once; return (rule, n, value)."""
        at = time.time() + 0.3
        numbers = [
            (web, web.send(op="read", keys=keys, threads=threads, fn=fn, at=at)) for web in self.all
        ]
        reads = [read for web, number in numbers for read in web.answer(number)]
        for web in self.all:
            web.ask(op="idle")
        return [(rule, n, value) for rule, n, value, _ in reads]
