"""Other processes: a save in a separate process reaches the pages a server process serves.

The example site under gunicorn (two worker processes) on a real memcached; a
``manage.py shell``-like process edits a post; the home page the workers serve
changes. And ``manage.py check`` on the same settings warns on memory:// (the
quickstart default, where this cannot work) and is silent on memcached.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.benchmarks.common import gunicorn

ROOT = Path(__file__).resolve().parent.parent
EDIT = """
import django
django.setup()
from example_project.blog.models import Post
post = Post.objects.order_by("-published").first()
post.title = "Edited in another process"
post.save()
"""

CHECK = """
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", "check"])
"""


def example_env(tmp_path: Path, store: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "MCACHE_EXAMPLE_DB": str(tmp_path / "example.sqlite3"),
        "MCACHE_URL": store,
    }


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def home(port: int) -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        return response.headers["X-Cache"], response.read().decode()


def test_a_save_in_another_process_changes_the_servers_page(
    tmp_path: Path, memcached_url: str
) -> None:
    env = example_env(tmp_path, memcached_url)
    seeded = run_python("from example_project.__main__ import prepare; prepare()", env)
    assert seeded.returncode == 0, seeded.stderr
    server, port = gunicorn("example_project.wsgi:application", env, str(ROOT))
    try:
        before = {home(port) for _ in range(4)}  # both workers have it cached by now
        assert all("Edited in another process" not in body for _, body in before)
        assert any(state == "HIT" for state, _ in before)
        edit = run_python(EDIT, env)
        assert edit.returncode == 0, edit.stderr
        after = [home(port) for _ in range(4)]  # whichever worker answers
        assert all("Edited in another process" in body for _, body in after), after
        assert after[-1][0] == "HIT", "rebuilt once, then cached again"
    finally:
        server.terminate()
        server.wait(10)


def test_manage_py_check_warns_on_memory_and_is_silent_on_memcached(
    tmp_path: Path, memcached_url: str
) -> None:
    check = (
        "from django.core.management import execute_from_command_line as run; run(['x', 'check'])"
    )
    on_memory = run_python(check, example_env(tmp_path, "memory://"))
    assert "django_mcache.W001" in on_memory.stdout + on_memory.stderr
    assert "django_mcache.W002" in on_memory.stdout + on_memory.stderr
    on_memcached = run_python(CHECK, example_env(tmp_path, memcached_url))
    assert on_memcached.returncode == 0, on_memcached.stderr
    assert "W00" not in on_memcached.stdout + on_memcached.stderr
