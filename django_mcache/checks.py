"""System checks: a misconfigured mcache cache fails ``manage.py check``, not a request."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from mcache.errors import MCacheError

from .config import cache_from_settings

BACKEND = "django_mcache.backend.MCacheBackend"


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
                    hint="Fix LOCATION or OPTIONS; the README's Django section lists them all.",
                    obj=alias,
                    id="django_mcache.E001",
                )
            )
    return errors
