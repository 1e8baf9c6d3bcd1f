"""``manage.py mcache_stats``: the servers and mcache's own counters of an mcache cache."""

from __future__ import annotations

from typing import Any

from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcache import Cache
from mcache.admin.stats_command import SERVER_DOWN, StatsError, StatsRequest, down_message, run

from ...aliases import check_alias


class Command(BaseCommand):
    help = "Show server statistics, mcache's hit ratio, slab memory, or a key's trace."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--cache", default="default", help="the CACHES alias (default: default)"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument("--watch", type=float, metavar="SECONDS", help="repeat every SECONDS")
        parser.add_argument("--slabs", action="store_true", help="chart memory per slab class")
        parser.add_argument("--png", metavar="FILE", help="draw the slab chart into FILE")
        parser.add_argument("--trace", metavar="KEY", help="show the event letters of KEY")
        parser.add_argument(
            "--trace-view", metavar="PATH", help="show the event letters of the pages of PATH"
        )
        parser.add_argument(
            "--trace-fragment", metavar="NAME", help="show the event letters of fragment NAME"
        )
        parser.add_argument(
            "--top", type=int, metavar="N", help="list the N entries read most recently (memcached)"
        )
        parser.add_argument("--count", type=int, default=0, help=False)  # --watch rounds (tests)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["watch"] is not None and options["watch"] <= 0:
            raise CommandError("--watch takes a number of seconds > 0, e.g. --watch 5")
        alias, key = options["cache"], options["trace"]
        cache = _core_cache(alias)
        request = StatsRequest(
            as_json=options["json"],
            slabs=options["slabs"],
            png=options["png"],
            top=options["top"],
            trace_keys=[] if key is None else _store_keys(cache, caches[alias], key),
            trace_view=options["trace_view"],
            trace_fragment=options["trace_fragment"],
            tracing_setting=f"CACHES[{alias!r}]['OPTIONS']['trace_dir']",
        )
        try:
            down = run(cache, request, self.stdout.write, options["watch"], options["count"])
        except StatsError as error:
            raise CommandError(str(error)) from None
        if down:
            raise CommandError(down_message(down), returncode=SERVER_DOWN)


def _core_cache(alias: str) -> Cache:
    try:
        check_alias(alias, "--cache")
    except ImproperlyConfigured as error:
        raise CommandError(str(error)) from None
    return caches[alias].mcache  # type: ignore[no-any-return]


def _store_keys(cache: Cache, backend: Any, key: str) -> list[str]:
    """Where a key given to ``--trace`` may be traced: as Django's API, mcache's, or verbatim."""
    return [cache.key(backend.make_key(key)), cache.key(key), key]
