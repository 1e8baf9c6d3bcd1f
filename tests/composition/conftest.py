"""The composition contract's sites: one per cell, shared by the rules run on that cell.

``pytest tests/composition`` runs the cells the task-queue scenario named and
one more (thread refresher, near cache, async driver);
``--matrix=pairs`` a covering selection (every pair of values from two axes
in some cell; CI runs it), ``--matrix=full`` the whole cross product. A site
is real: its store's servers are the session's, its web processes are
spawned, its queue's workers are ``celery worker``, ``rq worker`` or
Django's ``db_worker`` processes on a broker of the site's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.composition.cells import Cell, cells_for
from tests.composition.rules import NEAR_TTL
from tests.composition.web import WebProcesses
from tests.queues.conftest import ROOT, Worker
from tests.servers import ServerProcess, redis_process

PROCESSES, THREADS = 2, 4


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--matrix",
        default=os.environ.get("MCACHE_MATRIX", "default"),
        choices=("default", "pairs", "full"),
        help="the composition contract's cells: default, pairs (CI), full (the cross product)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames:
        cells = cells_for(metafunc.config.getoption("--matrix"))
        applies = getattr(metafunc.function, "applies", lambda cell: True)
        chosen = [cell for cell in cells if applies(cell)]
        metafunc.parametrize(
            "cell",
            [pytest.param(cell, marks=pytest.mark.xdist_group(cell.id)) for cell in chosen],
            ids=[c.id for c in chosen],
            scope="module",
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the contract's rules ``matrix``; a rule no selected cell admits is deselected
    (pytest would otherwise report it skipped, with no cell to run on)."""
    unrun = []
    for item in items:
        if "tests/composition/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.matrix)
            params = getattr(getattr(item, "callspec", None), "params", {})
            if "site" in getattr(item, "fixturenames", ()) and not isinstance(
                params.get("cell"), Cell
            ):
                unrun.append(item)
    if unrun:
        config.hook.pytest_deselected(items=unrun)
        items[:] = [item for item in items if item not in unrun]


class Site:
    """A cell's site: its environment, web processes, workers and broker."""

    def __init__(self, cell: Cell, env: dict[str, str], broker: ServerProcess | None) -> None:
        self.cell, self.env, self.broker = cell, env, broker
        count = PROCESSES if cell.shared else 1
        self.web = WebProcesses(env, count)
        self.workers: list[Worker] = []

    @property
    def first(self) -> Any:
        return self.web.all[0]

    @property
    def last(self) -> Any:
        return self.web.all[-1]

    def worker(self, **extra: str) -> Worker:
        """Start one more worker of the cell's queue (``extra``: its own environment)."""
        env = {**self.env, **extra}
        queue = "mcache-cell"
        if self.cell.refresher == "celery":
            argv = [sys.executable, "-m", "celery", "-A", "tests.composition.celery_app",
                    "worker", "-Q", queue, "-c", "2", "--loglevel=info", "--without-mingle",
                    "--without-gossip", "-n", f"cell-{uuid.uuid4().hex[:6]}@%h"]  # fmt: skip
        elif self.cell.refresher == "rq":
            main = "import tests.composition.site_app; from rq.cli import main; main()"
            argv = [sys.executable, "-c", main, "worker", "-w", "tests.queues.ready.ReadyWorker",
                    "-u", self.broker_url, queue]  # fmt: skip
        else:
            argv = [sys.executable, "-m", "django", "db_worker", "--queue-name", "mcache",
                    "--interval", "0.1", "--no-startup-delay"]  # fmt: skip
        worker = Worker(argv, env).start()
        self.workers.append(worker)
        return worker

    @property
    def broker_url(self) -> str:
        assert self.broker is not None
        return f"redis://{self.broker.address}/0"

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        if self.broker is not None:
            self.broker.kill()


def _store_url(cell: Cell, request: pytest.FixtureRequest, scratch: Path) -> str:
    def fixture(name: str) -> Any:
        return request.getfixturevalue(name)

    if cell.store == "memory":
        return "memory://"
    if cell.store in ("memcached-text", "memcached-meta", "pool-text", "pool-meta"):
        nodes = fixture("memcached_nodes")[: 1 if cell.store.startswith("memcached") else 3]
        url = "memcached://" + ",".join(node.address for node in nodes)
        options = ["protocol=text"] if cell.store.endswith("text") else []
        options += ["replicas=2"] if cell.store.startswith("pool") else []
        return url + ("?" + "&".join(options) if options else "")
    if cell.store in ("redis", "alias"):
        return f"redis://{fixture('redis_node').address}/0"
    if cell.store == "sentinel":
        return str(fixture("sentinel_group").url())
    if cell.store == "cluster":
        return str(fixture("cluster_group").url())
    postgres = f"postgresql://postgres@{fixture('postgres_node').address}/postgres"
    if cell.store == "postgres":
        return postgres
    if cell.store == "sqlite":
        return f"sqlite:///{scratch}/cache.db"
    hot = f"memcached://{fixture('memcached_nodes')[0].address}"
    return f"tiered://?hot={quote(hot, safe='')}&cold={quote(postgres, safe='')}"


@pytest.fixture(scope="module")
def site(
    cell: Cell, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """The cell's site, started once for the rules of this module run on it."""
    scratch = tmp_path_factory.mktemp(cell.id)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.composition.settings",
        MCACHE_CELL_STORE=cell.store,
        MCACHE_CELL_URL=_store_url(cell, request, scratch),
        MCACHE_CELL_REFRESHER=cell.refresher,
        MCACHE_CELL_DRIVER=cell.driver,
        MCACHE_CELL_NAMESPACE=f"c{uuid.uuid4().hex[:8]}",
        MCACHE_TASKS_DB=str(scratch / "tasks.sqlite3"),
    )
    if cell.near == "on":
        env["MCACHE_CELL_NEAR_TTL"] = str(NEAR_TTL)
    broker = redis_process().start() if cell.refresher in ("celery", "rq") else None
    if cell.refresher == "celery":
        assert broker is not None
        env.update(
            MCACHE_CELERY_BROKER=f"redis://{broker.address}/0", MCACHE_CELL_QUEUE="mcache-cell"
        )
    elif cell.refresher == "rq":
        assert broker is not None
        env["MCACHE_CELL_QUEUE"] = f"redis://{broker.address}/0?queue=mcache-cell"
    elif cell.refresher == "tasks":
        env["MCACHE_CELL_QUEUE"] = "mcache"
        migrate = [sys.executable, "-m", "django", "migrate", "-v0"]
        subprocess.run(migrate, cwd=ROOT, env=env, check=True, timeout=120)
    built = Site(cell, env, broker)
    try:
        if cell.queued:
            built.worker()
        with built.web:
            yield built
    finally:
        built.stop()
