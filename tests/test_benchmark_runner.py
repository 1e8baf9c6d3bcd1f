"""``python -m tests.benchmarks`` gathers the scripts' figures into one table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.benchmarks.__main__ import rows_of
from tests.benchmarks.common import cpu_seconds

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


def test_cpu_seconds_counts_a_servers_worker_processes_and_not_what_sleeps() -> None:
    """bench_edge's CPU per request is the server's and its workers': a child that burns
    CPU is counted in its parent's figure, and time a process spends asleep is not."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
         "subprocess.Popen([sys.executable, '-c', 'while True: pass'])\ntime.sleep(60)"],
        start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(1)  # the worker has started
        before = cpu_seconds(parent.pid)
        time.sleep(1)  # the worker burns about a second of CPU meanwhile, the parent sleeps
        spent = cpu_seconds(parent.pid) - before
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert 0.25 <= spent <= 1.3  # shared cores may give the worker less than all of one
