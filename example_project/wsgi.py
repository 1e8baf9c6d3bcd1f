"""WSGI entry point of the example site, for a real server: ``gunicorn example_project.wsgi``.

Run ``python -m example_project --check`` (or the example itself) once first:
it migrates and seeds the database this serves.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
application = get_wsgi_application()
