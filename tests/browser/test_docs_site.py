"""The docs site as a reader opens it, in headless Chromium: built with MkDocs (the
``docs`` extra) and read from the files. At 1,280 pixels, and at 500 (a phone held
sideways; headless Chromium goes no narrower), no page scrolls sideways (a wide table or
code block scrolls inside itself); at 1,280 no code block of any page scrolls either
(what a command prints aside), so no comment is cut off; and the home page shows its
quickstart on the first screen of a laptop."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import _missing

ROOT = Path(__file__).resolve().parents[2]
PAGES = (
    "",
    "getting-started/install/",
    "how-to/cache-a-page/",
    "how-to/dashboard/",
    "how-to/holes/",
    "explanation/comparison/",
    "benchmarks/",
    "reference/api/django/",
)
LAPTOP_SCREEN = 800
"""Pixels of page a laptop shows without scrolling."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        _missing('MkDocs is not installed (pip install -e ".[docs]")')
    folder = tmp_path_factory.mktemp("docs-site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return folder


@pytest.mark.parametrize("width", [1280, 500])  # a laptop; as narrow as headless Chromium goes
@pytest.mark.parametrize("page", PAGES)
def test_no_page_scrolls_sideways(browser, site: Path, page: str, width: int) -> None:
    browser.set_window_size(width, 900)
    try:
        browser.get((site / page / "index.html").as_uri())
        wide = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
    finally:
        browser.set_window_size(1280, 1400)
    assert wide[0] <= wide[1], f"/{page} is {wide[0]} px wide in a {wide[1]} px window"


WIDE_CODE = """
for (const output of document.querySelectorAll('.md-content pre > code .go'))
  output.style.display = 'none';  // what a command prints may be wider: it scrolls
return Array.from(document.querySelectorAll('.md-content pre > code'))
  .filter(code => code.scrollWidth > code.clientWidth)
  .map(code => code.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a));
"""
"""Returns the longest line of each code block of the page that scrolls sideways."""


def test_no_code_block_scrolls_sideways_on_a_laptop(browser, site: Path) -> None:
    """Every page, not a sample: a block scrolling inside itself hides the end of its
    lines (the comments, as often as not), though the page itself does not scroll."""
    browser.set_window_size(1280, 900)
    wide = {}
    try:
        for page in sorted(site.rglob("index.html")):
            browser.get(page.as_uri())
            if lines := browser.execute_script(WIDE_CODE):
                wide[str(page.parent.relative_to(site))] = lines
    finally:
        browser.set_window_size(1280, 1400)
    assert wide == {}, wide


def test_every_tab_title_is_its_own_and_names_mcache_once(site: Path) -> None:
    titles = {}
    for page in sorted(site.rglob("index.html")):
        title = re.search(r"<title>([^<]*)</title>", page.read_text(encoding="utf-8"))
        assert title is not None, page
        titles[str(page.parent.relative_to(site))] = html.unescape(title[1])
    assert len(set(titles.values())) == len(titles), "two tabs titled alike"
    for page, title in titles.items():
        named = re.findall(r"(?<![\w])mcache(?![\w])", title)
        assert len(named) == 1, f"/{page}: {title!r}"
    assert titles["."] == "mcache: dog-pile-safe caching for Django and Flask"


def test_the_maintainers_pages_are_under_development(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'class="md-tabs__link">\s*([^<]*?)\s*</a>', home)
    tabs = [html.unescape(link) for link in links]
    assert "Releasing" not in tabs and "Development" in tabs, tabs


def test_the_home_page_opens_with_its_quickstart(browser, site: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get((site / "index.html").as_uri())
    heading = browser.find_element(By.ID, "quickstart")
    code = browser.find_elements(By.CSS_SELECTOR, ".md-content pre")[0]
    for element in (heading, code):
        top = browser.execute_script("return arguments[0].getBoundingClientRect().top", element)
        assert top < LAPTOP_SCREEN, f"{element.text[:40]!r} starts at {top} px"
