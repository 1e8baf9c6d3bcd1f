"""Django settings of the Tasks queue tests: a SQLite file the web and worker processes share."""

import os

SECRET_KEY = "tests-only-not-secret"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django_tasks",
    "django_tasks_db",
    "django_mcache",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MCACHE_TASKS_DB", ":memory:"),
        "OPTIONS": {"timeout": 20},
    }
}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": os.environ.get("MCACHE_QUEUE_URL", "memory://"),
        "KEY_PREFIX": os.environ.get("MCACHE_QUEUE_NAMESPACE", "tasks"),
        "OPTIONS": {
            "refresher": os.environ.get("MCACHE_QUEUE_REFRESHER", "thread"),
            "refresh_queue": os.environ.get("MCACHE_QUEUE_NAME") or None,
            "refresh": "background",
            "lock_timeout": 2,
        },
    }
}
TASKS = {
    "default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default", "mcache"]},
}
SILENCED_SYSTEM_CHECKS = ["django_mcache.W001"]

if os.environ.get("MCACHE_WORKER_READY"):  # a db_worker the tests started: configured, so ready
    from pathlib import Path

    Path(os.environ["MCACHE_WORKER_READY"]).touch()
