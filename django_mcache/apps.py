"""The Django app: registers the configuration checks."""

from django.apps import AppConfig


class DjangoMCacheConfig(AppConfig):
    """``django_mcache`` in ``INSTALLED_APPS``: template tags, management commands, checks, and
    the cache dashboard in the admin."""

    name = "django_mcache"
    label = "mcache"
    """The admin shows the dashboard under ``/admin/mcache/``; no table carries the label."""
    verbose_name = "mcache"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from django.core.signals import setting_changed

        from . import checks  # noqa: F401  (registers the checks)
        from .signals import connect, reconnect

        connect()
        setting_changed.connect(reconnect, dispatch_uid="mcache_reconnect")
