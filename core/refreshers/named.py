"""Refreshers by name: ``"thread"`` (the default), ``"celery"``, ``"rq"``, ``"tasks"``
(Django's Tasks), each queue's package imported only when its refresher is named."""

from __future__ import annotations

import importlib
from typing import Any

from mcache.contract.refresher import Refresher
from mcache.errors import ConfigError
from mcache.refreshers.thread import ThreadPoolRefresher

__all__ = ["NAMES", "QUEUES", "refresher_named"]

QUEUES = {  # name: (module, class, what to install)
    "celery": ("celery", "CeleryRefresher", "celery[redis]"),
    "rq": ("rq", "RQRefresher", "rq"),
    "tasks": ("tasks", "TasksRefresher", "django-tasks"),
}
NAMES = ("thread", *QUEUES)


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
    module, kind, package = QUEUES[name]
    try:
        refresher: Any = getattr(importlib.import_module(f"{__package__}.{module}"), kind)
    except ImportError as error:
        raise ConfigError(
            f"refresher={name!r} needs its package ({error.name or error}): pip install"
            f' "{package}", or this project\'s extra: pip install -e ".[{name}]"'
        ) from None
    return refresher(queue=queue, fallback=fallback)
