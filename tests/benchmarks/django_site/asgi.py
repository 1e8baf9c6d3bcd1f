"""ASGI entry points uvicorn serves: ``application``; ``edge``, the same behind mcache's
edge (which answers stored pages before Django runs); ``bare``, no framework at all (the
server's own floor)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.benchmarks.django_site.settings")

from django.core.asgi import get_asgi_application

from mcache.edge import ASGIEdge

application = get_asgi_application()
edge = ASGIEdge(application)


async def bare(scope, receive, send):
    from tests.benchmarks.django_site.urls import ROWS

    body = f"<html><body><h1>0 types</h1><ul>{ROWS}</ul></body></html>".encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
