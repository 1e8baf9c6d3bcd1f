"""Django settings for the adapter's tests: SQLite in memory, mcache on the in-process store.

Tests that need memcached or Redis point ``CACHES`` at the servers the suite
starts, with ``override_settings``.
"""

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_mcache",
    "tests.dj.blog",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
    # The router's replica: in tests it mirrors the default database, as a replica would.
    "replica": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": ":memory:",
        "TEST": {"MIRROR": "default"},
    },
    # A replica that lags: a database of its own, which the replica-lag tests copy the
    # primary into only when they say so.
    "lagging": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": "memory://",
        "KEY_PREFIX": "tests",
    }
}
ROOT_URLCONF = "tests.dj.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
