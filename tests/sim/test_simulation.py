"""The simulator, run short by the README's test command: clean seeds, every mutant caught,
the same history under another hash seed (``python -m tests.sim`` runs it long)."""

from __future__ import annotations

import logging
import os
import pathlib
import subprocess
import sys

import pytest

from tests.sim.config import choose
from tests.sim.mutants import CATALOGUE, applied, played
from tests.sim.shrink import calls_in, regression_test, shrink

ROOT = pathlib.Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def _quiet() -> object:
    logging.disable(logging.CRITICAL)  # each seed's caches log their simulated outages
    yield
    logging.disable(logging.NOTSET)


def simulate(*arguments: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m tests.sim`` at the lowest priority: its seeds are CPU-bound, and the
    suite's other tests (servers timed by the second, a process's counts flushed within
    a second of its exit) run beside it."""
    return subprocess.run(
        ["nice", "-n", "19", sys.executable, "-m", "tests.sim", *arguments],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )


def test_five_hundred_seeds_break_no_rule() -> None:
    done = simulate("run", "--seeds", "500")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "500 small histories" in done.stdout and ", 0 with a violation" in done.stdout


def test_large_histories_break_no_rule() -> None:
    done = simulate("run", "--seeds", "3", "--size", "large")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 large histories" in done.stdout and ", 0 with a violation" in done.stdout


def test_the_simulation_catches_every_mutant_within_200_seeds() -> None:
    done = simulate("mutants")
    caught = [line for line in done.stdout.splitlines() if line.startswith("caught after")]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(caught) == len(CATALOGUE), done.stdout


G1 = "guarantee 1 (no old value as fresh)"
G2 = "guarantee 2 (stale only while rebuilt, and bounded)"

FOUND = [
    # the waiter of guarantee 1: another process's lock waiter handed an entry built from a
    # row older than a write whose invalidation had returned (fixed before the simulator)
    ("a lock waiter takes a peeked entry", 7, {G1}),
    # a lost tag recreated by another process on the lost copy's millisecond
    ("a lost tag recreated", 10, {G1}),
    # a lock attempt the store failed, taken for a lock found held: stale, nobody rebuilding
    ("a lock attempt the store failed", 46, {G2}),
    # a lock waiter handed a page stored already stale (built over a stale part) as fresh
    (
        "a lock waiter takes an entry stored",
        163,
        {"rule 2 (a build never consumes stale data silently)"},
    ),
    # a lock waiter whose entry arrived stale, served it stale as its holder freed its lock
    ("a lock waiter served stale", 71, {G2}),
    # a failed rebuild left the stale entry the life its lease's keep-alives gave it
    ("a rebuild that stores nothing", 1, {G2}),
    # a forced refresh cancelled as its lock was won kept the lock to its timeout
    ("a forced refresh's lock", 5, {"rule 4 (a lock lives as long as its build)"}),
    # a keep-alive took the token of another build's placeholder: a build from before a
    # delete won over it
    ("a keep-alive takes the token", 95, {"rule 3 (no stale sets)"}),
    # a job a broker delivered twice: both copies extended the handed token and built
    ("a job delivered twice built twice (its", 7, {"guarantee 5 (builds run once)"}),
    ("a job delivered twice built twice on", 4, {"guarantee 5 (builds run once)"}),
    # a copy of a job redelivered a lock's life later claimed the lease the first held
    ("a copy of a job delivered", 58, {"guarantee 5 (builds run once)"}),
    # a hand-off the store failed took the lock back, renewed, with nobody to rebuild
    ("a hand-off the store failed", 1, {"rule 4 (a lock lives as long as its build)"}),
    # a send under way when the queue's circuit opened reopened it once the window closed
    ("the refresher's circuit", 49, {"the refresher's circuit (a window per outage)"}),
    # on Redis, a read whose claim of a stale entry's lock another holds, taken as won
    ("a stale entry's rebuild another reader", 26, {"guarantee 5 (builds run once)"}),
    # on Redis with a replica serving the hits, a tag's copy read back from the replica
    # after a failed add, found missing there, and set over the primary's
    ("a tag's copy read back", 4, {"liveness (a tag moves only when written)"}),
    # a forced refresh that waited out a long build built, the wait over, recording the
    # versions it read before its wait: a write meanwhile made its entry stale on arrival
    (
        "a forced refresh that waited",
        13,
        {"liveness (an entry records the versions read after its wait)"},
    ),
]
"""Each finding of the simulation: its mutant (the start of its name), the seed that
fails without the fix, and the rules it breaks."""


@pytest.mark.parametrize(("name", "seed", "rules"), FOUND, ids=[f[0] for f in FOUND])
def test_each_finding_fails_on_its_seed_without_its_fix(
    name: str, seed: int, rules: set[str]
) -> None:
    (mutant,) = (m for m in CATALOGUE if m.name.startswith(name))
    with applied(mutant):
        found = played(mutant, seed).violations
    assert found and {v.rule for v in found} == rules
    assert played(mutant, seed).violations == []


def test_a_seed_replays_the_same_history_under_another_hash_seed() -> None:
    script = (
        "import logging; logging.disable(logging.CRITICAL)\n"
        "from tests.sim.simulation import run_seed\n"
        "print([run_seed(s).digest for s in range(40)])\n"
    )
    digests = {
        subprocess.run(
            ["nice", "-n", "19", sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            cwd=ROOT,
        ).stdout
        for hash_seed in ("1", "2")
    }
    assert len(digests) == 1 and "'" in next(iter(digests))


def test_a_failure_shrinks_to_a_small_pytest_regression_test() -> None:
    """Shrunk under a mutant, a failing seed becomes a test that fails with the mutant and
    passes without it."""
    mutant = next(m for m in CATALOGUE if m.name.startswith("a lock waiter takes a peeked"))
    with applied(mutant):
        config, result = shrink(choose(7))
        source = regression_test(config, result)
    assert config.processes <= 3 and calls_in(result) <= 10
    namespace: dict[str, object] = {}
    exec(compile(source, "<regression>", "exec"), namespace)
    test = namespace[f"test_seed_{config.seed}_breaks_no_rule"]
    with applied(mutant), pytest.raises(AssertionError):
        test()  # type: ignore[operator]
    test()  # type: ignore[operator]
