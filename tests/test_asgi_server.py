"""An ASGI site under a real uvicorn process answers cached pages.

The site is ``tests/asgi_site.py`` (an ``async def`` view under ``@cached_view``)
served by one uvicorn worker on a free loopback port, on a real store. A cold
burst of concurrent requests renders the page once (the others wait for that
render in the same process), later requests are hits, and the server stops
without the "Event loop is closed" noise of clients left to a closed loop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.benchmarks.common import uvicorn

ROOT = Path(__file__).resolve().parent.parent


def get(port: int, path: str) -> tuple[str | None, bytes]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.headers.get("X-Cache"), response.read()


@pytest.mark.parametrize("store", ["redis", "memcached"])
def test_uvicorn_serves_cached_pages_rendering_each_once(
    store: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"{store}_url")
    env = {**os.environ, "MCACHE_URL": url, "ASGI_SITE_RENDER_SECONDS": "0.3"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    server, port = uvicorn(
        "tests.asgi_site:application", env, str(ROOT), ("/renders/",), subprocess.PIPE
    )
    try:
        with ThreadPoolExecutor(16) as pool:
            burst = list(pool.map(lambda _: get(port, "/mcache/1/"), range(16)))
        assert len({body for _, body in burst}) == 1 and b"page 1" in burst[0][1]
        assert sorted(state for state, _ in burst).count("MISS") == 1, burst
        assert json.loads(get(port, "/renders/")[1]) == {"renders": 1}
        assert [get(port, "/mcache/1/")[0] for _ in range(3)] == ["HIT"] * 3
        assert get(port, "/mcache/2/")[0] == "MISS"
        assert json.loads(get(port, "/renders/")[1]) == {"renders": 2}
    finally:
        server.send_signal(signal.SIGINT)
        _, errors = server.communicate(timeout=30)
    assert server.returncode == 0, errors
    assert "Event loop is closed" not in errors and "Traceback" not in errors, errors


def test_uvicorn_behind_the_edge_answers_stored_pages_before_django(memcached_url: str) -> None:
    env = {**os.environ, "MCACHE_URL": memcached_url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    server, port = uvicorn("tests.asgi_site:edge", env, str(ROOT), ("/renders/",), subprocess.PIPE)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/mcache/7/", timeout=10) as first:
            assert first.headers["X-Cache"] == "MISS"
            body = first.read()
        for _ in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/mcache/7/", timeout=10) as hit:
                assert hit.headers["Cache-Status"] == "mcache; hit; detail=edge"
                assert hit.read() == body
        assert json.loads(get(port, "/renders/")[1]) == {"renders": 1}
    finally:
        server.send_signal(signal.SIGINT)
        _, errors = server.communicate(timeout=30)
    assert server.returncode == 0, errors
    assert "Traceback" not in errors, errors
