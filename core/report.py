"""What the stats commands print: servers, mcache's own counters, slab memory, traces.

Framework-neutral, so ``manage.py mcache_stats`` and ``flask mcache stats`` show
the same report. The servers' own hit ratio counts every ``get`` (tag versions,
locks and counters included); mcache's counters count only the reads callers
asked for, which is the ratio to judge a cache by.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .cache import Cache

__all__ = ["collect", "render_text", "slab_chart", "slab_png", "slab_rows"]

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
CACHE_FIELDS = (
    ("hits", "hits"),
    ("misses", "misses"),
    ("stale", "stale served"),
    ("builds", "builds"),
    ("build_errors", "build errors"),
    ("lock_waits", "lock waits"),
    ("wait_timeouts", "wait timeouts"),
    ("coalesced", "coalesced"),
    ("uncached", "uncached"),
    ("store_errors", "store errors"),
)


PER_PROCESS = (
    "mcache: this process only. The store lives in one process (memory://), so a command"
    " run on its own sees its own empty store, not what the site's processes counted;"
    " read the counters inside a site process (cache.stats()) or use a shared store."
)


def collect(cache: Cache) -> dict[str, Any]:
    """Return ``{"cache": mcache's counters, "servers": {name: fields + hit_ratio},
    "scope": "every process" or "this process"}``.

    A per-process store (``process_local``) has no servers another process
    could read, and its counters are the asking process's own: the report says
    so and lists no servers rather than the asking process's empty store.
    """
    report = cache.stats()
    if getattr(cache.shared, "process_local", False):
        report["servers"] = {}
        report["scope"] = "this process"
        return report
    report["scope"] = "every process"
    for fields in report["servers"].values():
        hits, misses = fields.get("get_hits", 0), fields.get("get_misses", 0)
        looked_up = hits + misses if isinstance(hits, int) and isinstance(misses, int) else 0
        fields["hit_ratio"] = hits / looked_up if looked_up else 0.0
        fields.setdefault("cmd_get", looked_up)
    return report


def render_text(report: Mapping[str, Any]) -> str:
    """Return the report as aligned text: one table of servers, one of mcache's counters."""
    if report.get("scope") == "this process":
        return "\n".join([PER_PROCESS, "", *_counter_lines(report["cache"])])
    lines = ["servers"]
    header = ["server", *(label for _, label in SERVER_FIELDS), "hit ratio"]
    rows = []
    for name, fields in sorted(report["servers"].items()):
        if fields.get("dead"):
            rows.append([name, "DEAD", *[""] * len(SERVER_FIELDS)])
            continue
        cells = [_cell(field, fields.get(field, "")) for field, _ in SERVER_FIELDS]
        rows.append([name, *cells, f"{fields.get('hit_ratio', 0.0):.1%}"])
    lines += _table(header, rows)
    lines += ["", "mcache (every process; tag, lock and counter keys not counted)"]
    return "\n".join([*lines, *_counter_lines(report["cache"])])


def _counter_lines(counters: Mapping[str, Any]) -> list[str]:
    return _table(
        ["counter", "value"],
        [[label, _number(counters.get(field, 0))] for field, label in CACHE_FIELDS]
        + [["hit ratio", f"{counters.get('hit_ratio', 0.0):.1%}"]],
    )


def _cell(field: str, value: Any) -> str:
    """Return a server field for the table: a limit of 0 (Redis without ``maxmemory``) or
    none at all is no limit, not a limit of nothing."""
    if field == "limit_maxbytes" and value in (0, None, ""):
        return "no limit"
    return _number(value)


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
        lines.append(f"{_size(size):>9}  {_size(total):>10}  {_size(used):>10}  {bar}")
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
    labels = [_size(size) for size, _, _ in rows]
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


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(str(c).rjust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
    ]


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _size(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return str(size)
