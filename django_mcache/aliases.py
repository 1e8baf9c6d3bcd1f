"""Which cache each part of a site uses, read from Django's settings.

Pages, blocks, counters, ORM bumps and the router all default to the same
cache (``MCACHE_CACHE``), so a site that moves mcache moves all of them; an
alias is checked where it is written, so a typo fails at import. Imports
nothing else of ``django_mcache``, so every module may ask it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from mcache.errors import ConfigError

__all__ = [
    "BACKEND",
    "ROUTER",
    "cache_alias",
    "check_alias",
    "counters_alias",
    "is_mcache_backend",
    "replication_lag",
    "routes_fresh_reads",
]


def cache_alias(explicit: str | None = None) -> str:
    """Return the cache alias to use: ``explicit``, else ``MCACHE_CACHE``, else "default"."""
    return explicit or getattr(settings, "MCACHE_CACHE", "default")


BACKEND = "django_mcache.backend.MCacheBackend"


def check_alias(alias: str, where: str) -> None:
    """Refuse a cache alias that ``settings.CACHES`` lacks or that is not an mcache cache."""
    if not settings.configured:
        return  # settings come later (a module imported before setup): the first use says
    caches_setting = getattr(settings, "CACHES", {})
    if alias not in caches_setting:
        known = ", ".join(map(repr, caches_setting)) or "none"
        raise ImproperlyConfigured(
            f"{where}: there is no cache {alias!r} in settings.CACHES (it has {known});"
            f" name one of those, or add CACHES[{alias!r}] = {{'BACKEND': {BACKEND!r},"
            " 'LOCATION': 'memcached://127.0.0.1:11211'}"
        )
    backend = caches_setting[alias].get("BACKEND", "")
    if not is_mcache_backend(backend):
        raise ImproperlyConfigured(
            f"{where}: CACHES[{alias!r}] is {backend!r}, not an mcache cache; set its"
            f" BACKEND to {BACKEND!r} or name an mcache cache"
        )


def is_mcache_backend(path: object) -> bool:
    """Whether a ``CACHES`` entry's ``BACKEND`` is mcache's, or a subclass of it."""
    if path == BACKEND:
        return True
    try:
        backend = import_string(path) if isinstance(path, str) else None
    except ImportError:
        return False
    # a subclass of ours, told by its ancestors' names (importing the backend here would
    # import the whole adapter)
    ancestors = getattr(backend, "__mro__", ())
    return any(f"{c.__module__}.{c.__qualname__}" == BACKEND for c in ancestors)


ROUTER = "django_mcache.routers.FreshReadRouter"


def routes_fresh_reads() -> bool:
    """Return whether :class:`~django_mcache.routers.FreshReadRouter` is in ``DATABASE_ROUTERS``
    (its reads depend on the model tag of every tracked model)."""
    return any(
        router == ROUTER or type(router).__name__ == "FreshReadRouter"
        for router in getattr(settings, "DATABASE_ROUTERS", ())
    )


def replication_lag(routed: bool | None = None) -> float:
    """Return ``MCACHE_REPLICATION_LAG``: seconds the replica may be behind the primary.

    Unset, it is 2 s where :class:`~django_mcache.routers.FreshReadRouter` routes reads
    (``routed``; None: look at ``DATABASE_ROUTERS``), else 0, so a site without one pays nothing.
    """
    if routed is None:
        routed = routes_fresh_reads()
    value = getattr(settings, "MCACHE_REPLICATION_LAG", 2.0 if routed else 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(
            "settings.MCACHE_REPLICATION_LAG must be the seconds a replica may be behind"
            f" its primary, such as 2.0 (0: off), got {value!r}"
        )
    return float(value)


def counters_alias(explicit: str | None = None) -> str:
    """Return the cache counters live in: ``explicit``, else ``MCACHE_COUNTERS_CACHE``, else
    the cache everything else uses, so counts may outlive a flushed memcached in a durable one."""
    return explicit or getattr(settings, "MCACHE_COUNTERS_CACHE", None) or cache_alias()
