"""The example blog as a new user runs it: ``python -m example_project --check``, ``stampede``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def check(
    tmp_path: Path, module: str = "example_project", *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> <args or --check>`` on a fresh database, outside our settings."""
    return subprocess.run(
        [sys.executable, "-m", module, *(args or ["--check"])],
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


def test_the_checks_hold_after_whatever_an_admin_edits_and_leave_the_data_alone(
    tmp_path: Path,
) -> None:
    assert check(tmp_path).returncode == 0  # seeds the demo data
    database = sqlite3.connect(tmp_path / "example.sqlite3")
    with database:  # what a user does in /admin/: counts, renames, deletions, a future post
        database.execute("UPDATE blog_post SET views = 57")
        database.execute("UPDATE blog_post SET title = title || ' & <more>' WHERE id % 3 = 0")
        cooking = "(SELECT id FROM blog_blog WHERE slug = 'cooking')"
        database.execute(
            f"DELETE FROM blog_comment WHERE post_id IN"
            f" (SELECT id FROM blog_post WHERE blog_id = {cooking})"
        )
        database.execute(f"DELETE FROM blog_post WHERE blog_id = {cooking}")
        database.execute("DELETE FROM blog_blog WHERE slug = 'cooking'")
        database.execute("UPDATE blog_blog SET slug = slug || '-renamed'")
        database.execute(
            "INSERT INTO blog_post (blog_id, title, body, published, views)"
            " SELECT MIN(id), 'Scheduled', 'later', '2099-01-01 00:00:00', 3 FROM blog_blog"
        )

    def snapshot() -> list:
        tables = ("blog_blog", "blog_post", "blog_comment")
        return [database.execute(f"SELECT * FROM {t} ORDER BY id").fetchall() for t in tables]

    before = snapshot()
    for module in ("example_project", "example_project.flask_app"):
        done = check(tmp_path, module)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "all pages fine" in done.stdout
        assert snapshot() == before, f"{module} --check left the data as it found it"


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


def test_the_stampede_demo_shows_one_build_for_mcache_and_one_per_visitor_for_django(
    tmp_path: Path, memcached_url: str
) -> None:
    figures = tmp_path / "stampede.json"
    done = check(
        tmp_path,
        "example_project",
        *("stampede", "--clients", "8", "--processes", "2", "--build-seconds", "0.3"),
        *("--store", memcached_url, "--json", str(figures)),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "visitors on an expired page" in done.stdout and "mcache @cached_view" in done.stdout
    # It says what elected the builder: on memcached 1.6, the server's lease, not an add.
    assert "elected here by memcached's own lease" in " ".join(done.stdout.split())
    rows = {row["contender"]: row for row in json.loads(figures.read_text())}
    assert {r["clients"] for r in rows.values()} == {8}
    assert {r["errors"] for r in rows.values()} == {0}
    for django in ("Django cache_page", "Django get_or_set"):
        assert rows[django]["builds"] > 1 and rows[django]["stale"] == 0, rows[django]
    for mcache in ("mcache @cached_view", "mcache get_or_set"):
        assert rows[mcache]["builds"] == 1 and rows[mcache]["stale"] == 7, rows[mcache]
    background = rows["mcache @cached_view, background"]
    assert background["builds"] == 1 and background["stale"] == 8, background  # nobody waited


def test_manage_runs_a_command_on_the_example_without_warnings(tmp_path: Path) -> None:
    """The admin step: a user made with ``manage createsuperuser``, no W001/W002 on memory://."""
    done = check(
        tmp_path,
        "example_project",
        *("manage", "createsuperuser", "--noinput", "--username", "editor"),
        *("--email", "editor@example.com"),
        DJANGO_SUPERUSER_PASSWORD="not-a-real-password",
        MCACHE_URL="memory://",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "W00" not in done.stdout + done.stderr, done.stdout + done.stderr
    with sqlite3.connect(tmp_path / "example.sqlite3") as db:
        users = db.execute("SELECT username, is_superuser FROM auth_user").fetchall()
    assert ("editor", 1) in users
