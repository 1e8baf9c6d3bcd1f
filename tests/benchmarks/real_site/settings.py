"""Settings of the real-traffic site; ``MCACHE_BENCH_SITE`` picks the configuration.

- ``holes``: the greeting in a ``{% nocache %}`` hole, ``django_mcache.holes.holes``
  on (``{% csrf_token %}`` becomes a hole), views under ``@cached_view(ttl,
  hole_context={}, cookies=[])``;
- ``plain``: the greeting in the page, no holes processor, plain ``@cached_view(ttl)``;
- ``django``: the same templates as ``plain`` under Django's ``cache_page`` on
  ``PyMemcacheCache``.

The real Session/CSRF/Auth middleware runs for all three; sessions are signed
cookies, so a signed-in visitor costs no session query in any of them.
"""

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

SITE = os.environ.get("MCACHE_BENCH_SITE", "holes")
if SITE not in ("holes", "plain", "django"):
    raise ImproperlyConfigured(f"MCACHE_BENCH_SITE must be holes, plain or django, got {SITE!r}")
_memcached = os.environ.get("MCACHE_BENCH_MEMCACHED", "127.0.0.1:11211")
_templates = Path(__file__).resolve().parent / "templates"

SECRET_KEY = "benchmark-only"  # the same in every process: sessions made in setup are valid
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_mcache",
    "tests.benchmarks.real_site",
]
MIDDLEWARE = [
    "tests.benchmarks.real_site.views.worker_header",  # lets the load generator balance
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",  # sets Content-Length
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
ROOT_URLCONF = "tests.benchmarks.real_site.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MCACHE_BENCH_DB", "/tmp/mcache-real-site.sqlite3"),
        "CONN_MAX_AGE": 60,  # as production sites keep connections, in all three alike
    }
}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": f"memcached://{_memcached}",
    },
    "django": {
        "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
        "LOCATION": _memcached,
    },
}
_processors = [
    "django.template.context_processors.request",
    "django.contrib.auth.context_processors.auth",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [_templates / ("holes" if SITE == "holes" else "plain"), _templates / "shared"],
        "OPTIONS": {
            "context_processors": _processors
            + (["django_mcache.holes.holes"] if SITE == "holes" else [])
        },
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
