"""``python -m tests.benchmarks`` gathers the scripts' figures into one table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.benchmarks.__main__ import rows_of

ROOT = Path(__file__).resolve().parent.parent
ONLY = ["--only", "bench_ring"]  # the quickest script: the runner's plumbing is the subject


def test_the_runner_prints_one_markdown_row_per_figure_of_each_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks", "--quick", "--quiet", "--markdown", *ONLY],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert lines[0] == "| figure | mcache | anchor | ratio | target |  | command |"
    rows = [line.split(" | ") for line in lines[2:]]
    assert [r[0] for r in rows] == [
        "| ketama: keys moved adding a 5th server",
        "| 3-node MemcachedStore get ÷ raw 1-node get",
    ]
    assert all(r[5] in ("meets", "MISSES") for r in rows), rows
    assert all(r[6] == "`python -m tests.benchmarks.bench_ring` |" for r in rows), rows


def test_a_script_that_failed_is_one_failed_row(tmp_path: Path) -> None:
    rows = rows_of("bench_stores", tmp_path / "never-written.json", 1)
    assert rows == [
        [
            "bench_stores failed (exit status 1)",
            *["", "", "", ""],
            "FAILED",
            "`python -m tests.benchmarks.bench_stores`",
        ]
    ]
