"""How a queue worker tells the tests it is ready, in no tool's wording.

The tests start each worker with ``MCACHE_WORKER_READY`` naming a file; the
worker creates it once it takes jobs: Celery on its ``worker_ready`` signal,
RQ once its worker has registered (:class:`ReadyWorker`), Django Tasks'
``db_worker`` once its settings are loaded (its jobs wait in the database, so
one queued a moment before its loop starts is taken all the same). A log line
would do too, until a release rewords it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import rq

READY = "MCACHE_WORKER_READY"


def say_ready(**_: Any) -> None:
    """Create the file the tests wait for, if they named one."""
    path = os.environ.get(READY)
    if path:
        Path(path).touch()


class ReadyWorker(rq.Worker):
    """``rq worker -w tests.queues.ready.ReadyWorker``: says it is ready once registered."""

    def register_birth(self, *args: Any, **kwargs: Any) -> None:
        super().register_birth(*args, **kwargs)
        say_ready()
