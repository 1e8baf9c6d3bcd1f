"""The Django app: registers the configuration checks."""

from django.apps import AppConfig


class DjangoMCacheConfig(AppConfig):
    """``django_mcache`` in ``INSTALLED_APPS``: template tags, management commands, checks."""

    name = "django_mcache"
    verbose_name = "mcache"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the checks)
        from .signals import connect

        connect()
