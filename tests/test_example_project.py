"""The example blog as a new user runs it: ``python -m example_project --check``, ``stampede``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from example_project.store import choose_store
from tests.example_pages import footer_disagrees, footer_status, online_shown
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
PAGES = """
import json, sys
from example_project.__main__ import prepare
prepare()
from django.test import Client
answers = []
for visitor, path in enumerate(sys.argv[1:]):  # a new visitor for each request
    response = Client(HTTP_USER_AGENT=f"Mozilla/5.0 ({visitor})").get(path)
    answers.append(
        [path, response.get("X-Cache"), response.get("X-Cache-Reason"), response.content.decode()]
    )
print(json.dumps(answers))
"""
"""Prints what each path in ``argv`` answered: path, X-Cache, X-Cache-Reason, body."""


def run(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``python <argv>`` on a fresh database, outside our settings."""
    return subprocess.run(
        [sys.executable, *argv],
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


def check(
    tmp_path: Path, module: str = "example_project", *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <module> <args or --check>`` on a fresh database, outside our settings."""
    return run(tmp_path, "-m", module, *(args or ["--check"]), **env)


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


def pages(tmp_path: Path, *paths: str, **env: str) -> list[tuple[str, str, str, str]]:
    """Return what the Django example answered ``paths``, each for a visitor of its own."""
    done = run(tmp_path, "-c", PAGES, *paths, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    return [tuple(answer) for answer in json.loads(done.stdout.splitlines()[-1])]


@pytest.mark.parametrize("store", ["memory", "down"])
def test_the_footer_says_what_the_headers_say(tmp_path: Path, store: str) -> None:
    url = "memory://" if store == "memory" else f"memcached://127.0.0.1:{free_port()}"
    paths = [p for p in ("/", "/blogs/gardens/", "/posts/1/", "/calendar/") for _ in (1, 2)]
    answered = pages(tmp_path, *paths, MCACHE_URL=url)
    for path, state, reason, html in answered:
        assert not footer_disagrees(html, state, reason), (path, footer_status(html))
    reasons = {reason for _, _, reason, _ in answered}
    assert ("store-down" in reasons) == (store == "down"), reasons


def test_the_header_counts_the_visitor_looking_on_every_hit(tmp_path: Path) -> None:
    answered = pages(tmp_path, "/", "/", "/", MCACHE_URL="memory://")
    assert [state for _, state, _, _ in answered] == ["MISS", "HIT", "HIT"]
    assert [online_shown(html) for *_, html in answered] == [1, 2, 3]


def test_the_help_says_every_command_in_plain_words(tmp_path: Path) -> None:
    shown = check(tmp_path, "example_project", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "``" not in shown.stdout and ":func:" not in shown.stdout
    for command in ("manage COMMAND", "createsuperuser", "stampede", "flask_app", "MCACHE_URL"):
        assert command in shown.stdout, command


def test_without_mcache_url_a_running_memcached_is_shared(memcached_nodes, monkeypatch) -> None:
    monkeypatch.setenv("MCACHE_URL", "")  # unset, and restored after the test
    host, port = memcached_nodes[0].address.split(":")
    assert "running" in choose_store((host, int(port)))
    assert os.environ["MCACHE_URL"] == f"memcached://{host}:{port}"
    monkeypatch.setenv("MCACHE_URL", "")
    assert "no memcached" in choose_store(("127.0.0.1", free_port()))
    assert os.environ["MCACHE_URL"] == "memory://"
    assert choose_store(("127.0.0.1", free_port())) == "from MCACHE_URL", "the user's word"


def test_an_edit_in_the_django_admin_shows_on_the_flask_twin(
    tmp_path: Path, memcached_url: str, monkeypatch
) -> None:
    """Step 3 of the Flask twin's "what to try", with both apps on one memcached."""
    from example_project.flask_app import create_app

    ready = check(tmp_path, "example_project", "manage", "check", MCACHE_URL=memcached_url)
    assert ready.returncode == 0, ready.stdout + ready.stderr  # migrated and seeded
    monkeypatch.setenv("MCACHE_URL", memcached_url)
    client = create_app(str(tmp_path / "example.sqlite3")).test_client()
    assert [client.get("/").headers["X-Cache"] for _ in range(2)] == ["MISS", "HIT"]
    edit = (
        "from example_project.blog.models import Post;"
        " post = Post.objects.order_by('-published').first();"
        " post.title = 'Edited in the Django admin'; post.save()"
    )
    edited = check(
        tmp_path, "example_project", "manage", "shell", "-c", edit, MCACHE_URL=memcached_url
    )
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert "Edited in the Django admin" in client.get("/").get_data(as_text=True)
