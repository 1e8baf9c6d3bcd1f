"""``python -m tests.sim``: run seeds, replay one, run the mutants, or CI's budgeted mix.

run --seed S            replay seed S (its configuration and violations printed)
run --seeds N [--root R] [--size small|large] [--store memory|text|meta|redis]
                        seeds R .. R+N-1; exits 1 on any violation, printing each seed
                        (--store: every seed on that store, whatever it chose)
mutants [--seeds 200]   every mutant must be caught within its seeds; exits 1 if not
ci --budget SECONDS [--root R]
                        the kept seeds, the mutants, then seeds from R (by default drawn
                        from HEAD's commit) until the budget
"""

from __future__ import annotations

import argparse
import logging
import pathlib
import random
import subprocess
import sys
import time
from collections import Counter

from tests.sim.config import choose
from tests.sim.mutants import CATALOGUE, applied, played
from tests.sim.shrink import calls_in, shrink, write_regression
from tests.sim.simulation import Result, run_seed

KEPT = pathlib.Path(__file__).with_name("failed_seeds.txt")
"""Seeds that ever failed: replayed first by ``ci``, so a fix stays fixed."""


def reached(result: Result) -> set[str]:
    """The named branches a run went through."""
    calls, builds, events = result.history.calls, result.history.builds, result.history.events
    names = {e.kind for e in events}
    if any(c.stale for c in calls):
        names.add("stale served")
    if any(c.shared_flight for c in calls):
        names.add("shared an in-process flight")
    if any(not b.under_lock for b in builds):
        names.add("built without the lock (wait over, or store down)")
    if any(b.ended is not None and b.ended - b.began > result.config.lock_timeout for b in builds):
        names.add("a build outlived lock_timeout")
    if any(c.outcome == "unknown" for c in calls):
        names.add("a call cut off by a kill")
    if any(b.part_stale for b in builds):
        names.add("a page built over a stale row")
    if any(b.part_unknown for b in builds):
        names.add("a page built over a row read that failed")
    if any(c.kind == "tx-read" for c in calls):
        names.add("a read inside a transaction")
    if any(b.process > result.config.processes for b in builds):
        names.add("a rebuild by a queue worker")
    if any(
        method == "get_many_claiming" and args[1].outcome is True and not raised
        for _, method, args, _, raised in result.history.applied
    ):
        names.add("a stale entry's rebuild claimed in its read (Redis)")
    names.update(f"counted: {name}" for name, count in result.counts.items() if count)
    return names


REQUIRED = (
    "stale served",
    "a stale entry's rebuild claimed in its read (Redis)",
    "shared an in-process flight",
    "built without the lock (wait over, or store down)",
    "a build outlived lock_timeout",
    "a call cut off by a kill",
    "lock_lost",
    "renewal_failed",
    "race_tag",
    "refuse_lock",
    "race_build",
    "cancel",
    "renew_at_release",
    "late_readers",
    "partition",
    "clock_jump",
    "race_page",
    "race_rebuild_page",
    "delete_over_outliving",
    "node_dead",
    "node_up",
    "race_keep",
    "slow_release",
    "a page built over a stale row",
    "a page built over a row read that failed",
    "a read inside a transaction",
    "a rebuild by a queue worker",
    "job_queued",
    "job_lost",
    "broker_down",
    "refuse_hand_off",
    "counted: lock_waits",
    "counted: wait_timeouts",
    "counted: build_errors",
    "counted: uncached",
    "counted: store_errors",
)
"""The named branches each at least 1% of seeds must reach (``ci`` fails otherwise)."""


def run_many(
    seeds: list[int],
    size: str,
    quiet: bool = False,
    coverage: Counter[str] | None = None,
    store: str | None = None,
) -> tuple[list[Result], float]:
    started = time.perf_counter()
    failed = []
    coverage = Counter() if coverage is None else coverage
    for seed in seeds:
        result = run_seed(seed, size, store)
        coverage.update(reached(result))
        if result.violations:
            failed.append(result)
            print(f"seed {seed} FAILED: {result.violations[0]}")
    seconds = time.perf_counter() - started
    if not quiet:
        rate = len(seeds) / seconds * 60 if seconds else 0.0
        print(
            f"{len(seeds)} {size} histories in {seconds:.1f} s ({rate:,.0f} a minute),"
            f" {len(failed)} with a violation"
        )
        report_coverage(coverage, len(seeds))
    return failed, seconds


def report_coverage(coverage: Counter[str], seeds: int) -> bool:
    """Print the share of seeds that reached each named branch; False if a required one
    is under 1%."""
    for name in sorted(set(coverage) | set(REQUIRED)):
        share = coverage[name] / seeds
        low = "  UNDER 1%" if name in REQUIRED and share < 0.01 else ""
        print(f"  reached by {share:6.1%} of seeds: {name}{low}")
    return all(coverage[name] / seeds >= 0.01 for name in REQUIRED)


def replay(seed: int, size: str, store: str | None = None) -> int:
    result = run_seed(seed, size, store)
    print(f"seed {seed} ({size}):\n{result.config.describe()}")
    print(
        f"  {len(result.history.calls)} calls, {len(result.history.builds)} builds,"
        f" {result.history.operations} store operations; digest {result.digest}"
    )
    for violation in result.violations:
        print(f"VIOLATION {violation}")
    return 1 if result.violations else 0


