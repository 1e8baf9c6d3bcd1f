"""Where background rebuilds run: threads of this process, or a task queue's workers.

A refresher (``Refresher``) takes a rebuild job and returns whether it accepted it; a
queue refresher sends what :meth:`~mcache.engine.rebuild.Rebuild.hand_off` gives instead of
calling the job. By name: ``"thread"`` (the default), ``"celery"``, ``"rq"``, ``"tasks"``
(Django's Tasks), each queue's package imported only when named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache import lazy_exports
from mcache.contract.refresher import Refresher
from mcache.engine.rebuild import run as run_job

if TYPE_CHECKING:
    from mcache.refreshers.celery import CeleryRefresher
    from mcache.refreshers.named import NAMES, refresher_named
    from mcache.refreshers.queued import QueueRefresher
    from mcache.refreshers.rq import RQRefresher
    from mcache.refreshers.tasks import TasksRefresher
    from mcache.refreshers.thread import ThreadPoolRefresher

__all__ = [
    "NAMES",
    "CeleryRefresher",
    "QueueRefresher",
    "RQRefresher",
    "Refresher",
    "TasksRefresher",
    "ThreadPoolRefresher",
    "refresher_named",
    "run_job",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CeleryRefresher": "mcache.refreshers.celery",
        "NAMES": "mcache.refreshers.named",
        "refresher_named": "mcache.refreshers.named",
        "QueueRefresher": "mcache.refreshers.queued",
        "RQRefresher": "mcache.refreshers.rq",
        "TasksRefresher": "mcache.refreshers.tasks",
        "ThreadPoolRefresher": "mcache.refreshers.thread",
    },
)
