"""A lock attempt the store failed is not a lock found held (guarantee 2 of
docs/explanation/consistency.md: a stale value is served only while it is being rebuilt).

Found by the simulation (tests/sim): after one reader's try for a stale key's lock failed
in the store, the process took the key for busy and its other readers served it stale for
a quarter second, with nobody rebuilding it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcache import Cache
from tests.memcached_proxy import MemcachedProxy, upstream_of


@pytest.fixture
def proxy(memcached_url: str) -> Iterator[MemcachedProxy]:
    with MemcachedProxy(upstream_of(memcached_url)) as proxy:
        yield proxy


def test_after_a_failed_lock_attempt_the_next_reader_rebuilds(proxy: MemcachedProxy) -> None:
    cache = Cache(f"memcached://{proxy.address}?protocol=text", namespace="refused")
    assert cache.get_or_build("page", lambda: "v1", ttl=60, tags=["post"]) == "v1"
    cache.invalidate("post")
    proxy.answers = {b"add l:": b"SERVER_ERROR out of memory storing object\r\n"}
    assert cache.get_or_build("page", lambda: "v2", ttl=60, tags=["post"]) == "v1"
    assert cache.counts.local()["store_errors"] >= 1, "the lock attempt failed in the store"
    proxy.answers = {}
    assert cache.get_or_build("page", lambda: "v3", ttl=60, tags=["post"]) == "v3"
