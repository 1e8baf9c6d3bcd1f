"""Rebuilds on Celery workers: ``Cache(refresher="celery")`` or ``CeleryRefresher(queue=…)``.

The web process publishes ``mcache.rebuild`` by name (``send_task``), with the job's JSON
as its one argument; workers register it by importing this module (add
``"mcache.refreshers.celery"`` to the Celery app's ``imports``).
"""

from __future__ import annotations

from typing import Any

from celery import current_app, shared_task

from mcache.engine.rebuild import run
from mcache.errors import ConfigError
from mcache.refreshers.queued import QueueRefresher

__all__ = ["TASK", "CeleryRefresher", "rebuild"]

TASK = "mcache.rebuild"
ONE_RECONNECT = {"max_retries": 1, "interval_start": 0, "interval_step": 0, "interval_max": 0}
"""A publish is tried again once, on a new connection, at once: after a broker outage the
connection Celery's pool kept is dead, and without it the first send of every process
would fail on it and shut the queue for another window. A broker that is still down
refuses the new connection at once, so a send still fails fast."""


@shared_task(name=TASK, ignore_result=True)
def rebuild(payload: str) -> str:
    """Rebuild the entry a job describes (in a worker)."""
    return run(payload)


class CeleryRefresher(QueueRefresher):
    """Sends rebuilds to Celery (the current app unless one is given)."""

    def __init__(
        self,
        queue: str | None = None,
        fallback: str = "thread",
        hold: float = 60.0,
        app: Any = None,
    ) -> None:
        super().__init__(queue, fallback, hold)
        self.app = app

    def context(self) -> Any:
        """Return the Celery app to send with: Celery's current app is per thread."""
        return self.app or current_app._get_current_object()

    def send(self, payload: str, context: Any) -> None:
        """Publish ``mcache.rebuild(payload)``; a broker that refuses raises at once."""
        if context.main == "default" and not context.conf.broker_url:
            raise ConfigError(
                "no Celery app is current in this thread (only Celery's fallback): pass"
                " CeleryRefresher(app=your_app), or call your_app.set_default() where it is made"
            )
        context.send_task(
            TASK, args=[payload], queue=self.queue, retry=True, retry_policy=ONE_RECONNECT
        )
