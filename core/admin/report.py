"""What the stats commands print: servers, mcache's own counters, slab memory, traces.

Framework-neutral, so ``manage.py mcache_stats`` and ``flask mcache stats`` show
the same report. The servers' own hit ratio counts every ``get`` (tag versions,
locks and counters included); mcache's counters count only the reads callers
asked for, which is the ratio to judge a cache by.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcache.cache import Cache
from mcache.observe.stats import COUNTERS
from mcache.observe.trace import LEGEND

__all__ = [
    "byte_size",
    "collect",
    "eviction_warnings",
    "number_text",
    "render_text",
    "server_cell",
    "servers_down",
    "slab_chart",
    "slab_png",
    "slab_rows",
    "table",
    "trace_letters",
    "traced",
]

SERVER_FIELDS = (
    ("uptime", "uptime s"),
    ("bytes", "used bytes"),
    ("limit_maxbytes", "limit bytes"),
    ("curr_items", "items"),
    ("cmd_get", "gets"),
    ("get_hits", "hits"),
    ("evictions", "evictions"),
    ("curr_connections", "connections"),
)
CACHE_FIELDS = tuple(
    (name, "stale served" if name == "stale" else name.replace("_", " ")) for name in COUNTERS
)

PER_PROCESS = (
    "mcache: this process only. The store lives in one process (memory://), so a command"
    " run on its own sees its own empty store, not what the site's processes counted;"
    " read the counters inside a site process (cache.stats()) or use a shared store."
)


def collect(cache: Cache, previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return ``{"cache": mcache's counters, "servers": {name: fields + hit_ratio},
    "scope": "every process" or "this process", "counts_age": seconds or None,
    "warnings": [...]}``.

    It flushes nothing: ``counts_age`` says how long ago the site's processes last
    added up their counts. A ``process_local`` store's counters are the asking
    process's own, and the report says so. ``previous``: the last ``--watch``
    round's report, to tell evictions that are rising now.
    """
    if cache.shared.traits.process_local:
        report = cache.stats()
        report["cache"].pop("flushed_at", None)
        report.update(servers={}, scope="this process", counts_age=None, warnings=[])
        return report
    report = cache.stats(flush=False)
    flushed = report["cache"].pop("flushed_at", None)
    report["scope"] = "every process"
    report["counts_age"] = None if flushed is None else max(0.0, time.time() - flushed)
    report["flush_interval"] = cache.counts.interval
    for fields in report["servers"].values():
        hits, misses = fields.get("get_hits", 0), fields.get("get_misses", 0)
        looked_up = hits + misses if isinstance(hits, int) and isinstance(misses, int) else 0
        fields["hit_ratio"] = hits / looked_up if looked_up else 0.0
        fields.setdefault("cmd_get", looked_up)
    report["warnings"] = eviction_warnings(report["servers"], (previous or {}).get("servers"))
    return report


