"""Rebuilds on RQ workers: ``Cache(refresher="rq")`` or ``RQRefresher(queue=…)``.

The job is ``mcache.engine.rebuild.run(payload)``, enqueued by its import path, so
``rq worker`` needs nothing registered. ``queue`` is a queue name (on RQ's own
default Redis, ``redis://localhost:6379/0``) or a Redis URL naming one:
``redis://127.0.0.1:6379/0?queue=mcache`` (the queue ``default`` without it).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from redis import Redis
from rq import Queue

from mcache.refreshers.queued import QueueRefresher

__all__ = ["RQRefresher"]

JOB = "mcache.engine.rebuild.run"
DEFAULT_REDIS = "redis://localhost:6379/0"


class RQRefresher(QueueRefresher):
    """Sends rebuilds to an RQ queue."""

    default_queue = "default"

    def __init__(
        self,
        queue: str | None = None,
        fallback: str = "thread",
        hold: float = 60.0,
        connection: Any = None,
    ) -> None:
        name, url = _queue_and_redis(queue)
        super().__init__(name, fallback, hold)
        self.connection = connection or Redis.from_url(
            url, socket_connect_timeout=1, socket_timeout=2
        )
        self._queue = Queue(self.queue, connection=self.connection)

    def send(self, payload: str, context: Any) -> None:
        """Enqueue ``mcache.engine.rebuild.run(payload)``; a Redis that is down raises."""
        self._queue.enqueue(JOB, payload, result_ttl=0, failure_ttl=3600)


def _queue_and_redis(spec: str | None) -> tuple[str | None, str]:
    """Return (queue name, Redis URL) from a name or a ``redis://…?queue=name`` URL."""
    if not spec or "://" not in spec:
        return spec, DEFAULT_REDIS
    parts = urlsplit(spec)
    name = parse_qs(parts.query).get("queue", [None])[0]
    return name, urlunsplit(parts._replace(query=""))
