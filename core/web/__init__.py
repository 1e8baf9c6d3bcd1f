"""Framework-neutral pieces the Django and Flask adapters share.

The cached-page format both store (:mod:`mcache.web.page`), and the engine's hooks an
adapter needs, named here so that it imports nothing of the engine: ``note_bumps`` (its
ORM just bumped these tags) and ``ChangeTimes`` (for replica-lag routing).
"""

from mcache.engine.fresh_reads import ChangeTimes, note_bumps

__all__ = ["ChangeTimes", "note_bumps"]
