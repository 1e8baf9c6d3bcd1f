"""What ``manage.py mcache_stats`` and ``flask mcache stats`` print, for either framework.

Each adapter parses its options into a :class:`StatsRequest` and turns a
:class:`StatsError` into its own command error; the choice between the
report, slabs, hot keys and traces is made once, here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcache.admin.hot_keys import hot_keys, render_hot_keys
from mcache.admin.report import (
    collect,
    render_text,
    servers_down,
    slab_chart,
    slab_png,
    slab_rows,
    traced,
)
from mcache.cache import Cache

__all__ = ["SERVER_DOWN", "StatsError", "StatsRequest", "down_message", "render", "run"]

SERVER_DOWN = 2
"""The commands' exit status when a server of the cache is down (a monitoring check's
CRITICAL); 0 when every server answered, 1 for a mistake in the options."""


class StatsError(Exception):
    """A mistake in the command's options, said as the command's error."""


@dataclass(frozen=True)
class StatsRequest:
    """The options of one stats command run."""

    as_json: bool = False
    slabs: bool = False
    png: str | None = None
    top: int | None = None
    trace_keys: list[str] = field(default_factory=list)
    """The store keys the ``--trace`` key may be stored under, the key as given last."""
    trace_view: str | None = None
    trace_fragment: str | None = None
    tracing_setting: str = "trace_dir"
    """The setting that turns tracing on, named when it is off."""


def render(
    cache: Cache, request: StatsRequest, previous: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any] | None]:
    """Return what to print, and the report a next ``--watch`` round compares with."""
    if request.top is not None and request.top <= 0:
        raise StatsError("--top takes a number of entries > 0, e.g. --top 20")
    if request.trace_keys or request.trace_view or request.trace_fragment:
        try:
            return traced(
                cache, request.trace_keys, request.trace_view, request.trace_fragment
            ), None
        except ValueError:
            raise StatsError(
                f"tracing is off: set {request.tracing_setting} to a directory"
            ) from None
    if request.top:
        try:
            rows = hot_keys(cache, request.top)
        except ValueError as error:
            raise StatsError(str(error)) from None
        return (json.dumps(rows) if request.as_json else render_hot_keys(rows)), None
    if request.slabs or request.png:
        return _slabs(cache, request), None
    report = collect(cache, previous)
    return (json.dumps(report, default=str) if request.as_json else render_text(report)), report


def run(
    cache: Cache,
    request: StatsRequest,
    write: Callable[[str], object],
    watch: float | None = None,
    rounds: int = 0,
) -> list[str]:
    """Write the report once, or every ``watch`` seconds (``rounds`` times, if given).

    Return the servers the last report found down, so the command can exit with
    :data:`SERVER_DOWN` and a monitoring check can alert on it.
    """
    done, previous = 0, None
    while True:
        text, previous = render(cache, request, previous)
        write(text)
        done += 1
        if not watch or (rounds and done >= rounds):
            return servers_down((previous or {}).get("servers", {}))
        time.sleep(watch)


def down_message(down: list[str]) -> str:
    """Say which servers are down, for the command's error output."""
    return f"server(s) down: {', '.join(down)} (exit status {SERVER_DOWN})"


def _slabs(cache: Cache, request: StatsRequest) -> str:
    option = "--png" if request.png else "--slabs"
    if not cache.shared.traits.server_detail:
        raise StatsError(f"{option} needs a memcached store; this cache uses {cache.shared!r}")
    rows = slab_rows(cache.shared.stats_detail("slabs"))  # type: ignore[attr-defined]
    if request.png:
        try:
            return f"slab chart written to {slab_png(rows, request.png)}"
        except RuntimeError as error:
            raise StatsError(str(error)) from None
    if request.as_json:
        return json.dumps([{"chunk_size": s, "allocated": t, "used": u} for s, t, u in rows])
    return slab_chart(rows)
