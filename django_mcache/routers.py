"""``FreshReadRouter``: read from the replica unless the model changed too recently for it.

A model's tag version is the time (ms) of its last change, so "changed less
than ``MCACHE_REPLICATION_LAG`` seconds ago" is a comparison, and reads of
models that changed that recently go to the primary, which has the change,
instead of a replica that may not yet. Writes always go to the primary.

A cache rebuild reads the primary too while any tag that set it off was bumped
within the lag, whatever the tag names (:mod:`mcache.engine.fresh_reads`): an entry
rebuilt after ``invalidate("prices")`` or a nested fragment's bump is never
built from a replica that has not replayed the change behind it.

The versions are kept in the process for a short while (a tenth of the lag,
at most 100 ms), and a change this process made is known at once
(:class:`mcache.engine.fresh_reads.ChangeTimes`), so routing costs a round trip only
now and then. The price: for up to that long after another process's write,
this one may still read the model from the replica (a form post answered by
one worker and its redirect by another); keep the lag setting above the
replication lag by at least that much.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import caches

from mcache import read_primary
from mcache.web import ChangeTimes

from .aliases import cache_alias, replication_lag
from .tags import model_tag

__all__ = ["FreshReadRouter"]


class FreshReadRouter:
    """Database router: ``DATABASE_ROUTERS = ["django_mcache.routers.FreshReadRouter"]``."""

    def __init__(self) -> None:
        self.replica = getattr(settings, "MCACHE_REPLICA_DB", "replica")
        self.primary = getattr(settings, "MCACHE_PRIMARY_DB", "default")
        self.changes = ChangeTimes(int(replication_lag(routed=True) * 1000))

    def db_for_read(self, model: Any, **hints: Any) -> str:
        """Return the primary if ``model`` changed within the lag, else the replica.

        Also the primary for every read of a cache rebuild that a tag bumped
        within the lag set off, whatever the tag (an object's, a declared one,
        ``invalidate("anything")``, a nested entry's): :func:`mcache.read_primary`.
        Models whose changes bump no tag (see ``MCACHE_EXCLUDE_MODELS``, e.g.
        database sessions) are always read from the primary: nothing would say
        they just changed.
        """
        from .signals import tracked

        if read_primary() or not tracked(model):
            return self.primary
        core = getattr(caches[cache_alias()], "mcache", None)
        tags = core.tags if core is not None else None
        if self.changes.changed_within_lag(tags, model_tag(model)):
            return self.primary
        return self.replica

    def db_for_write(self, model: Any, **hints: Any) -> str:
        """Writes go to the primary."""
        return self.primary

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        """Rows of the primary and its replica may relate: they are the same database."""
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        """Never migrate the replica (it follows the primary); leave other aliases to others."""
        return False if db == self.replica else None
