"""Replica-lag routing: whether the build under way must read the primary database.

The rule (``docs/how-to/read-replicas.md``): a tag's version is the time (ms) of
its last bump. While ``get_or_build`` rebuilds an entry whose newest tag version
(declared, or recorded from what it contains) is younger than the cache's
``replication_lag``, :func:`read_primary` says so, lest it store a replica's old
data as fresh. Outside builds, a router reads a model from the primary while its
tag changed within the lag (:class:`ChangeTimes`). The answer lives in a context
variable, so it follows the build into the threads and tasks it starts, and a
nested build keeps whichever of the two says "primary" longer.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, NamedTuple

from mcache.clock import Clock, system_clock
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.model.tags import version_ms

if TYPE_CHECKING:
    from mcache.model.tags import Tags

__all__ = ["ChangeTimes", "newest_version", "read_primary", "reading_primary_after"]


class _Until(NamedTuple):
    clock: Clock
    until_ms: int


_PRIMARY: ContextVar[_Until | None] = ContextVar("mcache_read_primary", default=None)


def read_primary() -> bool:
    """Whether reads in the current context should go to the primary database.

    True inside a ``get_or_build`` rebuild while a tag version it depends on is
    younger than its cache's ``replication_lag``; False everywhere else. For
    any database router (Django's :class:`django_mcache.routers.FreshReadRouter`
    and SQLAlchemy's :class:`flask_mcache.sqlalchemy.FreshReadSession` ask it).
    """
    until = _PRIMARY.get()
    return until is not None and until.clock.time_ms() < until.until_ms


@contextlib.contextmanager
def reading_primary_after(clock: Clock, newest_version: int, lag_ms: int) -> Iterator[None]:
    """Say "read the primary" in the block until ``lag_ms`` after ``newest_version``.

    Nothing changes when the lag is off (0), no version is known, or the
    version is already older than the lag.
    """
    until_ms = version_ms(newest_version) + lag_ms
    outer = _PRIMARY.get()
    if (
        lag_ms <= 0
        or newest_version <= 0
        or until_ms <= clock.time_ms()
        or (outer is not None and outer.until_ms >= until_ms and outer.clock is clock)
    ):
        yield
        return
    token = _PRIMARY.set(_Until(clock, until_ms))
    try:
        yield
    finally:
        _PRIMARY.reset(token)


def newest_version(versions: Mapping[str, int]) -> int:
    """Return the newest of the tag versions given (0 for none)."""
    return max(versions.values(), default=0)


class ChangeTimes:
    """When tags last changed, for a router that asks before every query.

    A version read from the cache is kept a tenth of the lag (at most 100 ms), and
    one this process's cache bumped (``Tags.bumped``) is known at once, so routing costs
    a round trip only now and then; another process's change may go unseen that
    long, so keep the lag setting that much above the real replication lag.
    """

    def __init__(self, lag_ms: int, clock: Clock = system_clock) -> None:
        self.lag_ms = lag_ms
        self.local_ms = min(100, lag_ms // 10)
        self.clock = clock
        self._known: BoundedMemo[str, tuple[int, float]] = BoundedMemo(PER_KEY_LIMIT)
        self._lock = threading.Lock()

    def changed_within_lag(self, tags: Tags | None, tag: str) -> bool:
        """Whether ``tag`` was bumped within the lag, as ``tags`` (a cache's) tell; True when
        that cannot be known (no cache, or it is down): reading the primary is always correct."""
        version = self.version(tags, tag)
        return version is None or self.clock.time_ms() - version_ms(version) < self.lag_ms

    def version(self, tags: Tags | None, tag: str) -> int | None:
        """Return the tag's version: this process's own bump, a recent read, or the store's."""
        mine = tags.bumped.get(tag, 0) if tags is not None else 0
        now = self.clock.monotonic()
        with self._lock:
            known = self._known.get(tag)
        if known is not None and known[1] > now:
            return max(known[0], mine)
        if tags is None:
            return None
        try:
            version = tags.read([tag], tags.key(tag)).get(tag)
        except Exception:  # the cache is down: the caller reads the primary
            return None
        if version is None:
            return None
        with self._lock:
            self._known.remember(tag, (version, now + self.local_ms / 1000))
        return max(version, mine)
