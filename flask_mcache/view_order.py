"""A cached view written above its route decorator fails loudly instead of caching nothing.

A route decorator written *below* ``@mcache.cached_view`` registers the plain view, and
the page is silently never cached. This module remembers which functions were wrapped
and checks an app's routes for one routed as it is: when the view is decorated, at
``init_app``, and at the first request (for blueprints registered after ``init_app``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from flask import Flask

from mcache.errors import ConfigError

__all__ = ["check_app", "check_on_first_request", "remember"]

_wrapped: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()
"""Each view function ``cached_view`` wrapped."""

_CHECKED = "mcache.view_order_checked"


def remember(view: Callable[..., Any]) -> None:
    """Note that ``view`` was wrapped by ``cached_view``: routed as it is, it caches nothing."""
    _wrapped.add(view)


def check_app(app: Flask) -> None:
    """Raise ``ConfigError`` naming the first route served by a function that ``cached_view``
    wrapped: the route reaches the function itself, not its cached wrapper."""
    for endpoint, function in app.view_functions.items():
        if function in _wrapped:
            name = getattr(function, "__name__", "view")
            raise ConfigError(
                f"view {endpoint!r} ({getattr(function, '__qualname__', name)}):"
                " @mcache.cached_view is written above the route decorator, so Flask routes"
                " to the uncached function and the page is never cached. Put"
                " @mcache.cached_view below it:\n"
                "    @app.get(...)\n"
                "    @mcache.cached_view(...)\n"
                f"    def {name}(...): ...\n"
                "(To serve the same view uncached on another route too, route a function of"
                " its own that calls it.)"
            )


def check_on_first_request(app: Flask) -> None:
    """Check ``app`` now, and once more at its first request (``before_request``)."""
    check_app(app)
    if app.extensions.get(_CHECKED) is None:
        app.extensions[_CHECKED] = False

        def check_once() -> None:
            if not app.extensions[_CHECKED]:
                check_app(app)  # raises at every request until the order is mended
                app.extensions[_CHECKED] = True

        app.before_request(check_once)
