"""The task Django's Tasks framework runs for mcache's background rebuilds.

Enqueued by ``mcache.refreshers.TasksRefresher``; ``django.tasks`` on Django
6.0 and later, the ``django-tasks`` backport (``pip install django-tasks``)
before it.
"""

from __future__ import annotations

from importlib.util import find_spec

from mcache.refreshers import run_job

if find_spec("django.tasks") is not None:  # Django 6.0 and later
    from django.tasks import task
else:
    from django_tasks import task

__all__ = ["rebuild"]


@task()
def rebuild(payload: str) -> str:
    """Rebuild the entry a job describes (in a task worker)."""
    return run_job(payload)
