"""Where background rebuilds run: threads of this process, or a task queue's workers.

A refresher (``Refresher``) takes a rebuild job and returns whether it accepted it; a
queue refresher sends what :meth:`~mcache.engine.rebuild.Rebuild.hand_off` gives instead of
calling the job. By name: ``"thread"`` (the default), ``"celery"``, ``"rq"``, ``"tasks"``
(Django's Tasks), each queue's package imported only when named.
"""

from __future__ import annotations

import importlib
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

QUEUES = {  # name: (module, class, what to install)
    "celery": ("celery", "CeleryRefresher", "celery[redis]"),
    "rq": ("rq", "RQRefresher", "rq"),
    "tasks": ("tasks", "TasksRefresher", "django-tasks"),
}
NAMES = ("thread", *QUEUES)
_LAZY = {"QueueRefresher": "queued", **{kind: module for module, kind, _ in QUEUES.values()}}


def refresher_named(name: str, queue: str | None = None, fallback: str = "thread") -> Refresher:
    """Return the refresher ``name`` stands for, sending to ``queue`` (None: the default one)."""
    if name not in NAMES:
        raise ConfigError(
            f"refresher must be one of {', '.join(repr(n) for n in NAMES)} (or a callable),"
            f" got {name!r}"
        )
    if fallback not in ("thread", "none"):
        raise ConfigError(f"refresh_fallback must be 'thread' or 'none', got {fallback!r}")
    if name == "thread":
        return ThreadPoolRefresher()
    _, kind, package = QUEUES[name]
    try:
        refresher: Any = __getattr__(kind)
    except ImportError as error:
        raise ConfigError(
            f"refresher={name!r} needs its package ({error.name or error}): pip install"
            f' "{package}", or this project\'s extra: pip install -e ".[{name}]"'
        ) from None
    return refresher(queue=queue, fallback=fallback)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
