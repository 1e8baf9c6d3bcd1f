"""A stale entry past its own ``ttl + stale_ttl``, still in the store only because a dead
rebuild's keep-alive gave it more life, is not served stale while the next rebuild runs:
that rebuild puts its placeholder over it, and readers wait for the new value (guarantee
2 of docs/explanation/consistency.md: stale for at most ``stale_ttl``, or until the rebuild
under way at that moment ends; that one has stopped).

Found by the simulation (tests/sim, the kept seed 834711709212: a queue worker killed mid-
job after its lease's keep-alive). Before the fix the next rebuild took its lease on the
outlived entry as found and kept it alive in turn, so a chain of rebuilds, each begun after
the entry's life had ended, went on serving it stale. Two caches stand for two processes
(one clock, as on one host); the entry's extra life is written as a keep-alive writes it,
the same bytes with a longer TTL.
"""

from __future__ import annotations

import threading

import pytest

from mcache import Cache
from mcache.clock import FakeClock

LIFE = 2
"""The entry's ``ttl + stale_ttl``, in seconds."""


@pytest.mark.parametrize("server", ["memcached_text_url", "redis_url"])
def test_a_rebuild_begun_after_its_entry_outlived_its_life_serves_nobody_the_old_value(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    clock = FakeClock()
    first = Cache(url, namespace="outlived", clock=clock, jitter=0, lock_timeout=10)
    second = Cache(url, namespace="outlived", clock=clock, jitter=0, lock_timeout=10)
    options = {"ttl": 1, "stale_ttl": LIFE - 1, "wait": 20.0}
    assert first.get_or_build("page", lambda: "old", **options) == "old"
    key = first._store_key("page")
    first.store.set(key, first.store.get(key), 60)  # a dead rebuild's keep-alive
    clock.advance(LIFE + 5)  # its own life is over; the store still has it

    building, release = threading.Event(), threading.Event()

    def slow_rebuild() -> str:
        building.set()
        assert release.wait(20), "the test never let the rebuild finish"
        return "new"

    rebuilt: list[str] = []
    rebuilder = threading.Thread(
        target=lambda: rebuilt.append(first.get_or_build("page", slow_rebuild, **options))
    )
    rebuilder.start()
    assert building.wait(10), "the rebuild never began"
    read: list[str] = []
    reader = threading.Thread(
        target=lambda: read.append(second.get_or_build("page", lambda: "third", **options))
    )
    reader.start()
    reader.join(0.5)
    served_early = list(read)
    release.set()
    reader.join(20)
    rebuilder.join(20)
    assert served_early == [], f"served {served_early} while the rebuild was under way"
    assert rebuilt == ["new"]
    assert read == ["new"], "the reader did not wait for the rebuild under way"
