"""What every benchmark script shares: alternating timing, percentiles, tables."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["Call", "latency_row", "measure", "p99", "table"]

Call = Callable[[], object]


def _sample(call: Call, calls: int) -> list[float]:
    timings = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        call()
        timings.append((clock() - start) / 1000)
    return timings


def measure(
    subject: Call, anchor: Call, rounds: int, calls: int
) -> tuple[list[float], list[float]]:
    """Time ``subject`` and ``anchor`` alternately; return their samples in µs.

    Alternating in rounds makes drift on a busy machine (another process, CPU
    frequency, the VM's neighbours) hit both sides alike, so the ratio holds.
    """
    _sample(subject, calls // 4)
    _sample(anchor, calls // 4)
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        mine += _sample(subject, calls)
        theirs += _sample(anchor, calls)
    return mine, theirs


def p99(samples: list[float]) -> float:
    """Return the 99th percentile."""
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def latency_row(name: str, mine: list[float], theirs: list[float]) -> list[str]:
    """Return ``[name, p50, anchor p50, ratio]`` for a measured pair."""
    ratio = statistics.median(mine) / statistics.median(theirs)
    return [
        name,
        f"{statistics.median(mine):.1f}",
        f"{statistics.median(theirs):.1f}",
        f"{ratio:.2f}×",
    ]


def table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    """Format rows as a Markdown table, or as aligned plain text."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in [header, *rows])
