"""A Django site with the admin and the cache dashboard, for the browser tests: its
settings, its URLs (``ROOT_URLCONF`` is this module) and one cached page.

The tests serve it with gunicorn (``DJANGO_SETTINGS_MODULE`` set to this module) on the
memcached and Redis servers the suite starts, named by ``MCACHE_DASHBOARD_MEMCACHED`` and
``MCACHE_DASHBOARD_REDIS``; both caches count families (``metrics=["families"]``).
"""

from __future__ import annotations

import os

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_mcache",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MCACHE_DASHBOARD_DB", ":memory:"),
    }
}
_OPTIONS = {"metrics": ["families"], "stats_interval": 0.2}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": f"memcached://{os.environ.get('MCACHE_DASHBOARD_MEMCACHED', '')}",
        "KEY_PREFIX": "dashboard-site",
        "OPTIONS": _OPTIONS,
    },
    "redis": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": os.environ.get("MCACHE_DASHBOARD_REDIS", ""),
        "KEY_PREFIX": "dashboard-site",
        "OPTIONS": _OPTIONS,
    },
}
ROOT_URLCONF = "tests.browser.django_site_urls"
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
