"""The example site as a first-time visitor sees it, in headless Chromium: the Django blog and
its Flask twin under gunicorn on a real memcached, over one seeded database. Every page
has its own title and the site's stylesheet; the footer says MISS, then HIT on reload; a
post page says its text is a cached fragment. Screenshots go where the docs show them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.common import answering
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("/", "/blogs/gardens/", "/posts/1/", "/calendar/")


def _serve(app: str, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    # threads: a browser's idle preconnections would each hold a sync worker
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", app, "-w", "2", "-b", f"127.0.0.1:{port}",
         "--log-level", "warning", "--graceful-timeout", "2",
         "--worker-class", "gthread", "--threads", "4"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    answering(server, port, ("/",), f"gunicorn serving {app}")
    return server, f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory, memcached_nodes) -> Iterator[dict[str, str]]:
    database = tmp_path_factory.mktemp("example") / "example.sqlite3"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        MCACHE_EXAMPLE_DB=str(database),
        MCACHE_URL=f"memcached://{memcached_nodes[0].address}",
    )
    seeded = subprocess.run(
        [sys.executable, "-c", "from example_project.__main__ import prepare; prepare()"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    servers = []
    try:
        django = _serve("example_project.wsgi", env)
        servers.append(django[0])
        flask = _serve(f"example_project.flask_app:create_app({str(database)!r})", env)
        servers.append(flask[0])
        yield {"django": django[1], "flask": flask[1]}
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)


@pytest.fixture
def browser(browser, sites):
    """The session's browser without the cookies other tests' sites left on 127.0.0.1 (a
    session cookie of the dashboard's Flask site would make every Flask page a BYPASS)."""
    browser.get(sites["django"] + "/site.css")  # cookies are per host, whatever the port
    browser.delete_all_cookies()
    return browser


def footer(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.TAG_NAME, "footer").text


@pytest.mark.parametrize("framework", ["django", "flask"])
def test_every_page_has_its_title_and_the_stylesheet(browser, sites, framework: str) -> None:
    titles = set()
    for path in PAGES:
        browser.get(sites[framework] + path)
        titles.add(browser.title)
        font = browser.execute_script("return getComputedStyle(document.body).fontFamily")
        assert "Charter" in font, f"{path}: the site's stylesheet applies ({font})"
        viewport = browser.execute_script(
            "return document.querySelector('meta[name=viewport]') !== null"
        )
        assert viewport, f"{path}: a viewport tag"
        assert (
            "This request:" in footer(browser)
            and "<!--" not in browser.page_source.split("<footer>")[1]
        ), f"{path}: the footer's status is filled"
    assert len(titles) == len(PAGES), titles


@pytest.mark.parametrize("framework", ["django", "flask"])
def test_the_footer_says_miss_then_hit_on_reload(browser, sites, framework: str) -> None:
    browser.get(sites[framework] + "/blogs/astronomy/")
    first = footer(browser)
    browser.refresh()
    second = footer(browser)
    assert "MISS built in" in first, first
    assert "HIT served from the cache" in second, second
    rendered = [text.split("Page rendered at ")[1][:8] for text in (first, second)]
    assert rendered[0] == rendered[1], "the page the hit served is the one the miss built"


def test_a_post_says_its_text_is_a_cached_fragment(browser, sites) -> None:
    browser.get(sites["django"] + "/posts/2/")
    text = browser.find_element("css selector", "main").text
    assert "this text is a cached fragment, rendered at" in text
    assert "not cached as a whole" in footer(browser)
    assert any(word in text for word in ("0 comments", "1 comment", "2 comments"))


@pytest.mark.parametrize(
    ("framework", "path", "name"),
    [("django", "/", "example-home"), ("django", "/posts/3/", "example-post"),
     ("flask", "/", "example-flask-home")],
)  # fmt: skip
def test_screenshots_for_the_docs(browser, sites, screenshots, framework, path, name) -> None:
    browser.get(sites[framework] + path)
    browser.refresh()  # a HIT in the footer
    assert "HIT" in footer(browser) or path.startswith("/posts/")
    assert browser.get_screenshot_as_file(str(screenshots / f"{name}.png"))
