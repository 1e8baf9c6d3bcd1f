"""``manage.py mcache_warm path.to.callable [--queue]``: build cached results before visitors do.

The callable yields ``(cached_function, args)`` or ``(cached_function, args,
kwargs)``; each result is rebuilt now, or with ``--queue`` handed to the
cache's refresher (Celery, RQ or Tasks workers) under its lock.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcache.errors import ConfigError
from mcache.features.warm import warm_from


class Command(BaseCommand):
    help = "Build (or queue) the cached results a callable yields, with a progress bar."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="dotted path of a callable yielding (function, args)")
        parser.add_argument(
            "--queue", action="store_true", help="hand each rebuild to the cache's refresher"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            progress = warm_from(
                options["source"], options["queue"], self.stdout.write, self.stdout.isatty()
            )
        except ConfigError as error:
            raise CommandError(str(error)) from None
        if progress.outcomes["failed"]:
            raise CommandError(f"{progress.outcomes['failed']} builds failed (see the log)")
