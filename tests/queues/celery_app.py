"""The Celery app of the queue tests: the broker from the environment, mcache's task imported."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

from tests.queues.ready import say_ready

app = Celery(
    "mcache-tests", broker=os.environ.get("MCACHE_CELERY_BROKER", "redis://127.0.0.1:6379/0")
)
app.conf.update(
    imports=("mcache.refreshers.celery", "tests.queues.builders"),
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)
app.set_default()  # web threads other than the one importing this send with it too
worker_ready.connect(say_ready)  # the tests wait for it (see tests.queues.ready)
