"""The edge: stored pages answered before the web framework runs.

``WSGIEdge`` and ``ASGIEdge`` wrap a site's application. A page ``@cached_view``
stored for an anonymous visitor is answered from the same entry, with the headers
the application sent for it, without the framework building a request or running
its middleware; everything else goes to the application (see
``docs/how-to/edge.md``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcache import lazy_exports

if TYPE_CHECKING:
    from mcache.edge.asgi import ASGIEdge
    from mcache.edge.wsgi import WSGIEdge

__all__ = ["ASGIEdge", "WSGIEdge"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"ASGIEdge": "mcache.edge.asgi", "WSGIEdge": "mcache.edge.wsgi"}
)
