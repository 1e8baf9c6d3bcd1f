"""The server harness: a missing binary skips locally and fails when CI requires servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ONE_TEST = "tests/core/test_store_contract.py::TestMemcachedStore::test_miss_is_no_value"


def _pytest_without_binaries(tmp_path: Path, require: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": str(tmp_path), "MCACHE_REQUIRE_SERVERS": require}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", ONE_TEST],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_memcached_skips_locally(tmp_path: Path) -> None:
    done = _pytest_without_binaries(tmp_path, "")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "memcached is not installed" in done.stdout


def test_missing_memcached_fails_when_required(tmp_path: Path) -> None:
    done = _pytest_without_binaries(tmp_path, "1")
    assert done.returncode != 0
    assert "MCACHE_REQUIRE_SERVERS=1 but memcached is not installed" in done.stdout
    assert "1 error" in done.stdout


def test_started_servers_answer_and_are_loopback_only(memcached_nodes, redis_node) -> None:
    assert len(memcached_nodes) == 3
    assert len({node.port for node in [*memcached_nodes, redis_node]}) == 4
    for node in [*memcached_nodes, redis_node]:
        assert node.answers(), node
        assert node.address.startswith("127.0.0.1:")
