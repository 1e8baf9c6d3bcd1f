"""A rebuild that stores nothing leaves a stale entry no more life than its own (guarantee
2 of docs/explanation/consistency.md: stale for at most ``stale_ttl``, or until the
rebuild under way at that moment ends).

Found by the simulation (tests/sim): while a stale entry is rebuilt, its lease keeps it
alive (a lock's life and a turn of the renewer at a time), so that a long build still
finds it to replace. A rebuild that then failed left it with that extended life; the
next reader's rebuild failed too and extended it again, and the stale value was served
for as long as readers kept coming, long after ``ttl + stale_ttl``. Here, on a real
server: a stale entry whose rebuild outlasts its life and fails is gone once the failure
has been answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from mcache import NO_VALUE, Cache

OPTIONS = {"ttl": 1, "stale_ttl": 3, "lock_timeout": 1}
"""Kept 4 s in the store: at least 3 on memcached, whose clock counts whole seconds."""


class Outage(Exception):
    """The backend the value is built from is down."""


def stale_report(url: str) -> Cache:
    """A cache on ``url`` whose entry "report" holds "v0", stale by now."""
    cache = Cache(url, namespace="kept-stale")
    cache.clear()
    assert cache.get_or_build("report", lambda: "v0", **OPTIONS) == "v0"
    time.sleep(1.2)  # fresh for (at most) 1 s, then stale
    return cache


def failing_after(seconds: float) -> Callable[[], str]:
    """A builder that works ``seconds``, then finds its backend down."""

    def failing() -> str:
        time.sleep(seconds)
        raise Outage("the database is down")

    return failing


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_failed_rebuild_does_not_keep_the_stale_entry_alive(
    request: pytest.FixtureRequest, server: str
) -> None:
    cache = stale_report(request.getfixturevalue(server))
    failing = failing_after(3.5)  # past the entry's own life: its lease keeps it meanwhile
    assert cache.get_or_build("report", failing, **OPTIONS) == "v0", "stale-if-error"
    found = cache.store.get(cache._store_key("report"))
    assert found is NO_VALUE, (
        "the stale entry outlived ttl + stale_ttl after its rebuild failed: the next"
        " reader would be served it stale again"
    )


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_rebuild_failing_within_the_entry_s_life_leaves_it_to_serve(
    request: pytest.FixtureRequest, server: str
) -> None:
    cache = stale_report(request.getfixturevalue(server))
    failing = failing_after(0.4)  # renewed once: its lease keeps the entry meanwhile
    assert cache.get_or_build("report", failing, **OPTIONS) == "v0", "stale-if-error"
    assert cache.get_or_build("report", failing, **OPTIONS) == "v0", (
        "the entry, given back the life it had left, no longer serves its stale value"
    )
