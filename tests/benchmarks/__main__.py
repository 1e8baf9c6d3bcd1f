"""Run every benchmark script, then print one table of their headline figures.

    python -m tests.benchmarks [--quick] [--markdown] [--only NAME ...] [--quiet]

Each script runs in its own process (it starts and stops its own servers;
nothing is pinned to a CPU) with ``--figures``, so its figures come back as data, not parsed
text; its full output is shown as it runs unless ``--quiet``. The table has a
row per figure: mcache, the anchor measured in the same run, the ratio, the
target and whether it was met, and the command that reproduces it.
``--markdown`` prints every table as Markdown, for the README. The exit status is
1 when a script failed, not when a figure misses its target: a miss is a
finding to report.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.benchmarks.common import table

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS: dict[str, list[str]] = {  # name -> the arguments that make it quick
    "bench_stores": ["--rounds", "3", "--calls", "500"],
    "bench_ring": ["--keys", "20000", "--rounds", "3", "--calls", "500"],
    "bench_counters": ["--visitors", "10000", "--rounds", "3", "--calls", "300"],
    "bench_get_or_build": ["--quick"],
    "bench_composition": ["--rounds", "2", "--calls", "500"],
    "bench_refresh": ["--rounds", "1"],
    "bench_durable": ["--rounds", "2", "--calls", "300"],
    "bench_redis_topologies": ["--rounds", "2", "--calls", "500"],
    "bench_django": ["--seconds", "2", "--rounds", "2"],
    "bench_real_traffic": ["--seconds", "2", "--rounds", "2"],
    "bench_asgi": ["--seconds", "2", "--rounds", "2"],
    "bench_edge": ["--seconds", "2", "--rounds", "2"],
    "bench_memcached_async": ["--rounds", "2", "--calls", "500"],
    "bench_leases": ["--rounds", "2", "--calls", "300"],
    "bench_fresh_reads": ["--rounds", "2", "--calls", "300"],
    "bench_signing": ["--rounds", "3", "--calls", "5000"],
    "bench_tracing": ["--rounds", "3", "--calls", "5000"],
    "bench_cpu": ["--rounds", "3", "--calls", "500"],
    "soak": ["--seconds", "15"],
}
TIMEOUT = 1800  # seconds one script may take: a hung server start must not hang the runner
HEADER = ["figure", "mcache", "anchor", "ratio", "target", "", "command"]


def run_script(
    name: str, quick: bool, markdown: bool, quiet: bool, figures: Path
) -> tuple[int, float]:
    """Run one script with ``--figures``; return its exit status and seconds taken."""
    argv = [sys.executable, "-m", f"tests.benchmarks.{name}", "--figures", str(figures)]
    argv += SCRIPTS[name] if quick else []
    argv += ["--markdown"] if markdown else []
    started = time.monotonic()
    output = subprocess.DEVNULL if quiet else None
    try:
        status = subprocess.run(
            argv, cwd=ROOT, stdout=output, stderr=output, check=False, timeout=TIMEOUT
        ).returncode
    except subprocess.TimeoutExpired:
        print(f"{name} ran past {TIMEOUT} s and was stopped", file=sys.stderr)
        status = -1
    return status, time.monotonic() - started


def rows_of(name: str, figures: Path, status: int) -> list[list[str]]:
    """Return the table rows of one script's figures (one failure row when it failed)."""
    command = f"`python -m tests.benchmarks.{name}`"
    if status != 0 or not figures.exists():
        return [[f"{name} failed (exit status {status})", "", "", "", "", "FAILED", command]]
    rows = []
    for f in json.loads(figures.read_text()):
        verdict = "" if f["met"] is None else ("meets" if f["met"] else "MISSES")
        cells = [f[field] for field in ("name", "mcache", "anchor", "ratio", "target")]
        rows.append([*cells, verdict, command])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples (a few minutes)")
    parser.add_argument("--markdown", action="store_true", help="print tables as Markdown")
    parser.add_argument("--only", nargs="+", choices=sorted(SCRIPTS), metavar="NAME")
    parser.add_argument(
        "--quiet", action="store_true", help="hide the scripts' own output (progress lines stay)"
    )
    args = parser.parse_args(argv)
    names = args.only or list(SCRIPTS)
    rows: list[list[str]] = []
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            print(f"== {name}", flush=True)
            figures = Path(tmp) / f"{name}.json"
            status, seconds = run_script(name, args.quick, args.markdown, args.quiet, figures)
            print(f"== {name}: {'done' if status == 0 else 'FAILED'} in {seconds:.0f} s\n")
            failed |= status != 0
            rows += rows_of(name, figures, status)
    if not args.markdown:
        rows = [[cell.strip("`") for cell in row] for row in rows]
    print(table(HEADER, rows, args.markdown))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
