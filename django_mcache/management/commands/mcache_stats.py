"""``manage.py mcache_stats``: the servers and mcache's own counters of an mcache cache."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.cache import caches
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mcache import Cache
from mcache.report import collect, render_text, slab_chart, slab_png, slab_rows


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
        parser.add_argument("--count", type=int, default=0, help=False)  # --watch rounds (tests)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["watch"] is not None and options["watch"] <= 0:
            raise CommandError("--watch takes a number of seconds > 0, e.g. --watch 5")
        cache = _core_cache(options["cache"])
        rounds = 0
        while True:
            self.stdout.write(self.render(cache, options))
            rounds += 1
            if not options["watch"] or (options["count"] and rounds >= options["count"]):
                return
            time.sleep(options["watch"])

    def render(self, cache: Cache, options: dict[str, Any]) -> str:
        if options["trace"]:
            return _trace(cache, options["cache"], options["trace"])
        if options["slabs"] or options["png"]:
            rows = slab_rows(_slab_detail(cache, "--png" if options["png"] else "--slabs"))
            if options["png"]:
                try:
                    return f"slab chart written to {slab_png(rows, options['png'])}"
                except RuntimeError as error:
                    raise CommandError(str(error)) from None
            if options["json"]:
                return json.dumps(
                    [{"chunk_size": s, "allocated": t, "used": u} for s, t, u in rows]
                )
            return slab_chart(rows)
        report = collect(cache)
        return json.dumps(report, default=str) if options["json"] else render_text(report)


def _core_cache(alias: str) -> Cache:
    from django.conf import settings

    if alias not in settings.CACHES:
        raise CommandError(
            f"no cache {alias!r} in settings.CACHES; choose one of {', '.join(settings.CACHES)}"
        )
    core = getattr(caches[alias], "mcache", None)
    if not isinstance(core, Cache):
        raise CommandError(
            f"CACHES[{alias!r}] is not an mcache cache:"
            " its BACKEND must be django_mcache.backend.MCacheBackend"
        )
    return core


def _slab_detail(cache: Cache, option: str) -> Any:
    store = cache.shared
    detail = getattr(store, "stats_detail", None)
    if detail is None:
        raise CommandError(f"{option} needs a memcached store; this cache uses {store!r}")
    return detail("slabs")


def _trace(cache: Cache, alias: str, key: str) -> str:
    if cache.tracer.trace_dir is None:
        raise CommandError(
            f"tracing is off: set CACHES[{alias!r}]['OPTIONS']['trace_dir'] to a directory"
        )
    backend = caches[alias]
    for store_key in (cache.key(backend.make_key(key)), cache.key(key), key):
        letters = cache.tracer.read(store_key)
        if letters:
            return f"{key}: {letters}"
    return f"{key}: no events yet (M miss, L lock, W write, U unlock, H hit, S stale, E error)"
