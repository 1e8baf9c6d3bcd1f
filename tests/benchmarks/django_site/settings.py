"""Settings of the benchmark site: SQLite file, the caches on the same memcached, and one
with a near tier on a Redis (bench_edge's; its invalidations are pushed to the near tier)."""

import os

_memcached = os.environ.get("MCACHE_BENCH_MEMCACHED", "127.0.0.1:11211")
_redis = os.environ.get("MCACHE_BENCH_REDIS", "127.0.0.1:6379")

SECRET_KEY = "benchmark-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_mcache"]
MIDDLEWARE = [
    "django.middleware.common.CommonMiddleware",  # sets Content-Length
    "tests.benchmarks.django_site.urls.worker_header",  # lets the load generator balance
]
ROOT_URLCONF = "tests.benchmarks.django_site.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MCACHE_BENCH_DB", "/tmp/mcache-bench.sqlite3"),
    }
}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": f"memcached://{_memcached}",
    },
    "near": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": f"memcached://{_memcached}",
        "OPTIONS": {"near_ttl": 30},
    },
    "redis_near": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": f"redis://{_redis}/0",
        "OPTIONS": {"near_ttl": 30},
    },
    "django": {
        "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
        "LOCATION": _memcached,
    },
}
TEMPLATES: list[dict] = []
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
