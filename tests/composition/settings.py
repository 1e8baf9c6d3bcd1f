"""Django settings of the composition site: Django Tasks on a SQLite file the web and
worker processes share, and, for the ``alias`` store, mcache over Django's own Redis cache."""

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
_refresher = os.environ.get("MCACHE_CELL_REFRESHER", "sync")
_near = os.environ.get("MCACHE_CELL_NEAR_TTL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "shared": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": os.environ.get("MCACHE_CELL_URL", "redis://127.0.0.1:6379/0"),
    },
    "composition": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": "alias:shared",
        "KEY_PREFIX": os.environ.get("MCACHE_CELL_NAMESPACE", "composition"),
        "OPTIONS": {
            "refresh": "sync" if _refresher == "sync" else "background",
            "refresher": "thread" if _refresher == "sync" else _refresher,
            "refresh_queue": os.environ.get("MCACHE_CELL_QUEUE") or None,
            "lock_timeout": 2,
            "wait": 3.0,
            **({"near_ttl": float(_near)} if _near else {}),
        },
    },
}
MCACHE_REPLICATION_LAG = float(os.environ.get("MCACHE_CELL_LAG", "2.0"))
TASKS = {
    "default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default", "mcache"]},
}
SILENCED_SYSTEM_CHECKS = ["django_mcache.W001"]

if os.environ.get("MCACHE_WORKER_READY"):  # a db_worker the tests started: configured, so ready
    from pathlib import Path

    Path(os.environ["MCACHE_WORKER_READY"]).touch()
