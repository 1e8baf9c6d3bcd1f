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
from collections.abc import Callable, Iterator

from tests.sim.config import Config
from tests.sim.simulation import Result, Simulation

REGRESSIONS = pathlib.Path(__file__).with_name("regressions")

AIMED = ("kill", "pause")
"""Faults aimed at a process (its number in ``target``)."""


def smaller(config: Config) -> Iterator[Config]:
    """Every configuration one step smaller than ``config``."""
    replace = dataclasses.replace
    for i in range(len(config.faults)):
        yield replace(config, faults=config.faults[:i] + config.faults[i + 1 :])
    if config.processes > 1:
        fewer = config.processes - 1
        aimed = [
            f for f in config.faults if f.kind not in ("kill", "pause") or int(f.target) < fewer
        ]
        yield replace(config, processes=fewer, skews=config.skews[:fewer], faults=aimed)
    if config.threads > 1:
        yield replace(config, threads=config.threads - 1)
    if config.calls > 1:
        yield replace(config, calls=config.calls - 1)
    if config.keys > 1:
        aimed = [f for f in config.faults if not f.kind.startswith("evict") or int(f.target) == 0]
        yield replace(config, keys=config.keys - 1, faults=aimed)
    if config.drop_rate or config.lost_reply_rate:
        yield replace(config, drop_rate=0.0, lost_reply_rate=0.0)
    if config.long_builds:
        yield replace(config, long_builds=False)
    if any(config.skews):
        yield replace(config, skews=[0.0] * config.processes)


def shrink(config: Config, budget: float = 60.0) -> tuple[Config, Result]:
    """Return the smallest configuration found within ``budget`` seconds that still breaks
    the rule ``config`` breaks, and its run."""
    first = Simulation(config).run()
    if not first.violations:
        raise ValueError(f"seed {config.seed} breaks no rule: nothing to shrink")
    rule = first.violations[0].rule
    still: Callable[[Result], bool] = lambda result: any(v.rule == rule for v in result.violations)  # noqa: E731
    best, result = config, first
    deadline = time.monotonic() + budget
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in smaller(best):
            if time.monotonic() >= deadline:
                break
            attempt = Simulation(candidate).run()
            if still(attempt):
                best, result, progress = candidate, attempt, True
                break
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
    logging.disable(logging.CRITICAL)
    config = Config(
        {arguments},
        faults=[{faults}],
    )
    assert Simulation(config).run().violations == []
'''


def write_regression(config: Config, result: Result) -> pathlib.Path:
    """Write the regression test of a shrunk seed into ``tests/sim/regressions/``."""
    REGRESSIONS.mkdir(exist_ok=True)
    (REGRESSIONS / "__init__.py").touch()
    path = REGRESSIONS / f"test_seed_{config.seed}.py"
    path.write_text(regression_test(config, result))
    return path
