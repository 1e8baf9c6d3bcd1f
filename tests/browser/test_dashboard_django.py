"""The cache dashboard in Django's admin, looked at in headless Chromium: a site under
gunicorn on real memcached and Redis (:mod:`tests.browser.django_site`), signed in as
its users. After traffic the chart shows; the invalidate button, confirmed, makes the
next request a MISS; a signed-in user who is not staff gets 403, and so does staff
without the dashboard's permission."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.benchmarks.common import answering
from tests.browser.navigation import click_through
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "a-long-test-password-1"
SEED = f"""
import django
django.setup()
from django.contrib.auth.models import Permission, User
from django.contrib.sessions.backends.db import SessionStore
from django.core.management import call_command
call_command("migrate", verbosity=0)
User.objects.create_superuser("admin", "admin@example.com", {PASSWORD!r})
User.objects.create_user("clerk", password={PASSWORD!r}, is_staff=True)
viewer = User.objects.create_user("viewer", password={PASSWORD!r}, is_staff=True)
viewer.user_permissions.add(Permission.objects.get(codename="view_dashboard"))
visitor = User.objects.create_user("visitor", password={PASSWORD!r})
session = SessionStore()
session["_auth_user_id"] = str(visitor.pk)
session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
session["_auth_user_hash"] = visitor.get_session_auth_hash()
session.create()
print(session.session_key)
"""


@dataclass
class Site:
    url: str
    visitor_session: str

    def get(self, path: str) -> tuple[str, str]:
        """Return a page's body and its ``X-Cache``, as a visitor without cookies gets it."""
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return response.read().decode(), response.headers.get("X-Cache", "")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, memcached_nodes, redis_node) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("dashboard-site")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.browser.django_site",
        MCACHE_DASHBOARD_DB=str(folder / "site.sqlite3"),
        MCACHE_DASHBOARD_MEMCACHED=memcached_nodes[0].address,
        MCACHE_DASHBOARD_REDIS=f"redis://{redis_node.address}/5",
    )
    seeded = subprocess.run(
        [sys.executable, "-c", SEED], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    port = free_port()
    # threads: a browser's idle preconnections would each hold a sync worker
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "django.core.wsgi:get_wsgi_application()",
         "-w", "2", "-b", f"127.0.0.1:{port}", "--log-level", "warning",
         "--graceful-timeout", "2",
         "--worker-class", "gthread", "--threads", "4"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        answering(server, port, ("/news/",), "gunicorn serving tests.browser.django_site")
        yield Site(f"http://127.0.0.1:{port}", seeded.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(10)


def submit(browser, form) -> None:
    """Press the form's button and wait for the page it leads to."""
    from selenium.webdriver.common.by import By

    click_through(browser, form.find_element(By.CSS_SELECTOR, "input[type=submit]"))


def sign_in(browser, site: Site, username: str) -> None:
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(site.url + "/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    submit(browser, browser.find_element(By.ID, "login-form"))
    assert "/admin/login/" not in browser.current_url, f"{username} signed in"


def test_the_dashboard_shows_the_chart_after_traffic(browser, site: Site, screenshots) -> None:
    from selenium.webdriver.common.by import By

    for _ in range(3):  # each round's first requests flush what the round before counted
        for _ in range(6):
            site.get("/news/")
        time.sleep(0.3)
    sign_in(browser, site, "admin")
    browser.get(site.url + "/admin/")
    assert browser.find_element(By.LINK_TEXT, "Cache dashboard"), "listed in the admin index"
    browser.get(site.url + "/admin/mcache/dashboard/")
    assert browser.title.startswith("Cache dashboard")
    sections = browser.find_elements(By.CSS_SELECTOR, ".mcache-cache")
    assert [s.get_attribute("data-cache") for s in sections] == ["default", "redis"]
    default = sections[0]
    lines = default.find_elements(By.CSS_SELECTOR, "svg.mcache-chart polyline")
    assert "page" in {line.get_attribute("data-family") for line in lines}
    assert default.find_element(By.CSS_SELECTOR, ".mcache-servers").is_displayed()
    hits = default.find_element(By.XPATH, ".//table[@class='mcache-counters']//tr[1]/td").text
    assert int(hits.replace(",", "")) > 0, "the hits the site's processes counted"
    family = browser.execute_script(
        "return getComputedStyle(document.body).fontFamily"
    )  # the admin's stylesheet applies
    assert "Times" not in family
    browser.save_screenshot(str(screenshots / "dashboard-django.png"))


WITHOUT_DJANGOS_BREADCRUMBS = """
function strip(rules, owner) {
  for (let i = rules.length - 1; i >= 0; i--) {
    const rule = rules[i], selector = rule.selectorText;
    if (selector === undefined && rule.cssRules) strip(rule.cssRules, rule);  // @media
    else if (/\\bbreadcrumbs\\b/.test(selector) && !/mcache-breadcrumbs/.test(selector))
      owner.deleteRule(i);
  }
}
for (const sheet of document.styleSheets) strip(sheet.cssRules, sheet);
"""
"""Deletes Django's own rules for breadcrumbs (those of ``div.breadcrumbs`` up to Django 5.2,
of ``ol.breadcrumbs`` after): the page must not need them."""


@pytest.mark.parametrize("django_rules", ["kept", "deleted"])
def test_the_breadcrumbs_are_styled_whatever_django_styles(
    browser, site: Site, django_rules: str
) -> None:
    from selenium.webdriver.common.by import By

    sign_in(browser, site, "admin")
    browser.get(site.url + "/admin/mcache/dashboard/")
    if django_rules == "deleted":
        browser.execute_script(WITHOUT_DJANGOS_BREADCRUMBS)
    crumbs = browser.find_element(By.CSS_SELECTOR, "nav[aria-label=Breadcrumbs] > *")
    background = crumbs.value_of_css_property("background-color")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), "the admin's dark band"
    items = crumbs.find_elements(By.TAG_NAME, "li")
    names = [item.text for item in items] or [w.strip() for w in crumbs.text.split("›")]
    assert names == ["Home", "mcache", "Cache dashboard"]
    assert len({item.location["y"] for item in items}) <= 1, "on one line"
    assert all(i.value_of_css_property("list-style-type") == "none" for i in items), "no bullets"
    separators = browser.execute_script(
        "return Array.from(arguments[0]).slice(1)"
        ".map(item => getComputedStyle(item, '::before').content)",
        items,
    )
    assert all("›" in separator for separator in separators), separators


def test_invalidate_confirmed_makes_the_next_request_a_miss(browser, site: Site) -> None:
    from selenium.webdriver.common.by import By

    site.get("/news/")
    assert site.get("/news/")[1] == "HIT"
    sign_in(browser, site, "admin")
    browser.get(site.url + "/admin/mcache/dashboard/")
    form = browser.find_element(
        By.CSS_SELECTOR, '.mcache-cache[data-cache="default"] form.mcache-invalidate'
    )
    form.find_element(By.NAME, "target").send_keys("news")
    submit(browser, form)
    confirm = browser.find_element(By.CSS_SELECTOR, ".mcache-confirm")
    assert "Invalidate tag 'news'" in confirm.text
    assert site.get("/news/")[1] == "HIT", "nothing is done before the confirmation"
    submit(browser, confirm.find_element(By.TAG_NAME, "form"))
    assert browser.current_url.endswith("/admin/mcache/dashboard/")
    message = browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    assert "invalidated tag 'news'" in message.lower()
    assert site.get("/news/")[1] == "MISS"


def test_a_signed_in_user_who_is_not_staff_gets_403(browser, site: Site) -> None:
    browser.delete_all_cookies()
    browser.get(site.url + "/admin/login/")
    browser.add_cookie({"name": "sessionid", "value": site.visitor_session, "path": "/"})
    browser.get(site.url + "/admin/mcache/dashboard/")
    assert "403 Forbidden" in browser.page_source
    assert "mcache-cache" not in browser.page_source


def test_staff_without_the_permission_gets_403(browser, site: Site) -> None:
    sign_in(browser, site, "clerk")
    browser.get(site.url + "/admin/mcache/dashboard/")
    assert "403 Forbidden" in browser.page_source
    assert "mcache-cache" not in browser.page_source


def test_staff_who_may_look_but_not_act_gets_403_on_a_button(browser, site: Site) -> None:
    from selenium.webdriver.common.by import By

    site.get("/news/")
    assert site.get("/news/")[1] == "HIT"
    sign_in(browser, site, "viewer")
    browser.get(site.url + "/admin/mcache/dashboard/")
    form = browser.find_element(By.CSS_SELECTOR, "form.mcache-invalidate")
    form.find_element(By.NAME, "target").send_keys("news")
    submit(browser, form)
    assert "403 Forbidden" in browser.page_source
    assert site.get("/news/")[1] == "HIT", "nothing invalidated"
