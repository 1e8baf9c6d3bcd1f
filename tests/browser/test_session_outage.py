"""A signed-in browser through a cache outage: headless Chromium signs in to the Django admin
of ``python -m example_project`` (under gunicorn, sessions on ``django_mcache.sessions``),
every memcached is SIGKILLed, and the visitor stays signed in, signs out and in again,
and is still signed in once memcached comes back empty (before sessions were written
through to the database, signing in here answered 500). The same with Flask's
server-side sessions, on a tiered store over SQLite and on memcached alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.common import answering
from tests.browser.navigation import click_through
from tests.servers import free_port, memcached_process

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "a password long enough for Django"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, memcached_nodes) -> Iterator[tuple]:
    """The example site under gunicorn on a memcached of its own, with an admin user."""
    memcached = memcached_process().start()
    database = tmp_path_factory.mktemp("outage") / "example.sqlite3"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        MCACHE_EXAMPLE_DB=str(database),
        MCACHE_URL=f"memcached://{memcached.address}?connect_timeout=0.2&timeout=0.3",
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    )
    made = subprocess.run(
        [sys.executable, "-m", "example_project", "manage", "createsuperuser", "--noinput",
         "--username", "editor", "--email", "editor@example.com"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "example_project.wsgi", "-w", "2",
         "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "2",
         "--worker-class", "gthread", "--threads", "4"],
        env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        answering(server, port, ("/",), "gunicorn serving the example site")
        yield f"http://127.0.0.1:{port}", memcached
    finally:
        server.terminate()
        server.wait(10)
        memcached.kill()


def signed_in(browser) -> bool:
    return "Site administration" in browser.title


def submitted(browser, button) -> None:
    """Click ``button`` and wait for the page it leaves to be replaced by the answer."""
    click_through(browser, button)


def sign_in(browser, url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(url + "/admin/login/?next=/admin/")
    assert "Server Error" not in browser.page_source
    browser.find_element(By.ID, "id_username").send_keys("editor")
    browser.find_element(By.ID, "id_password").send_keys(PASSWORD)
    submit = "input[type=submit], button[type=submit]"
    submitted(browser, browser.find_element(By.CSS_SELECTOR, submit))
    assert "Server Error" not in browser.page_source, "signing in answered an error page"


def sign_out(browser, url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(url + "/admin/")
    out = "#logout-form button, a[href$='/logout/']"
    submitted(browser, browser.find_element(By.CSS_SELECTOR, out))


def test_a_signed_in_browser_outlives_every_memcached(browser, site) -> None:
    url, memcached = site
    browser.get(url + "/site.css")
    browser.delete_all_cookies()
    sign_in(browser, url)
    assert signed_in(browser), browser.title
    memcached.kill()  # SIGKILL: the only server the sessions (and pages) live on
    for path in ("/admin/", "/admin/auth/user/", "/admin/"):
        browser.get(url + path)
        assert "Server Error" not in browser.page_source, path
        assert "editor" in browser.page_source and "Log in" not in browser.title, path
    sign_out(browser, url)
    browser.get(url + "/admin/")
    assert not signed_in(browser), "signed out while the cache is down"
    sign_in(browser, url)
    assert signed_in(browser), "signed in while the cache is down: no 500"
    browser.get(url + "/")
    assert "Server Error" not in browser.page_source, "the pages render from the database"
    memcached.restart()  # empty
    for _ in range(2):
        browser.get(url + "/admin/")
        assert signed_in(browser), "the session written meanwhile was not lost"


def _serve_flask(sessions_url: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "MCACHE_OUTAGE_SESSIONS": sessions_url}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "tests.browser.flask_sessions_site:app", "-w", "2",
         "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "2",
         "--worker-class", "gthread", "--threads", "4"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    answering(server, port, ("/",), "gunicorn serving the Flask sessions site")
    return server, f"http://127.0.0.1:{port}"


def flask_sign_in(browser, url: str, user: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(url + "/")
    browser.find_element(By.ID, "user").send_keys(user)
    submitted(browser, browser.find_element(By.ID, "go"))
    assert "Internal Server Error" not in browser.page_source


@pytest.mark.parametrize("durable", [True, False], ids=["tiered-over-sqlite", "memcached"])
def test_a_signed_in_flask_browser_outlives_every_memcached(
    browser, memcached_nodes, tmp_path: Path, durable: bool
) -> None:
    import urllib.parse

    memcached = memcached_process().start()
    hot = f"memcached://{memcached.address}?connect_timeout=0.2&timeout=0.3&dead_timeout=1"
    cold = f"sqlite:///{tmp_path / 'sessions.db'}"
    url_of = "tiered://?" + urllib.parse.urlencode({"hot": hot, "cold": cold}) if durable else hot
    server, url = _serve_flask(url_of)
    try:
        browser.get(url + "/")
        browser.delete_all_cookies()
        flask_sign_in(browser, url, "before")
        assert browser.title == "Signed in as before"
        memcached.kill()
        browser.get(url + "/")
        expected = (
            "Signed in as before" if durable else "Signed out"
        )  # memcached alone: out of reach
        assert browser.title == expected, "no error page, whatever the store"
        flask_sign_in(browser, url, "during")
        for _ in range(3):
            browser.get(url + "/")
            assert browser.title == "Signed in as during", "signed in during the outage"
        memcached.restart()  # empty
        time.sleep(1.1)  # the pool's dead_timeout: then it asks the server again
        for _ in range(2):
            browser.get(url + "/")
            assert browser.title == "Signed in as during", "nothing written was lost"
    finally:
        server.terminate()
        server.wait(10)
        memcached.kill()
