"""Settings of the example blog: SQLite in a temp dir, the store MCACHE_URL names (see store.py)."""

import os
import tempfile
from pathlib import Path

SECRET_KEY = os.environ.get("MCACHE_EXAMPLE_SECRET", "example-only-not-secret")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
TIME_ZONE = "UTC"  # the footer's render times say UTC
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",  # the admin's CSS, served by `python -m example_project`
    "django.contrib.syndication",
    "django_mcache",
    "example_project.blog",
]
MIDDLEWARE = [
    "example_project.blog.middleware.CacheFooterMiddleware",  # the footer's cache status
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_mcache.middleware.OnlineVisitorsMiddleware",
]
ROOT_URLCONF = "example_project.urls"
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
        "NAME": os.environ.get("MCACHE_EXAMPLE_DB")
        or str(Path(tempfile.gettempdir()) / "mcache-example.sqlite3"),
        # a write waits out the calendar's heavy read (a background rebuild, say)
        "OPTIONS": {"timeout": 30},
    }
}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": os.environ.get("MCACHE_URL", "memory://"),
        "KEY_PREFIX": "example",
        # families: the dashboard (/admin/mcache/dashboard/) charts each kind of page
        "OPTIONS": {"stale_ttl": 600, "metrics": ["families"]},
    }
}
SESSION_ENGINE = "django_mcache.sessions"
MCACHE_VIEW_COUNT_FIELDS = {"blog.post": "views"}
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
