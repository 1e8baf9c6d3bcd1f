"""WSGI entry points gunicorn serves: ``application``; ``edge``, the same behind mcache's
edge (which answers stored pages before Django runs); ``bare``, no framework at all (the
server's own floor: the same HTML from a three-line WSGI function)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.benchmarks.django_site.settings")

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()

from mcache.edge import WSGIEdge  # noqa: E402

edge = WSGIEdge(application)


def bare(environ, start_response):
    from tests.benchmarks.django_site.urls import ROWS

    body = f"<html><body><h1>0 types</h1><ul>{ROWS}</ul></body></html>".encode()
    headers = [("Content-Length", str(len(body))), ("X-Worker", str(os.getpid()))]
    start_response("200 OK", headers)
    return [body]
