"""A cached page's surrogate keys: what a cache in front is told to purge it by.

A page is sent with the labels of its own tags and of every tag its build read (a
fragment's, a ``@cached`` function's), so ``invalidate`` of any of them, which purges
the same labels (:mod:`mcache.purge`), reaches the copy in front as it reaches
mcache's. The header is worked out once, inside the build, and stored with the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcache.model.dependencies import read_labels
from mcache.purge.surrogate import KeysTooLong, header_kind, surrogate_header

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = ["KeysTooLong", "checked_kind", "page_surrogate"]


def checked_kind(kind: object, setting: str) -> str | None:
    """Return a ``page_surrogate`` setting (``xkey``, ``surrogate-key``, ``cache-tag`` or
    None), checked at start-up."""
    if kind is None:
        return None
    header_kind(kind, setting)  # type: ignore[arg-type]  (a wrong type is refused there)
    return kind.lower()  # type: ignore[union-attr]


def page_surrogate(cache: Cache, kind: str | None, tags: Iterable[str]) -> tuple[str, str] | None:
    """Return the header naming a page's keys (call it inside the page's build), or None
    for no ``kind`` or no tags. Raises :class:`KeysTooLong` (logged once per interval)
    when they do not fit: the caller sends such a page private, since a purge of a key
    left out would miss it."""
    if kind is None:
        return None
    labels = [cache.tags.label(tag) for tag in tags]
    try:
        return surrogate_header(header_kind(kind, "page_surrogate"), [*labels, *read_labels()])
    except KeysTooLong as error:
        cache.failures.warning("view.surrogate", "a page is sent private: %s", error)
        raise
