"""Shrinking a failing seed: the smallest configuration that still breaks the same rule.

A seed's configuration is cut down one step at a time (a fault taken away, fewer
processes, threads, calls or keys, no network faults, no slow builds), each step kept
while the run still breaks the rule it broke; the result is written out as a plain
pytest test that replays it.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from collections.abc import Iterator

from tests.sim.config import Config
from tests.sim.simulation import Result, Simulation

REGRESSIONS = pathlib.Path(__file__).with_name("regressions")

AIMED = ("kill", "pause", "partition", "clock_jump")
"""Faults aimed at a process (its number in ``target``)."""

RESEEDS = 6
"""How many seeds each smaller configuration is tried from."""

TARGETED = (
    "race_tags",
    "race_builds",
    "refuse_locks",
    "cancel_leaders",
    "renew_at_release",
    "late_readers",
    "race_pages",
    "race_keeps",
    "slow_releases",
)
"""The targeted faults a configuration may turn on."""


def smaller(config: Config, reseeds: int = RESEEDS) -> Iterator[Config]:
    """Every configuration one step smaller than ``config``, each also replayed from the next
    ``reseeds`` seeds (which calls a history makes, and when, is drawn from its seed)."""
    for candidate in _steps_down(config):
        for step in range(reseeds):
            yield dataclasses.replace(candidate, seed=candidate.seed + step)


def _steps_down(config: Config) -> Iterator[Config]:
    replace = dataclasses.replace
    for i in range(len(config.faults)):
        yield replace(config, faults=config.faults[:i] + config.faults[i + 1 :])
    for processes in sorted({1, 2, config.processes - 1}):
        if 0 < processes < config.processes:
            aimed = [f for f in config.faults if f.kind not in AIMED or int(f.target) < processes]
            yield replace(config, processes=processes, skews=config.skews[:processes], faults=aimed)
    for threads in sorted({1, config.threads - 1}):
        if 0 < threads < config.threads:
            yield replace(config, threads=threads)
    for calls in sorted({1, config.calls // 2, config.calls - 1}):
        if 0 < calls < config.calls:
            yield replace(config, calls=calls)
    if config.keys > 1:
        aimed = [f for f in config.faults if not f.kind.startswith("evict") or int(f.target) == 0]
        yield replace(config, keys=1, faults=aimed)
    if config.drop_rate or config.lost_reply_rate:
        yield replace(config, drop_rate=0.0, lost_reply_rate=0.0)
    for flag in ("long_builds", *TARGETED):
        if getattr(config, flag):
            yield replace(config, **{flag: False})
    if config.failing_builds:
        yield replace(config, failing_builds=0.0)
    if config.pages:
        yield replace(config, pages=0.0, race_pages=False)
    if any(config.skews):
        yield replace(config, skews=[0.0] * config.processes)


def size(config: Config, result: Result) -> tuple[int, ...]:
    """How big a failing run is, for a reader: over 3 processes or 10 calls first, then its
    calls, processes and faults."""
    calls = calls_in(result)
    return (config.processes > 3, calls > 10, calls, config.processes, len(config.faults))


def shrink(config: Config, budget: float = 60.0) -> tuple[Config, Result]:
    """Return the smallest configuration found within ``budget`` seconds that still breaks
    the rule ``config`` breaks, and its run: each round runs every configuration one step
    smaller and keeps the smallest that still breaks it."""
    first = Simulation(config).run()
    if not first.violations:
        raise ValueError(f"seed {config.seed} breaks no rule: nothing to shrink")
    rule = first.violations[0].rule
    best, result = config, first
    deadline = time.monotonic() + budget
    tried: set[str] = set()
    reseeds = RESEEDS
    while time.monotonic() < deadline:
        found = []
        for candidate in smaller(best, reseeds):
            key = repr(candidate)
            if key in tried or time.monotonic() >= deadline:
                continue
            tried.add(key)
            attempt = Simulation(candidate).run()
            if any(v.rule == rule for v in attempt.violations):
                found.append((size(candidate, attempt), candidate, attempt))
        smallest = min(found, default=None, key=lambda item: item[0])
        if smallest is None or smallest[0] >= size(best, result):
            if reseeds > RESEEDS:
                break
            reseeds = 5 * RESEEDS  # stuck: each step down from many more seeds, once
            continue
        _, best, result = smallest
    return best, result


def calls_in(result: Result) -> int:
    """The calls a history made before its liveness reads."""
    return sum(1 for call in result.history.calls if not call.thread.startswith("live"))


def regression_test(config: Config, result: Result) -> str:
    """A pytest module that replays ``config`` and asserts it breaks no rule."""
    fields = dataclasses.asdict(config)
    faults = ", ".join(
        f"Fault({f['kind']!r}, {f['at']!r}, {f['target']!r}, {f['seconds']!r})"
        for f in fields.pop("faults")
    )
    arguments = ",\n        ".join(f"{name}={value!r}" for name, value in fields.items())
    return f'''"""Regression: seed {config.seed}, shrunk; it broke {result.violations[0].rule}.

{result.violations[0].detail}
"""

import logging

from tests.sim.config import Config, Fault
from tests.sim.simulation import Simulation


def test_seed_{config.seed}_breaks_no_rule() -> None:
    config = Config(
        {arguments},
        faults=[{faults}],
    )
    logging.disable(logging.CRITICAL)  # the caches log their simulated outages
    try:
        violations = Simulation(config).run().violations
    finally:
        logging.disable(logging.NOTSET)
    assert violations == []
'''


def write_regression(config: Config, result: Result) -> pathlib.Path:
    """Write the regression test of a shrunk seed into ``tests/sim/regressions/``."""
    REGRESSIONS.mkdir(exist_ok=True)
    (REGRESSIONS / "__init__.py").touch()
    path = REGRESSIONS / f"test_seed_{config.seed}.py"
    path.write_text(regression_test(config, result))
    return path
