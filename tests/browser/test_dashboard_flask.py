"""The cache dashboard as a Flask blueprint, looked at in headless Chromium: a site under
gunicorn on real memcached (:mod:`tests.browser.flask_site`). After traffic the chart
shows; the invalidate button, confirmed, makes the next request a MISS; a visitor the
site's ``allow`` refuses gets 403; a blueprint without ``allow`` is refused."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from mcache.errors import ConfigError
from tests.benchmarks.common import answering
from tests.browser.test_dashboard_django import ROOT, submit
from tests.servers import free_port


def fetch(url: str) -> tuple[str, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode(), response.headers.get("X-Cache", "")


@pytest.fixture(scope="module")
def site(memcached_nodes) -> Iterator[str]:
    env = dict(os.environ, MCACHE_DASHBOARD_MEMCACHED=memcached_nodes[0].address)
    port = free_port()
    # threads: a browser's idle preconnections would each hold a sync worker
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "tests.browser.flask_site:app", "-w", "2",
         "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "2",
         "--worker-class", "gthread", "--threads", "4"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        answering(server, port, ("/news/",), "gunicorn serving tests.browser.flask_site")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


def test_the_dashboard_shows_the_chart_after_traffic(browser, site: str, screenshots) -> None:
    from selenium.webdriver.common.by import By

    for _ in range(3):  # each round's first requests flush what the round before counted
        for _ in range(6):
            fetch(site + "/news/")
        time.sleep(0.3)
    browser.delete_all_cookies()
    browser.get(site + "/staff-login")
    assert browser.title == "Cache dashboard"
    [section] = browser.find_elements(By.CSS_SELECTOR, ".mcache-cache")
    lines = section.find_elements(By.CSS_SELECTOR, "svg.mcache-chart polyline")
    assert "page" in {line.get_attribute("data-family") for line in lines}
    hits = section.find_element(By.XPATH, ".//table[@class='mcache-counters']//tr[1]/td").text
    assert int(hits.replace(",", "")) > 0, "the hits other processes counted"
    family = browser.execute_script("return getComputedStyle(document.body).fontFamily")
    assert "Times" not in family, "the page's own stylesheet applies"
    browser.save_screenshot(str(screenshots / "dashboard-flask.png"))


def test_invalidate_confirmed_makes_the_next_request_a_miss(browser, site: str) -> None:
    from selenium.webdriver.common.by import By

    fetch(site + "/news/")
    assert fetch(site + "/news/")[1] == "HIT"
    browser.get(site + "/staff-login")
    form = browser.find_element(By.CSS_SELECTOR, "form.mcache-invalidate")
    form.find_element(By.NAME, "target").send_keys("news")
    submit(browser, form)
    confirm = browser.find_element(By.CSS_SELECTOR, ".mcache-confirm")
    assert "Invalidate tag 'news'" in confirm.text
    assert fetch(site + "/news/")[1] == "HIT", "nothing is done before the confirmation"
    submit(browser, confirm.find_element(By.TAG_NAME, "form"))
    assert "invalidated tag 'news'" in browser.find_element(By.CSS_SELECTOR, ".done").text
    assert fetch(site + "/news/")[1] == "MISS"


def test_a_visitor_the_site_refuses_gets_403(site: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        fetch(site + "/cache/")
    assert refused.value.code == 403
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(site + "/cache/act", data=b"kind=flush&cache=default"),
            timeout=10,
        )
    assert refused.value.code == 403


def test_a_blueprint_without_allow_is_refused() -> None:
    from flask_mcache.dashboard import dashboard_blueprint

    with pytest.raises(ConfigError, match="allow="):
        dashboard_blueprint()
    with pytest.raises(ConfigError, match="allow="):
        dashboard_blueprint(allow=True)  # type: ignore[arg-type]
