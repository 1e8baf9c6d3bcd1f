"""Make ``docs/assets/debug-toolbar-panel.png``: the mcache panel in a real browser.

Not part of the test suite (it needs a browser): serves ``tests/dj/toolbar_site.py``
under uvicorn on the memory store, opens ``/shop/`` in Chromium through
Playwright (a first request: its reads miss and build), opens the mcache panel
and saves a screenshot.

    pip install playwright   # the Python package; the browser is Debian's chromium
    PYTHONPATH=. python docs/tools/panel_screenshot.py [/usr/bin/chromium]
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.benchmarks.common import uvicorn

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "docs" / "assets" / "debug-toolbar-panel.png"


def main(chromium: str = "/usr/bin/chromium") -> None:
    env = {**os.environ, "MCACHE_URL": "memory://"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    ready = ("/static/debug_toolbar/js/toolbar.js",)  # not /shop/: its first request is shown
    server, port = uvicorn("tests.dj.toolbar_site:application", env, str(ROOT), ready)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(viewport={"width": 1280, "height": 640})
            page.goto(f"http://127.0.0.1:{port}/shop/")
            page.click("a.MCachePanel")
            page.wait_for_selector("table.mcache-calls")
            page.screenshot(path=str(TARGET))
            browser.close()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    print(f"written {TARGET}")


if __name__ == "__main__":
    main(*sys.argv[1:])
