"""The example blog, as a new user runs it: ``python -m example_project --check``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def check(
    tmp_path: Path, module: str = "example_project", **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> --check`` on a fresh database, outside pytest's settings."""
    return subprocess.run(
        [sys.executable, "-m", module, "--check"],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"},
            "MCACHE_EXAMPLE_DB": str(tmp_path / "example.sqlite3"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_page_answers_hits_and_follows_an_edit(tmp_path: Path) -> None:
    first = check(tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "all pages fine" in first.stdout and "FAIL" not in first.stdout
    again = check(tmp_path)  # the same database: seeding is idempotent
    assert again.returncode == 0, again.stdout + again.stderr


@pytest.mark.parametrize("store", ["memcached", "redis"])
def test_the_store_is_switched_by_mcache_url(tmp_path: Path, store: str, request) -> None:
    url = request.getfixturevalue(f"{store}_url")
    done = check(tmp_path, MCACHE_URL=url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all pages fine" in done.stdout


def test_the_flask_twin_reads_the_same_data_and_follows_an_edit(tmp_path: Path) -> None:
    done = check(tmp_path, "example_project.flask_app")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all pages fine" in done.stdout and "FAIL" not in done.stdout
