"""A Django site behind a real Varnish: its settings (the tests set
``DJANGO_SETTINGS_MODULE`` to this module and serve
``django.core.wsgi:get_wsgi_application()``); its pages are in :mod:`.purge_site_urls`.

Pages are cached by ``@cached_view`` on the memcached ``MCACHE_PURGE_SITE_MEMCACHED``
names, with ``page_surrogate="xkey"`` (each shared page names its tags) and ``purge``
the Varnish purge address ``MCACHE_PURGE_SITE_VARNISH`` names, so a save anywhere
purges the pages tagged with the saved row. No session or CSRF middleware: the pages are every
visitor's, as a cache in front may keep them.
"""

from __future__ import annotations

import os

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django.contrib.contenttypes", "django_mcache", "tests.dj.blog"]
MIDDLEWARE: list[str] = []
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("MCACHE_PURGE_SITE_DB", ":memory:"),
    }
}
CACHES = {
    "default": {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": f"memcached://{os.environ.get('MCACHE_PURGE_SITE_MEMCACHED', '')}",
        "KEY_PREFIX": "purge-site",
        "OPTIONS": {
            "page_surrogate": "xkey",
            "purge": f"varnish://{os.environ.get('MCACHE_PURGE_SITE_VARNISH', '')}",
        },
    }
}
ROOT_URLCONF = "tests.dj.purge_site_urls"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
