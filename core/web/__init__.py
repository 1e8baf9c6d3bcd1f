"""Framework-neutral pieces the Django and Flask adapters share.

The cached-page format both store (:mod:`mcache.web.page`), and the engine's hook an
adapter needs, named here so that it imports nothing of the engine: ``ChangeTimes`` (for
replica-lag routing; it knows the cache's own bumps at once).
"""

from mcache.engine.fresh_reads import ChangeTimes

__all__ = ["ChangeTimes"]
