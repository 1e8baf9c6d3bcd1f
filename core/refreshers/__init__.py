"""Where background rebuilds run: threads of this process, or a task queue's workers.

A refresher is a callable that takes a rebuild job and returns whether it
accepted it (``Refresher``). The job is callable (it rebuilds in this
process); a queue refresher asks it for :meth:`~mcache.engine.rebuild.Rebuild.hand_off`
instead, which gives the data a worker needs (see :mod:`mcache.model.jobs`).

By name, as ``Cache(refresher=…)``, Django's ``OPTIONS["refresher"]`` and Flask's
``MCACHE_REFRESHER`` take them: ``"thread"`` (the default), ``"celery"``,
``"rq"``, ``"tasks"`` (Django's Tasks framework). Each queue needs its package
(an optional extra), imported only when named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcache.contract.refresher import Refresher
from mcache.engine.rebuild import run as run_job
from mcache.errors import ConfigError
from mcache.refreshers.thread import ThreadPoolRefresher

if TYPE_CHECKING:
    from mcache.refreshers.celery import CeleryRefresher
    from mcache.refreshers.queued import QueueRefresher
    from mcache.refreshers.rq import RQRefresher
    from mcache.refreshers.tasks import TasksRefresher

__all__ = [
    "CeleryRefresher",
    "QueueRefresher",
    "RQRefresher",
    "Refresher",
    "TasksRefresher",
    "ThreadPoolRefresher",
    "refresher_named",
    "run_job",
]

NAMES = ("thread", "celery", "rq", "tasks")
PACKAGES = {"celery": "celery[redis]", "rq": "rq", "tasks": "django-tasks"}
FALLBACKS = ("thread", "none")


def refresher_named(name: str, queue: str | None = None, fallback: str = "thread") -> Refresher:
    """Return the refresher ``name`` stands for, sending to ``queue`` (None: the default one)."""
    if name not in NAMES:
        raise ConfigError(
            f"refresher must be one of {', '.join(repr(n) for n in NAMES)} (or a callable),"
            f" got {name!r}"
        )
    if fallback not in FALLBACKS:
        raise ConfigError(f"refresh_fallback must be 'thread' or 'none', got {fallback!r}")
    if name == "thread":
        return ThreadPoolRefresher()
    classes = {"celery": "CeleryRefresher", "rq": "RQRefresher", "tasks": "TasksRefresher"}
    try:
        refresher: Any = __getattr__(classes[name])
    except ImportError as error:
        raise ConfigError(
            f"refresher={name!r} needs its package ({error.name or error}): pip install"
            f' "{PACKAGES[name]}", or this project\'s extra: pip install -e ".[{name}]"'
        ) from None
    return refresher(queue=queue, fallback=fallback)


def __getattr__(name: str) -> Any:
    if name == "QueueRefresher":
        from mcache.refreshers.queued import QueueRefresher

        return QueueRefresher
    if name == "CeleryRefresher":
        from mcache.refreshers.celery import CeleryRefresher

        return CeleryRefresher
    if name == "RQRefresher":
        from mcache.refreshers.rq import RQRefresher

        return RQRefresher
    if name == "TasksRefresher":
        from mcache.refreshers.tasks import TasksRefresher

        return TasksRefresher
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
