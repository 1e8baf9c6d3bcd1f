"""The server harness: a missing binary skips locally and fails when CI requires servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

REPO = Path(__file__).resolve().parent.parent
ONE_TEST = "tests/core/test_store_contract.py::TestMemcachedStore::test_miss_is_no_value"


def _pytest_without_binaries(
    tmp_path: Path, require: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """Run one test with no server binary on PATH; return the run and its JUnit totals.

    The totals come from the JUnit report pytest writes (skipped, errors…),
    not from the wording of its summary line.
    """
    env = {**os.environ, "PATH": str(tmp_path), "MCACHE_REQUIRE_SERVERS": require}
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         f"--junitxml={report}", ONE_TEST],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None, done.stdout
    return done, dict(suite.attrib)


def test_missing_memcached_skips_locally(tmp_path: Path) -> None:
    done, totals = _pytest_without_binaries(tmp_path, "")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (totals["tests"], totals["skipped"], totals["errors"]) == ("1", "1", "0"), totals
    assert "memcached is not installed" in done.stdout


def test_missing_memcached_fails_when_required(tmp_path: Path) -> None:
    done, totals = _pytest_without_binaries(tmp_path, "1")
    assert done.returncode != 0
    assert "MCACHE_REQUIRE_SERVERS=1 but memcached is not installed" in done.stdout
    assert (totals["skipped"], totals["errors"]) == ("0", "1"), totals


def test_started_servers_answer_and_are_loopback_only(memcached_nodes, redis_node) -> None:
    assert len(memcached_nodes) == 3
    assert len({node.port for node in [*memcached_nodes, redis_node]}) == 4
    for node in [*memcached_nodes, redis_node]:
        assert node.answers(), node
        assert node.address.startswith("127.0.0.1:")
