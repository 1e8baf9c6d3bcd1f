"""System checks: a misconfigured mcache cache fails ``manage.py check``, not a request.

``E001``: a cache whose LOCATION or OPTIONS cannot be used. ``E002``:
``MCACHE_CACHE`` or ``MCACHE_COUNTERS_CACHE`` naming no mcache cache. ``E003``: an
``MCACHE_ONLINE_NOISE`` that is no fraction. ``W001``
and ``W002``: the ``MCACHE_CACHE`` or the sessions' cache kept in one process's
memory. ``W004``: sessions in the cache alone (no ``django.contrib.sessions``).
``W003`` (``--deploy`` only, as it asks the servers): a server that does
not answer. Warnings are silenced as any Django check's, ``SILENCED_SYSTEM_CHECKS``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from mcache import Cache
from mcache.admin.report import servers_down
from mcache.errors import MCacheError
from mcache.features.visitors import checked_noise
from mcache.stores.redaction import redacted_url

from .aliases import BACKEND, cache_alias, check_alias
from .config import cache_from_settings

SESSION_ENGINE = "django_mcache.sessions"
SHARED_STORES = "'memcached://127.0.0.1:11211' or 'redis://127.0.0.1:6379/0'"


@register("caches")
def check_caches(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Report every mcache cache whose LOCATION or OPTIONS cannot be used, with the fix."""
    errors = []
    for alias, params in getattr(settings, "CACHES", {}).items():
        if params.get("BACKEND") != BACKEND:
            continue
        try:
            cache_from_settings(params.get("LOCATION", ""), params)
        except (MCacheError, TypeError, ValueError) as error:  # whatever the option, a clear E001
            errors.append(
                Error(
                    f"CACHES[{alias!r}]: {error}",
                    hint="Fix LOCATION or OPTIONS: every option is in docs/reference/settings.md"
                    " (the docs' Reference, Settings), every LOCATION in"
                    " docs/reference/stores.md.",
                    obj=alias,
                    id="django_mcache.E001",
                )
            )
    return errors


@register("caches")
def check_aliases(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Report ``MCACHE_CACHE`` or ``MCACHE_COUNTERS_CACHE`` naming no mcache cache."""
    errors = []
    for setting in ("MCACHE_CACHE", "MCACHE_COUNTERS_CACHE"):
        alias = getattr(settings, setting, None)
        if alias is None:
            continue
        try:
            check_alias(alias, setting)
        except ImproperlyConfigured as error:
            errors.append(Error(str(error), obj=setting, id="django_mcache.E002"))
    return errors


@register("caches")
def check_online_noise(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Report an ``MCACHE_ONLINE_NOISE`` that is no fraction: ``{% online_count %}`` would
    fail on every page that shows it."""
    try:
        checked_noise(getattr(settings, "MCACHE_ONLINE_NOISE", 0.0), "MCACHE_ONLINE_NOISE")
    except ValueError as error:
        return [Error(str(error), obj="MCACHE_ONLINE_NOISE", id="django_mcache.E003")]
    return []


@register("caches")
def check_shared_across_processes(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn where what every process must see is kept in one process's memory."""
    warnings: list[CheckMessage] = []
    alias = cache_alias()
    if _process_local(alias):
        warnings.append(
            Warning(
                f"CACHES[{alias!r}] (MCACHE_CACHE: the cache ORM invalidation, cached_view,"
                f" {{% cachedblock %}} and view counters use) is {_location(alias)!r}, kept in"
                " each process's own memory: a save in another process (manage.py shell, a"
                " task worker, another gunicorn worker) never invalidates this process's"
                " pages, and each process counts views of its own.",
                hint=f"Set its LOCATION to a shared store, e.g. {SHARED_STORES}. A site that"
                " only ever runs one process may silence this with"
                " SILENCED_SYSTEM_CHECKS = ['django_mcache.W001'].",
                obj=alias,
                id="django_mcache.W001",
            )
        )
    session_alias = getattr(settings, "SESSION_CACHE_ALIAS", "default")
    if getattr(settings, "SESSION_ENGINE", "") == SESSION_ENGINE and _process_local(session_alias):
        warnings.append(
            Warning(
                f"SESSION_ENGINE is {SESSION_ENGINE!r} on CACHES[{session_alias!r}], which is"
                f" {_location(session_alias)!r}, kept in each process's own memory: every"
                " restart (and every runserver autoreload) logs everyone out, and each worker"
                " process knows only the sessions it created.",
                hint=f"Point SESSION_CACHE_ALIAS at an mcache cache on {SHARED_STORES}, or use"
                " SESSION_ENGINE = 'django.contrib.sessions.backends.cached_db'.",
                obj=session_alias,
                id="django_mcache.W002",
            )
        )
    return warnings


@register("caches")
def check_sessions_outlive_the_cache(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn where sessions live in the cache alone: Django's sessions app is not installed,
    so nothing writes them through to the database."""
    from django.apps import apps

    engine = getattr(settings, "SESSION_ENGINE", "")
    if engine != SESSION_ENGINE or apps.is_installed("django.contrib.sessions"):
        return []
    return [
        Warning(
            f"SESSION_ENGINE is {SESSION_ENGINE!r} without 'django.contrib.sessions' in"
            " INSTALLED_APPS, so sessions live in the cache alone: while its servers are"
            " down no visitor stays signed in, and a server that restarts empty signs out"
            " everyone whose session it held.",
            hint="Add 'django.contrib.sessions' to INSTALLED_APPS and run migrate: sessions"
            " are then written through to the database and read from the cache.",
            obj="SESSION_ENGINE",
            id="django_mcache.W004",
        )
    ]


@register("caches", deploy=True)
def check_reachable(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn, before a deploy, about each mcache cache with a server that does not answer:
    requests degrade to the backend, so nothing else would tell."""
    warnings: list[CheckMessage] = []
    for alias in getattr(settings, "CACHES", {}):
        core = _core_of(alias)
        down = [] if core is None else servers_down(core.server_stats())
        if down:
            warnings.append(
                Warning(
                    f"CACHES[{alias!r}] ({_location(alias)!r}): no answer from"
                    f" {', '.join(down)}. Requests still work, but each one that needs these"
                    " servers' keys builds its page or value from the backend.",
                    hint="Start the server(s), or fix LOCATION; `manage.py mcache_stats"
                    f" --cache {alias}` shows each server's state.",
                    obj=alias,
                    id="django_mcache.W003",
                )
            )
    return warnings


def _location(alias: str) -> str:
    return redacted_url(settings.CACHES.get(alias, {}).get("LOCATION", ""))


def _process_local(alias: str) -> bool:
    """Return whether the mcache cache ``alias`` keeps its data in this process alone."""
    core = _core_of(alias)
    return core is not None and core.shared.traits.process_local


def _core_of(alias: str) -> Cache | None:
    """Return the core cache of ``alias``; None if it is no usable mcache cache (E001 says why)."""
    if getattr(settings, "CACHES", {}).get(alias, {}).get("BACKEND") != BACKEND:
        return None
    from django.core.cache import caches

    try:
        core = caches[alias].mcache
    except (ImproperlyConfigured, MCacheError):
        return None
    return core if isinstance(core, Cache) else None