def servers_down(servers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Return the names of the servers a report lists as down."""
    return sorted(name for name, fields in servers.items() if fields.get("dead"))


def eviction_warnings(
    servers: Mapping[str, Mapping[str, Any]], before: Mapping[str, Mapping[str, Any]] | None
) -> list[str]:
    """Return a warning per server that evicts (the cache is smaller than its working set);
    one whose evictions rose since ``before`` (the last round's servers) is named as rising.
    """
    warnings = []
    for name, fields in sorted(servers.items()):
        evictions = fields.get("evictions")
        if not isinstance(evictions, int) or evictions <= 0:
            continue
        earlier = (before or {}).get(name, {}).get("evictions")
        uptime = fields.get("uptime")
        if isinstance(earlier, int) and evictions > earlier:
            seen = f"evictions rising (+{evictions - earlier:,} since the last round)"
        elif isinstance(uptime, int) and uptime > 0:
            hourly = f"{evictions / uptime * 3600:,.0f} an hour"
            seen = f"{evictions:,} evictions, {hourly} over its {_duration(uptime)} uptime"
        else:
            seen = f"{evictions:,} evictions"
        warnings.append(f"{name}: {seen}: {TOO_SMALL}")
    return warnings


TOO_SMALL = (
    "items are pushed out before they expire, so the cache is smaller than its working set;"
    " give it more memory (memcached -m, Redis maxmemory) or cache less"
)


def render_text(report: Mapping[str, Any]) -> str:
    """Return the report as aligned text: one table of servers, one of mcache's counters, and
    a line of the session store's reads when it counted any."""
    if report.get("scope") == "this process":
        return "\n".join([PER_PROCESS, "", *_counter_lines(report["cache"])])
    lines = ["servers"]
    header = ["server", *(label for _, label in SERVER_FIELDS), "hit ratio"]
    rows = []
    for name, fields in sorted(report["servers"].items()):
        if fields.get("dead"):
            rows.append([name, "DEAD", *[""] * len(SERVER_FIELDS)])
            continue
        cells = [server_cell(field, fields.get(field, "")) for field, _ in SERVER_FIELDS]
        rows.append([name, *cells, f"{fields.get('hit_ratio', 0.0):.1%}"])
    lines += table(header, rows)
    lines += ["", "mcache (every process; tag, lock, counter and session keys not counted)"]
    lines += _counter_lines(report["cache"])
    if report.get("sessions"):
        lines += ["", _sessions_line(report["sessions"])]
    lines += ["", _age(report)]
    lines += [f"warning: {warning}" for warning in report.get("warnings", ())]
    return "\n".join(lines)


def _sessions_line(sessions: Mapping[str, Any]) -> str:
    """Say what the session store read, counted apart: sessions are no cached values."""
    found, errors = sessions.get("hits", 0), sessions.get("store_errors", 0)
    read = found + sessions.get("misses", 0)
    return (
        f"sessions (counted apart): {number_text(read)} read, {number_text(found)} found,"
        f" {number_text(errors)} store errors"
    )


def _age(report: Mapping[str, Any]) -> str:
    """Say how old the counters are: the command adds nothing, it reads what processes added."""
    every = f"{report.get('flush_interval', 5.0):g} s"
    interval = f"each process adds its counts on its first call {every} after the last time"
    age = report.get("counts_age")
    if age is None:
        return f"counts: no process has added its counts yet ({interval})"
    return f"counts as of {_duration(age)} ago ({interval}, and at exit; an idle one waits)"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _counter_lines(counters: Mapping[str, Any]) -> list[str]:
    return table(
        ["counter", "value"],
        [[label, number_text(counters.get(field, 0))] for field, label in CACHE_FIELDS]
        + [["hit ratio", f"{counters.get('hit_ratio', 0.0):.1%}"]],
    )


def server_cell(field: str, value: Any) -> str:
    """Return a server field for the table: a limit of 0 (Redis without ``maxmemory``) or
    none at all is no limit, not a limit of nothing."""
    if field == "limit_maxbytes" and value in (0, None, ""):
        return "no limit"
    return number_text(value)


def trace_letters(
    cache: Cache, keys: list[str], view: str | None = None, fragment: str | None = None
) -> dict[str, str]:
    """Return the trace letters of the first of ``keys`` traced (the store keys a key may be
    stored under), of every page of a URL path (``view``), and of every key of a fragment
    name, by store key.

    Raises ``ValueError`` when tracing is off (no ``trace_dir``).
    """
    tracer = cache.tracer
    if tracer.trace_dir is None:
        raise ValueError("tracing is off")
    found: dict[str, str] = {}
    for store_key in keys:
        letters = tracer.read(store_key)
        if letters:
            found[store_key] = letters
            break
    if view:
        found.update(tracer.find("." + view))
    if fragment:
        for kind in ("block", "jinja"):  # Django's {% mcache %}, Flask's Jinja tag
            found.update(tracer.find(f"{kind}.{fragment}"))
    return found


def traced(
    cache: Cache, keys: list[str], view: str | None = None, fragment: str | None = None
) -> str:
    """Return the trace letters of a key (``keys``: the store keys it may be stored under,
    ending with the key as asked for), of every page of a URL path (``view``), or of every
    key of a fragment name, as lines; a key is shown under the name it was asked by.

    Raises ``ValueError`` when tracing is off (no ``trace_dir``).
    """
    found = {
        (keys[-1] if key in keys else key): letters
        for key, letters in trace_letters(cache, keys, view, fragment).items()
    }
    if not found:
        asked = view or fragment or (keys[-1] if keys else "")
        return f"{asked}: no events yet ({LEGEND})"
    return "\n".join(f"{key}: {letters}" for key, letters in found.items())


def slab_rows(detail: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[tuple[int, int, int]]:
    """Return ``(chunk size, bytes allocated, bytes in use)`` per slab class, over all servers.

    Allocated is pages × 1 MiB; in use is the chunks holding items × chunk size.
    """
    by_size: dict[int, list[int]] = {}
    for classes in detail.values():
        for name, fields in classes.items():
            if not name.isdigit() or "chunk_size" not in fields:
                continue
            size = int(fields["chunk_size"])
            sums = by_size.setdefault(size, [0, 0])
            sums[0] += int(fields.get("total_pages", 0)) * 1024 * 1024
            sums[1] += int(fields.get("used_chunks", 0)) * size
    return [(size, total, used) for size, (total, used) in sorted(by_size.items())]


def slab_chart(rows: list[tuple[int, int, int]], width: int = 50) -> str:
    """Return a terminal bar chart of memory per chunk size (``#`` in use, ``.`` allocated)."""
    if not rows:
        return "no slab classes in use (the store is not memcached, or it is empty)"
    peak = max(total for _, total, _ in rows) or 1
    lines = [f"{'chunk':>9}  {'allocated':>10}  {'in use':>10}"]
    for size, total, used in rows:
        bar_total = max(1, round(total / peak * width)) if total else 0
        bar_used = min(bar_total, round(used / peak * width))
        bar = "#" * bar_used + "." * (bar_total - bar_used)
        lines.append(f"{byte_size(size):>9}  {byte_size(total):>10}  {byte_size(used):>10}  {bar}")
    return "\n".join(lines)


def slab_png(rows: list[tuple[int, int, int]], path: str | Path) -> Path:
    """Draw the slab chart into a PNG with matplotlib (an optional dependency)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as error:
        raise RuntimeError(
            "--png needs matplotlib: pip install matplotlib (the text chart needs nothing)"
        ) from error
    labels = [byte_size(size) for size, _, _ in rows]
    figure, axes = pyplot.subplots(figsize=(max(6, len(rows) * 0.5), 4))
    axes.bar(labels, [t / 2**20 for _, t, _ in rows], color="#cccccc", label="allocated")
    axes.bar(labels, [u / 2**20 for _, _, u in rows], color="#2a6ebb", label="in use")
    axes.set_xlabel("chunk size")
    axes.set_ylabel("MiB")
    axes.set_title("memcached memory per slab class")
    axes.tick_params(axis="x", rotation=60)
    axes.legend()
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target)
    pyplot.close(figure)
    return target


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Return the rows as lines of right-aligned columns under ``header``."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
    ]


def number_text(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def byte_size(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)
