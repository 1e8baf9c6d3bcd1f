"""mcache's django-debug-toolbar panel, in a real toolbar request on a real server.

The site (``tests/dj/toolbar_site.py``) runs under uvicorn with the toolbar and
``MCachePanel``; the test reads the page as a browser would, then the panel's
content from the toolbar's own ``render_panel`` endpoint, as the toolbar's
JavaScript does when the panel is opened.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.benchmarks.common import uvicorn

ROOT = Path(__file__).resolve().parents[2]


def fetch(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.read().decode()


def panel_content(port: int) -> str:
    """Load the shop page and return the mcache panel's HTML for that request."""
    page = fetch(port, "/shop/")
    request_id = re.search(r'data-request-id="([0-9a-f]+)"', page)
    assert request_id, "the toolbar was not rendered into the page"
    found = fetch(port, f"/__debug__/render_panel/?request_id={request_id[1]}&panel_id=MCachePanel")
    return json.loads(found)["content"]


def rows(content: str) -> list[list[str]]:
    """Return the cells of the panel's call table, tags stripped."""
    table = content.split('class="mcache-calls"', 1)[1]
    return [
        [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)
    ]


@pytest.mark.parametrize("store", ["redis", "memcached"])
def test_the_panel_lists_each_call_with_its_outcome(
    store: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{store}_url")
    env = {**os.environ, "MCACHE_URL": url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    server, port = uvicorn(
        "tests.dj.toolbar_site:application",
        env,
        str(ROOT),
        ("/static/debug_toolbar/js/toolbar.js",),
        subprocess.PIPE,
    )
    try:
        first, second = rows(panel_content(port)), rows(panel_content(port))
    finally:
        server.send_signal(signal.SIGINT)
        _, errors = server.communicate(timeout=30)
    assert "Traceback" not in errors, errors
    # time, call, key, outcome, tags, round trips, events, cache
    calls = [(r[1], r[2].split(":")[0], r[3], r[4], r[6], r[7]) for r in first]
    assert calls == [
        (
            "get_or_build",
            "tests.dj.toolbar_site.top_products",
            "MISS",
            "products",
            "built",
            "default",
        ),
        ("get_or_build", "block.sidebar", "MISS", "", "built", "default"),
        ("get", "_1_shop-visits", "MISS", "", "", "default"),
        ("set", "_1_shop-visits", "-", "", "", "default"),
    ]
    assert [(r[1], r[3], r[6]) for r in second] == [
        ("get_or_build", "HIT", ""),
        ("get_or_build", "HIT", ""),
        ("get", "HIT", ""),
        ("set", "-", ""),
    ]
    assert all(int(r[5]) >= 1 for r in first + second), "every call made a round trip"
    assert int(second[0][5]) == 1, "a tagged hit is one pipelined read"
    assert all(r[0].endswith(" ms") for r in first)
