"""``FreshReadRouter``: read from the replica unless the model changed too recently for it.

A model's tag version is the time (ms) of its last change, so "changed less
than ``MCACHE_REPLICATION_LAG`` seconds ago" is a comparison, made on versions
kept in the process a short while (:class:`mcache.engine.fresh_reads.ChangeTimes`)
so that routing rarely costs a round trip. See docs/how-to/read-replicas.md.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import caches

from mcache import read_primary
from mcache.web import ChangeTimes

from .aliases import cache_alias, replication_lag
from .following import tracked
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

        Also the primary for every read of a cache rebuild that a tag bumped within
        the lag set off, whatever the tag (:func:`mcache.read_primary`), and for models
        whose changes bump no tag (``MCACHE_EXCLUDE_MODELS``): nothing says they changed.
        """
        if read_primary() or not tracked(model):
            return self.primary
        core = getattr(caches[cache_alias()], "mcache", None)
        tags = core.tags if core is not None else None
        changed = self.changes.changed_within_lag(tags, model_tag(model))
        return self.primary if changed else self.replica

    def db_for_write(self, model: Any, **hints: Any) -> str:
        """Writes go to the primary."""
        return self.primary

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        """Rows of the primary and its replica may relate: they are the same database."""
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        """Never migrate the replica (it follows the primary); leave other aliases to others."""
        return False if db == self.replica else None
