"""The get_or_build suites and the Django and Flask view suites, again with the near cache on.

Every ``Cache`` those tests build (directly, or from Django's ``CACHES`` and
Flask's config) gets ``near_ttl`` unless the test sets one, so each of their
assertions must hold with hits served from the process as well. The run is a
pytest of its own, in a subprocess, so the setting reaches only those tests: one per
suite, so that the suite's workers share them out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = [
    "tests/core/test_get_or_build.py",
    "tests/core/test_aget_or_build.py",
    "tests/dj/test_views.py",
    "tests/fl/test_extension.py",
    "tests/fl/test_async_views.py",
]


@pytest.mark.timeout(900)  # a whole suite in a subprocess: its own timeout, not a test's
@pytest.mark.parametrize("suite", SUITES)
def test_the_view_and_get_or_build_suites_pass_with_the_near_cache_on(suite: str) -> None:
    env = {**os.environ, "MCACHE_TEST_NEAR_TTL": "30"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", suite],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    summary = run.stdout.strip().splitlines()[-1:] or [run.stderr[-2000:]]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in summary[0] and "skipped" not in summary[0], summary
