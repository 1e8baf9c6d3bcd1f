"""Django's own cache test suite (BaseCacheTests) against MCacheBackend on every store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

BY_DESIGN = {
    "test_invalid_key_characters": "mcache hashes every key into a memcached-safe one, so"
    " keys with spaces or control characters need no CacheKeyWarning",
    "test_invalid_key_length": "the same for keys over 250 bytes",
    "test_invalid_with_version_key_length": "the same once the version is added",
}
"""Tests that fail on purpose; the README lists them with these reasons."""


@pytest.mark.parametrize("store", ["memory", "memcached", "redis"])
def test_djangos_cache_suite_passes(store: str, request: pytest.FixtureRequest) -> None:
    location = "memory://" if store == "memory" else request.getfixturevalue(f"{store}_url")
    run = subprocess.run(
        [sys.executable, "-m", "tests.dj.django_suite", location],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    failed = {name.split(" (")[0] for name in result["failed"]}
    assert failed == set(BY_DESIGN), result["failed"]
    assert result["ran"] >= 50, "the suite was found and run"


def test_readme_lists_the_tests_failing_by_design() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in BY_DESIGN:
        assert f"`{name}`" in readme, name
