"""What tracing costs a hot key: a letter written, and a hit traced against one untraced.

    python -m tests.benchmarks.bench_tracing [--rounds 5] [--calls 20000] [--markdown]

With ``trace_dir=`` set, every event of a key appends a letter to its trace file. A
tracer keeps the file of each key it traced lately open and writes each letter with one
``write``; the anchor of the first row opens, appends to and closes the file for every
letter, as a tracer that keeps nothing open does. The second row is a ``get_or_build``
hit on ``memory://`` traced against the same hit untraced (no server, so the difference
is the trace's whole cost), which the target bounds at 5 µs: a memcached round trip on
loopback costs ten times that. Interleaved rounds, unpinned; figures are medians in µs.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from mcache import Cache
from mcache.observe.trace import Tracer
from tests.benchmarks.common import Figure, arguments, interleaved, report, table

KEY = "bench:view.catalog.https.shop.example./products/_3f0c9a2b7d41e5f6a8b9c0d1e2f3a4b5"
TARGET_US = 5.0


def opened_each_time(path: Path) -> None:
    """Append one letter the way a tracer that keeps no file open does."""
    with open(path, "a", encoding="ascii") as file:
        file.write("H")


def rows(rounds: int, calls: int, where: str) -> tuple[list[list[str]], list[Figure]]:
    """Return the table's rows and the figures: one letter, and one traced hit."""
    tracer = Tracer(Path(where) / "letters")
    path = tracer.path(KEY)
    traced = Cache("memory://", namespace="b", trace_dir=str(Path(where) / "hits"))
    plain = Cache("memory://", namespace="b")
    for cache in (traced, plain):
        cache.get_or_build("page", lambda: "a page", ttl=3600)
    letter_us, reopened_us = (
        statistics.median(samples)
        for samples in interleaved(
            [lambda: tracer.event(KEY, "H"), lambda: opened_each_time(path)], rounds, calls
        )
    )
    traced_us, plain_us = (
        statistics.median(samples)
        for samples in interleaved(
            [
                lambda: traced.get_or_build("page", str, ttl=3600),
                lambda: plain.get_or_build("page", str, ttl=3600),
            ],
            rounds,
            calls,
        )
    )
    added = traced_us - plain_us
    met = added <= TARGET_US
    table_rows = [
        ["one letter: file kept open ÷ opened each time", f"{letter_us:.2f}",
         f"{reopened_us:.2f}", f"{letter_us / reopened_us:.2f}×", ""],
        ["a hit on memory://: traced ÷ untraced", f"{traced_us:.2f}", f"{plain_us:.2f}",
         f"{added:+.2f} µs", str(met)],
    ]  # fmt: skip
    figures = [
        Figure(
            "tracing, one letter (µs)",
            f"{letter_us:.2f} µs",
            f"{reopened_us:.2f} µs opened each time",
            f"{letter_us / reopened_us:.2f}×",
            "",
            None,
        ),
        Figure(
            "tracing, a hit on memory:// (µs added)",
            f"{traced_us:.2f} µs",
            f"{plain_us:.2f} µs untraced",
            f"{added:+.2f} µs",
            f"≤ +{TARGET_US:.0f} µs",
            met,
        ),
    ]
    tracer.close()
    traced.tracer.close()
    return table_rows, figures


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        table_rows, figures = rows(args.rounds, args.calls, where)
    header = ["trace", "µs (p50)", "anchor µs (p50)", "ratio", f"≤ {TARGET_US:.0f} µs added"]
    print(table(header, table_rows, args.markdown))
    report(figures, args.figures)


if __name__ == "__main__":
    main()
