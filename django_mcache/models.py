"""The cache dashboard's place in Django's admin: a model with no table, for its permissions.

Django's admin lists and guards models, so the dashboard is a model the database never
sees (``managed = False``): it gives the page its address (``/admin/mcache/dashboard/``)
and its two permissions, which staff users are granted like any other.
"""

from django.db import models


class Dashboard(models.Model):
    """The cache dashboard (no rows, no table)."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_dashboard", "Can view the cache dashboard"),
            ("act_on_caches", "Can invalidate, refresh and flush caches from the dashboard"),
        ]
        verbose_name = "cache dashboard"
        verbose_name_plural = "cache dashboard"
