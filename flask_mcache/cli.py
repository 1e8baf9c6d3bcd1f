"""``flask mcache …``: stats (the same report as Django's ``mcache_stats``), invalidate, flush."""

from __future__ import annotations

import sys

import click
from flask import current_app
from flask.cli import AppGroup

from mcache import Cache
from mcache.admin.stats_command import SERVER_DOWN, StatsError, StatsRequest, down_message, run
from mcache.errors import ConfigError
from mcache.features.warm import warm_from

mcache_cli = AppGroup("mcache", help="mcache: statistics, invalidation, flush, warm-up.")


def _cache() -> Cache:
    cache = current_app.extensions.get("mcache")
    if cache is None:
        raise click.ClickException("this app has no mcache: call MCache(app) or init_app(app)")
    return cache


@mcache_cli.command("stats")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--slabs", is_flag=True, help="chart memory per slab class (memcached)")
@click.option("--png", metavar="FILE", help="draw the slab chart into FILE (matplotlib)")
@click.option("--top", type=int, metavar="N", help="list the N entries read most recently")
@click.option("--trace", metavar="KEY", help="show the event letters of KEY")
@click.option("--trace-view", metavar="PATH", help="show the event letters of PATH's pages")
@click.option("--trace-fragment", metavar="NAME", help="show the event letters of fragment NAME")
@click.option("--watch", type=click.FloatRange(min=0.01), help="repeat every N seconds")
@click.option("--count", type=int, default=0, hidden=True)
def stats(
    as_json: bool,
    slabs: bool,
    png: str | None,
    top: int | None,
    trace: str | None,
    trace_view: str | None,
    trace_fragment: str | None,
    watch: float | None,
    count: int,
) -> None:
    """Show the servers and mcache's own counters (hit ratio net of tag/lock/counter keys)."""
    cache = _cache()
    request = StatsRequest(
        as_json=as_json,
        slabs=slabs,
        png=png,
        top=top,
        trace_keys=[] if trace is None else [cache.key(trace), trace],
        trace_view=trace_view,
        trace_fragment=trace_fragment,
        tracing_setting="MCACHE_TRACE_DIR",
    )
    try:
        down = run(cache, request, click.echo, watch, count)
    except StatsError as error:
        raise click.ClickException(str(error)) from None
    if down:
        click.echo(down_message(down), err=True)
        raise SystemExit(SERVER_DOWN)


@mcache_cli.command("invalidate")
@click.argument("tags", nargs=-1, required=True)
def invalidate(tags: tuple[str, ...]) -> None:
    """Bump TAGS: every entry carrying one of them is stale from now on."""
    versions = _cache().invalidate(*tags)
    if not versions:
        raise click.ClickException("the store could not be reached; nothing was invalidated")
    for tag, version in versions.items():
        click.echo(f"{tag} {version}")


@mcache_cli.command("flush")
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
def flush(yes: bool) -> None:
    """Remove every key of the store (all of it, not only this app's namespace)."""
    cache = _cache()
    if not yes:
        click.confirm(f"Flush every key of {cache.store!r}?", abort=True)
    if not cache.clear():  # this process's near copies go with the store's keys
        raise click.ClickException("flush failed: the store could not be reached (logged)")
    click.echo("flushed")


@mcache_cli.command("warm")
@click.argument("source")
@click.option("--queue", is_flag=True, help="hand each rebuild to the cache's refresher")
def warm(source: str, queue: bool) -> None:
    """Build the cached results SOURCE (a callable's dotted path) yields, with a progress bar.

    SOURCE yields (cached_function, args) or (cached_function, args, kwargs).
    """
    _cache()
    try:
        progress = warm_from(source, queue, click.echo, sys.stdout.isatty())
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    if progress.outcomes["failed"]:
        raise click.ClickException(f"{progress.outcomes['failed']} builds failed (see the log)")
