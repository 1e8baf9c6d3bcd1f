"""A Flask app with a cached function and the list ``flask mcache warm`` builds from it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flask import Flask

from flask_mcache import MCache

mcache = MCache()
built: list[int] = []


@mcache.cached(ttl=60)
def headline(number: int) -> str:
    built.append(number)
    return f"headline {number}"


def headlines() -> Iterator[tuple[Any, tuple[int]]]:
    for number in range(5):
        yield headline, (number,)


def create_app(url: str, **config: Any) -> Flask:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=url, MCACHE_NAMESPACE="warm", **config)
    mcache.init_app(app)
    return app
