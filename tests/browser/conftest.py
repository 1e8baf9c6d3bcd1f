"""A real browser for the tests that look at pages: headless Chromium driven by Selenium.

Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them): browsers
downloaded from elsewhere are not available on these machines. Without them the tests
skip, and fail under ``MCACHE_REQUIRE_SERVERS=1``. Screenshots go to the directory
``MCACHE_SCREENSHOTS`` names (``docs/assets`` refreshes the docs' pictures), else to a
temporary directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_SERVERS

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"


def _missing(message: str) -> None:
    if REQUIRE_SERVERS:
        pytest.fail(f"MCACHE_REQUIRE_SERVERS=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    binary = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver_path = shutil.which(DRIVER)
    if binary is None or driver_path is None:
        _missing("Chromium is not installed (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
    except ImportError:
        _missing('selenium is not installed (pip install -e ".[test]")')
    options = webdriver.ChromeOptions()
    options.binary_location = str(binary)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1400", "--disable-gpu"):  # fmt: skip
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=str(driver_path))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("MCACHE_SCREENSHOTS")
    folder = Path(named) if named else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
