"""Rebuilds on Django's Tasks framework: ``OPTIONS["refresher"] = "tasks"``.

``django.tasks`` on Django 6.0 and later, the ``django-tasks`` backport before
it; any of their backends (the database one: ``manage.py db_worker``). The task
is ``django_mcache.tasks.rebuild``; ``queue`` is a queue name the backend's
``QUEUES`` allows.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from mcache.refreshers.queued import QueueRefresher

__all__ = ["TasksRefresher"]

TASK = "django_mcache.tasks.rebuild"


class TasksRefresher(QueueRefresher):
    """Sends rebuilds to a Django Tasks backend (``default`` unless one is named)."""

    def __init__(
        self,
        queue: str | None = None,
        fallback: str = "thread",
        hold: float = 60.0,
        backend: str | None = None,
    ) -> None:
        super().__init__(queue, fallback, hold)
        self.backend = backend
        self._task: Any = None

    def send(self, payload: str, context: Any) -> None:
        """Enqueue ``django_mcache.tasks.rebuild(payload)`` with the configured backend."""
        if self._task is None:
            self._task = import_string(TASK)
        changes = {"queue_name": self.queue, "backend": self.backend}
        task = self._task.using(**{k: v for k, v in changes.items() if v is not None})
        task.enqueue(payload)
