"""A tag key lost and recreated by another process in the same millisecond must not come
back with the version the lost copy had (guarantee 1 of docs/explanation/consistency.md).

Two caches stand for two processes: each has its own memo of the tags it created, as
two processes do, and both clocks read the same millisecond.
"""

from __future__ import annotations

import pytest

from mcache import Cache, FakeClock
from mcache.model.tags import version_ms
from mcache.randomness import RandomSource


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_bump_by_another_process_in_the_millisecond_of_a_lost_tag_invalidates(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    reader = Cache(url, namespace="recreated", clock=FakeClock(2_000_000_000.0))
    writer = Cache(url, namespace="recreated", clock=FakeClock(2_000_000_000.0))
    assert reader.get_or_build("page", lambda: "old", tags=["post"]) == "old"
    created = reader.tags.read(["post"], reader.tags.key("post"))["post"]
    reader.store.delete(reader.tags.key("post"))  # evicted, or its server restarted
    bumped = writer.invalidate("post")["post"]
    assert version_ms(bumped) == version_ms(created), "both in one millisecond"
    assert bumped != created, "the lost copy's version came back"
    assert reader.get_or_build("page", lambda: "new", tags=["post"]) == "new"


class SameDraw(RandomSource):
    """Every draw of the low bits the same: what is left is the version's floor."""

    def randint(self, low: int, high: int) -> int:
        return low + 5


@pytest.mark.parametrize("server", ["memcached_url", "memcached_text_url", "redis_url"])
def test_a_lost_tag_recreated_on_a_version_this_process_knew_does_not_come_back(
    request: pytest.FixtureRequest, server: str
) -> None:
    # The process that created the tag knows its version V; another bumps it within the
    # millisecond, to V + 1; the key is lost, and the first process recreates it. Its
    # floor is V + 1 (a process never repeats its own version), the very version lost:
    # the draw must come on top of the floor, or the entry built at V + 1 stays valid.
    url = request.getfixturevalue(server)
    creator = Cache(url, namespace="refloored", clock=FakeClock(2_000_000_000.0))
    creator.random = SameDraw(seed=1)
    bumper = Cache(url, namespace="refloored", clock=FakeClock(2_000_000_000.0))
    key = creator.tags.key("post")
    created = creator.invalidate("post")["post"]
    lost = bumper.invalidate("post")["post"]
    assert lost == created + 1, "a bump in the millisecond moves the version by one"
    assert creator.get_or_build("page", lambda: "old", tags=["post"]) == "old"
    creator.store.delete(key)  # evicted, or its server restarted
    recreated = creator.invalidate("post")["post"]
    assert recreated != lost, "the lost copy's version came back"
    assert creator.get_or_build("page", lambda: "new", tags=["post"]) == "new"
