"""The near cache: hot entries kept in this process, so their hits make no round trip.

A near copy is an entry ``get_or_build`` just found fresh and current, kept
with the tag versions it was checked against (those live in
:class:`~mcache.model.tags.Tags`' process-local copy). A later hit checks the copy
against those versions and its own fresh-until time and costs no I/O at all.

How long a copy may be trusted is a stated number (composition rule 5 in
``docs/explanation/consistency.md``): until the store pushes its invalidation
(Redis: :mod:`mcache.stores.redis.tracking`), else at most ``near_ttl`` seconds;
this process's own writes, deletes and bumps are seen at once. A hit returns a
copy made from the serialized value, so a caller that changes what it got never
changes what the next caller gets. See docs/how-to/near-cache.md.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcache.errors import ConfigError
from mcache.memo import PER_KEY_LIMIT

if TYPE_CHECKING:
    from mcache.model.codec import Serializer
    from mcache.model.entry import Entry

__all__ = ["Coherence", "Invalidations", "NearCache", "NearCopy"]

_AS_THEY_ARE = (str, bytes, int, float, bool, type(None))


class Invalidations:
    """Which keys were invalidated since a read began, so a read never keeps what it missed.

    A read that started before another process's write may finish after that
    write's invalidation arrived. So every read takes a :meth:`mark` first, and what
    it read is kept only if no invalidation of its key (and no reset) came after it.
    """

    __slots__ = ("_dropped", "_floor", "_lock", "_seq", "listening", "wake")

    def __init__(self) -> None:
        self._seq = 0
        self._floor = 0
        self._dropped: dict[str, int] = {}
        self._lock = threading.Lock()
        self.listening = True
        """False while pushed invalidations are expected but not arriving (the
        tracking connection is down or not up yet): nothing may be kept then."""
        self.wake: Callable[[], None] | None = None
        """Called when a read would keep something while not listening: starts the feed
        (again, in a forked child)."""

    def mark(self) -> int:
        """Return the point a read starts from."""
        return self._seq

    def unchanged(self, key: str, mark: int) -> bool:
        """Return whether ``key`` may be kept by a read that started at ``mark``."""
        if not self.listening:
            if self.wake is not None:
                self.wake()
            return False
        return self._floor <= mark and self._dropped.get(key, 0) <= mark

    def dropped(self, keys: Iterable[str]) -> None:
        """Record that ``keys`` changed now."""
        with self._lock:
            self._seq += 1
            if len(self._dropped) >= PER_KEY_LIMIT:  # then every read counts as too old
                self._dropped.clear()
                self._floor = self._seq
            for key in keys:
                self._dropped[key] = self._seq

    def reset(self) -> None:
        """Record that anything may have changed now (a flush, a lost connection)."""
        with self._lock:
            self._seq += 1
            self._floor = self._seq
            self._dropped.clear()


@dataclass(slots=True, eq=False)
class NearCopy:
    """An entry kept near: its metadata, its value (or how to copy it) and its time limit."""

    entry: Entry
    names: list[str]
    """The tags the caller declared when the entry was found current."""
    copied: Callable[[], Any]
    """Return a hit's own copy of the value: the serializer's ``loads`` of the bytes kept
    (a partial, so no frame of ours runs), or the value itself where it cannot change."""
    until: float
    derived: Any = None
    """What a reader that only reads made of this copy once, kept with it (the edge's
    answer: see :meth:`mcache.engine.build.Builder.near_copy`); it goes with the copy."""


class NearCache:
    """Per-process copies of hot ``get_or_build`` entries (see the module)."""

    def __init__(self, ttl: float, size: int, serializer: Serializer) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0:
            raise ConfigError(f"near_ttl must be a number of seconds > 0, got {ttl!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"near_size must be a whole number of entries >= 1, got {size!r}")
        self.ttl = float(ttl)
        self.size = size
        self.serializer = serializer
        self.copies: dict[str, NearCopy] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"NearCache(ttl={self.ttl:g}, size={self.size}, held={len(self.copies)})"

    def keep(self, key: str, entry: Entry, names: list[str], now: float) -> None:
        """Keep ``entry`` (just found fresh and current for tags ``names``) near, from ``now``
        (the cache's ``clock.monotonic()``)."""
        value = entry.value
        if type(value) in _AS_THEY_ARE:
            copied = itertools.repeat(value).__next__  # immutable: handed out as it is
        else:
            try:
                copied = functools.partial(self.serializer.loads, self.serializer.dumps(value))
            except Exception:
                return  # it reached the store some other way (a custom codec): not kept here
        copy = NearCopy(entry, list(names), copied, now + self.ttl)
        with self._lock:
            copies = self.copies
            if key not in copies and len(copies) >= self.size:
                del copies[next(iter(copies))]  # the oldest first
            copies[key] = copy

    def drop(self, keys: Iterable[str]) -> None:
        """Forget the copies of ``keys`` (written, deleted, or invalidated elsewhere)."""
        with self._lock:
            for key in keys:
                self.copies.pop(key, None)

    def clear(self) -> None:
        """Forget every copy."""
        with self._lock:
            self.copies.clear()


class Coherence:
    """Keeps a cache's near copies and tag versions in step with what changed.

    Its cache's own writes and deletes report here (:meth:`changed`), and so does the
    store's invalidation feed (:mod:`mcache.stores.redis.tracking`), also when it is
    :meth:`lost` and :meth:`live` again.
    """

    def __init__(self, invalidations: Invalidations, near: NearCache | None, tags: Any) -> None:
        self.invalidations = invalidations
        self.near = near
        self.tags = tags
        """:class:`mcache.model.tags.Tags`: its process-local versions go with the rest."""
        self.feed: Any = None
        """The store's :class:`~mcache.stores.redis.tracking.InvalidationFeed`, if any."""
        if near is not None:
            _watch_forks(self)

    def follow_store(self, store: Any, namespace: str) -> None:
        """Follow ``store``'s invalidation feed for ``namespace``'s keys, if it has one."""
        if store.traits.pushes_invalidations:
            feed = store.invalidation_feed([f"{namespace}:"] if namespace else [], self)
            if feed is not None:
                self.follow(feed)

    def follow(self, feed: Any) -> None:
        """Take changes from ``feed`` (an :class:`~mcache.stores.redis.tracking.InvalidationFeed`):
        nothing is kept until it is live, and a forked child starts its own."""
        self.feed = feed
        self.invalidations.listening = False
        self.invalidations.wake = feed.start
        feed.start()

    def forked(self) -> None:
        """In a forked child: the parent's copies may be out of date, and its feed is gone."""
        if self.near is not None:
            self.near._lock = threading.Lock()
        self.invalidations._lock = threading.Lock()
        if self.feed is not None:
            self.invalidations.listening = False
        self.reset()

    def changed(self, keys: Iterable[str]) -> None:
        """Forget what this process holds of ``keys``: they changed."""
        keys = list(keys)
        self.invalidations.dropped(keys)
        if self.near is not None:
            self.near.drop(keys)
        self.tags.forget(keys)

    def reset(self) -> None:
        """Forget everything this process holds: any key may have changed."""
        self.invalidations.reset()
        if self.near is not None:
            self.near.clear()
        self.tags.forget_all()

    def lost(self) -> None:
        """Keep nothing until :meth:`live`: changes are not arriving."""
        self.invalidations.listening = False
        self.reset()

    def live(self) -> None:
        """Changes arrive again: what is read from now on may be kept."""
        self.reset()
        self.invalidations.listening = True


_ALL: weakref.WeakSet[Coherence] = weakref.WeakSet()
_WATCHING: list[bool] = []


def _watch_forks(coherence: Coherence) -> None:
    """Have a forked child start with nothing near (its parent's feed does not follow it)."""
    _ALL.add(coherence)
    if not _WATCHING and hasattr(os, "register_at_fork"):
        _WATCHING.append(True)
        os.register_at_fork(after_in_child=_forked)


def _forked() -> None:
    for coherence in list(_ALL):
        coherence.forked()
