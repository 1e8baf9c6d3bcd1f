"""What a build read: the tags of every cached value used inside it, at any depth.

A page that holds a cached fragment is only as fresh as the fragment. So every
cached value read inside a build reports the tag versions it was validated
against, and the entry the build stores records them next to its own tags:
composition rules 1 and 2 in ``docs/explanation/consistency.md``.

The current build lives in a context variable, so it follows nested calls,
``await`` and tasks started inside it, and never leaks to other requests.
Versions are recorded per tag *copy* (:mod:`mcache.model.tags`); two reads of one
copy keep the older version. Tags belong to one store and namespace (a build's
*scope*): a value read from another cache passes on only its staleness.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = [
    "Dependencies",
    "carried",
    "collecting",
    "inside_build",
    "merged",
    "read_labels",
    "report",
]

T = TypeVar("T")


class Dependencies:
    """The tag versions (and staleness) of what one build read, in one scope of tags."""

    __slots__ = ("_lock", "scope", "stale", "versions")

    def __init__(self, scope: object) -> None:
        self.scope = scope
        self.versions: dict[str, int] = {}
        self.stale = False
        # Threads the build starts with a copy of its context report here too.
        self._lock = threading.Lock()

    def add(self, scope: object, versions: Mapping[str, int], stale: bool = False) -> None:
        """Record what one value read inside the build depends on (its tags if in scope)."""
        with self._lock:
            if scope == self.scope:
                self.versions = merged(self.versions, versions)
            self.stale = self.stale or stale


_CURRENT: ContextVar[Dependencies | None] = ContextVar("mcache_build", default=None)


def inside_build() -> bool:
    """Return whether the caller runs inside a ``get_or_build`` build."""
    return _CURRENT.get() is not None


def read_labels() -> list[str]:
    """Return the tags (their labels, a copy's ``~n`` cut off) of what the current build
    has read so far, in its own scope: a page tells the cache in front these too."""
    build = _CURRENT.get()
    if build is None:
        return []
    with build._lock:
        labels = list(build.versions)
    return list(dict.fromkeys(label.rsplit("~", 1)[0] for label in labels))


def report(scope: object, versions: Mapping[str, int], stale: bool = False) -> None:
    """Tell the enclosing build, if any, what the value just read depends on (``scope``:
    the store and namespace the tags of ``versions`` belong to)."""
    build = _CURRENT.get()
    if build is not None and (versions or stale):
        build.add(scope, versions, stale)


@contextmanager
def collecting(scope: object) -> Iterator[Dependencies]:
    """Collect what the code in the block reads, for the entry it builds under ``scope``."""
    found = Dependencies(scope)
    token = _CURRENT.set(found)
    try:
        yield found
    finally:
        _CURRENT.reset(token)


def carried(function: Callable[[], T]) -> Callable[[], T]:
    """Return ``function`` bound to the current build, to run in a context of its own.

    An adapter that renders in a fresh, empty context (Flask's background
    re-render drops the ended request's state) calls this first, so what the
    render reads still reaches the build that stores it.
    """
    build = _CURRENT.get()

    def run() -> T:
        token = _CURRENT.set(build)
        try:
            return function()
        finally:
            _CURRENT.reset(token)

    return run


def merged(own: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """Return the union of two label → version maps, keeping the older of two versions."""
    result = dict(own)
    for label, version in more.items():
        known = result.get(label)
        if known is None or version < known:
            result[label] = version
    return result
