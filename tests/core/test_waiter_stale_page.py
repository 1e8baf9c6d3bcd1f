"""A lock waiter never takes an entry stored already stale as fresh (rule 2 of
docs/explanation/consistency.md: a build never consumes stale data silently).

Found by the simulation (tests/sim): a page built over a stale part is stored already
stale, but a caller in another process waiting on the page's lock took it as fresh when
it appeared (its tags were current), so it was served with no stale mark. Here three
caches on one real server stand for three processes: one rebuilds the part and holds its
lock; one builds the page over the stale part; one waits on the page's lock meanwhile.
"""

from __future__ import annotations

import threading
import time

import pytest

from mcache import Cache
from mcache.engine.build import STALE_SERVED
from tests.held_builds import hold_build

OPTIONS = {"ttl": 60, "stale_ttl": 60}
PART = {"ttl": 1, "stale_ttl": 60}
"""The part goes stale by age, so the tag versions it recorded stay current."""


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_waiter_does_not_take_a_page_stored_stale_as_fresh(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    part_holder, page_builder, waiter = (Cache(url, namespace="stale-page") for _ in range(3))
    part_holder.clear()
    assert part_holder.get_or_build("part", lambda: "part v0", tags=["t"], **PART) == "part v0"
    time.sleep(1.1)  # the part's ttl ends

    holder = hold_build(part_holder, "part", "part v1", ["t"], PART)

    page_locked, store_page = threading.Event(), threading.Event()

    def page() -> str:
        part = page_builder.get_or_build("part", lambda: "never", tags=["t"], **PART)
        page_locked.set()
        store_page.wait(10)
        return f"page over {part}"

    building = threading.Thread(target=lambda: page_builder.get_or_build("page", page, **OPTIONS))
    building.start()
    assert page_locked.wait(10), "the page's build did not start"

    waited: dict[str, object] = {}
    waiter_builds = []

    def waiter_page() -> str:
        waiter_builds.append(1)
        part = waiter.get_or_build("part", lambda: "never", tags=["t"], **PART)
        return f"page over {part}"

    def wait_for_page() -> None:
        STALE_SERVED.set(False)
        waited["value"] = waiter.get_or_build("page", waiter_page, **OPTIONS)
        waited["stale"] = STALE_SERVED.get()

    waiting = threading.Thread(target=wait_for_page)
    waiting.start()
    time.sleep(0.2)  # the waiter finds the page's lock held and polls for its entry
    store_page.set()
    building.join(10)
    waiting.join(10)
    holder.let_go()

    assert waited["value"] == "page over part v0"
    assert waited["stale"], (
        "the page, built over a stale part and stored stale, was served as fresh to a"
        f" caller that waited on its lock (its builder ran {len(waiter_builds)} times)"
    )
