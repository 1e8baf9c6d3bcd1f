"""A forced refresh waits for a rebuild under way on every store, the meta protocol's
lease included (guarantee 5 of docs/explanation/consistency.md: builds run once).

On memcached's meta protocol the server leases a rebuild to the reader it tells ``W``; a
refresh that took the text protocol's lock key instead excluded nobody, and built beside
the lease's holder. It now bids for the lease too, and waits while someone holds it.
"""

from __future__ import annotations

import threading
import time

import pytest

from mcache import Cache


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_refresh_waits_for_the_build_under_way(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    holder = Cache(url, namespace="refresh-lease")
    refresher = Cache(url, namespace="refresh-lease", wait=5)
    spans: list[tuple[str, float, float]] = []
    started = threading.Event()

    def build(who: str, seconds: float) -> str:
        began = time.monotonic()
        started.set()
        time.sleep(seconds)
        spans.append((who, began, time.monotonic()))
        return who

    first = threading.Thread(
        target=holder.get_or_build, args=("page", lambda: build("holder", 1.0)), daemon=True
    )
    first.start()
    assert started.wait(5)
    value = refresher.refresh("page", lambda: build("refresh", 0.1))
    first.join(10)
    held_until = next(end for who, _, end in spans if who == "holder")
    refreshed = [began for who, began, _ in spans if who == "refresh"]
    # it waited: then built its own, or took the one that had just been built
    assert value == ("refresh" if refreshed else "holder")
    assert all(began >= held_until for began in refreshed), f"built beside the holder: {spans}"