def mutants(seeds: int, root: int = 0) -> int:
    taken = []
    missed = 0
    for mutant in CATALOGUE:
        with applied(mutant):
            caught = next(
                (s for s in range(root, root + seeds) if played(mutant, s).violations), None
            )
        if caught is None:
            missed += 1
            print(f"NOT CAUGHT within {seeds} seeds: {mutant.name}")
        else:
            taken.append(caught - root + 1)
            print(f"caught after {caught - root + 1:4d} seeds (seed {caught}): {mutant.name}")
    if taken:
        print(f"median seeds to catch: {sorted(taken)[len(taken) // 2]}")
    return 1 if missed else 0


def shrink_one(seed: int, size: str, write: bool) -> int:
    started = time.perf_counter()
    config, result = shrink(choose(seed, size))
    print(
        f"seed {seed} shrunk in {time.perf_counter() - started:.1f} s to"
        f" {config.processes} processes, {calls_in(result)} calls:\n{config.describe()}"
    )
    print(f"VIOLATION {result.violations[0]}")
    if write:
        print(f"written: {write_regression(config, result)}")
    return 0


def shrink_mutants(per_mutant: int = 3) -> int:
    """Shrink the first failing seeds of every mutant: how small, how fast."""
    sizes = []
    for mutant in CATALOGUE:
        with applied(mutant):
            failing = [s for s in range(400) if run_seed(s).violations][:per_mutant]
            for seed in failing:
                started = time.perf_counter()
                config, result = shrink(choose(seed))
                seconds = time.perf_counter() - started
                small = config.processes <= 3 and calls_in(result) <= 10 and seconds <= 60
                sizes.append(small)
                print(
                    f"{mutant.name}: seed {seed} to {config.processes} processes,"
                    f" {calls_in(result)} calls in {seconds:.1f} s"
                )
    print(
        f"{sum(sizes)} of {len(sizes)} ({sum(sizes) / len(sizes):.0%}) shrunk to at most"
        " 10 calls and 3 processes within 60 s"
    )
    return 0


def kept_seeds() -> list[int]:
    if not KEPT.exists():
        return []
    lines = (line.split("#")[0].strip() for line in KEPT.read_text().splitlines())
    return [int(line) for line in lines if line]


def commit_root() -> int:
    """The random seeds' root for this checkout: drawn from its commit, so that CI's run of
    a commit and a run of the same commit here explore the same seeds (a red or green CI
    is the commit's, never the draw's); a fresh draw outside a git checkout."""
    try:
        head = subprocess.run(
            ("git", "rev-parse", "HEAD"),
            cwd=KEPT.parent,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return int(head[:10], 16)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return random.SystemRandom().randrange(1 << 40)


def ci(budget: float, root: int | None = None) -> int:
    started = time.monotonic()
    status = 0
    kept = kept_seeds()
    if kept and run_many(kept, "small")[0]:
        status = 1
    if mutants(200):
        status = 1
    root = commit_root() if root is None else root
    print(f"random seeds from root {root} (replay one: python -m tests.sim run --seed S)")
    ran = {"small": 0, "large": 0}
    spent = {"small": 0.0, "large": 0.0}
    failed = 0
    coverage: Counter[str] = Counter()
    while time.monotonic() - started < budget:
        # batches small enough that the last one overruns the budget by seconds, not minutes
        size = "large" if ran["small"] // 500 > ran["large"] // 5 else "small"
        first = root + ran["small"] + ran["large"]
        count = 5 if size == "large" else 500
        seeds = list(range(first, first + count))
        small = size == "small"
        bad, seconds = run_many(seeds, size, quiet=True, coverage=coverage if small else None)
        ran[size] += count
        spent[size] += seconds
        failed += len(bad)
    for size in ran:
        rate = ran[size] / spent[size] * 60 if spent[size] else 0.0
        print(f"{ran[size]:,} {size} histories in {spent[size]:.0f} s ({rate:,.0f} a minute)")
    print(f"{failed} with a violation; the small histories reached:")
    covered = report_coverage(coverage, ran["small"])
    return 1 if status or failed or not covered else 0


def main(argv: list[str] | None = None) -> int:
    logging.disable(logging.CRITICAL)  # the caches' failure logs: the history has them
    parser = argparse.ArgumentParser(
        prog="python -m tests.sim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run")
    run.add_argument("--seed", type=int)
    run.add_argument("--seeds", type=int, default=1000)
    run.add_argument("--root", type=int, default=0)
    run.add_argument("--size", choices=("small", "large"), default="small")
    run.add_argument("--store", choices=("memory", "text", "meta", "redis"))
    mutant = commands.add_parser("mutants")
    mutant.add_argument("--seeds", type=int, default=200)
    shrinking = commands.add_parser("shrink")
    shrinking.add_argument("--seed", type=int)
    shrinking.add_argument("--size", choices=("small", "large"), default="small")
    shrinking.add_argument("--write", action="store_true")
    shrinking.add_argument("--mutants", action="store_true")
    budgeted = commands.add_parser("ci")
    budgeted.add_argument("--budget", type=float, default=480.0)
    budgeted.add_argument("--root", type=int, help="the random seeds' root (default: HEAD's)")
    options = parser.parse_args(argv)
    if options.command == "run":
        if options.seed is not None:
            return replay(options.seed, options.size, options.store)
        seeds = list(range(options.root, options.root + options.seeds))
        return 1 if run_many(seeds, options.size, store=options.store)[0] else 0
    if options.command == "mutants":
        return mutants(options.seeds)
    if options.command == "shrink":
        if options.mutants:
            return shrink_mutants()
        if options.seed is None:
            parser.error("shrink needs --seed S or --mutants")
        return shrink_one(options.seed, options.size, options.write)
    return ci(options.budget, options.root)


if __name__ == "__main__":
    sys.exit(main())
