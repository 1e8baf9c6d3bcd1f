"""The Celery app of the composition site: the broker from the environment."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

from tests.queues.ready import say_ready

app = Celery("mcache-composition", broker=os.environ.get("MCACHE_CELERY_BROKER", ""))
app.conf.update(
    imports=("mcache.refreshers.celery", "tests.composition.site_app"),
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)
app.set_default()  # web threads other than the one importing this send with it too
worker_ready.connect(say_ready)  # the tests wait for it (see tests.queues.ready)
