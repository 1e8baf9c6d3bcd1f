"""Framework-neutral pieces the Django and Flask adapters share.

The cached-page format both store (:mod:`mcache.web.page`), and the hooks into the
core a framework adapter needs, named here so an adapter imports nothing of the
engine: ``note_bumps`` (its ORM just bumped these tags: this process's routers know at
once) and ``ChangeTimes`` (when a model's tag last changed, for replica-lag routing).
A task queue's worker entry point is :func:`mcache.refreshers.run_job`.
"""

from mcache.engine.fresh_reads import ChangeTimes, note_bumps

__all__ = ["ChangeTimes", "note_bumps"]
