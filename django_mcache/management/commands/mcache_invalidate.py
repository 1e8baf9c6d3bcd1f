"""``manage.py mcache_invalidate [TAG …] [--model app_label.Model …] [--cache alias]``.

What Flask's ``flask mcache invalidate`` does: after a bulk ``update()`` or a
raw SQL change the ORM never saw, or a deploy that changes how a page looks,
make stale every entry carrying these tags (a model's tag with ``--model``).
"""

from __future__ import annotations

from typing import Any

from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_mcache.aliases import cache_alias, check_alias
from django_mcache.tags import Dependencies


class Command(BaseCommand):
    help = "Bump tags: every entry carrying one of them is stale from now on."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tags", nargs="*", help="tag names, e.g. blog:cooking")
        parser.add_argument(
            "--model",
            action="append",
            default=[],
            help="app_label.Model whose model tag to bump (repeatable)",
        )
        parser.add_argument("--cache", default=None, help="cache alias (default MCACHE_CACHE)")

    def handle(self, *args: Any, **options: Any) -> None:
        alias = cache_alias(options["cache"])
        try:
            check_alias(alias, "--cache")
            model_tags = Dependencies(options["model"], "--model", followed=False).tags()
        except (ImproperlyConfigured, TypeError) as error:
            raise CommandError(str(error)) from None
        tags = [*options["tags"], *model_tags]
        if not tags:
            raise CommandError("name at least one tag, or --model app_label.Model")
        versions = caches[alias].mcache.invalidate(*tags)
        if not versions:
            raise CommandError("the store could not be reached; nothing was invalidated")
        for tag, version in versions.items():
            self.stdout.write(f"{tag} {version}")
