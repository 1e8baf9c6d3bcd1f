"""WSGI entry point gunicorn serves (``MCACHE_BENCH_SITE`` picks the configuration)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.benchmarks.real_site.settings")

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
