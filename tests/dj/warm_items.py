"""A cached function on the Django cache and the list ``mcache_warm`` builds from it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.core.cache import caches

built: list[int] = []


@caches["default"].mcache.cached(ttl=60)
def teaser(number: int) -> str:
    built.append(number)
    return f"teaser {number}"


def teasers() -> Iterator[tuple[Any, tuple[int]]]:
    """Yield what to warm: (cached function, args)."""
    for number in range(12):
        yield teaser, (number,)


def not_a_list() -> Iterator[str]:
    yield "teaser"
