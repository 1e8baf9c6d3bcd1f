"""A tag key lost and recreated by another process in the same millisecond must not come
back with the version the lost copy had (guarantee 1 of docs/explanation/consistency.md).

Two caches stand for two processes: each has its own memo of the tags it created, as
two processes do, and both clocks read the same millisecond.
"""

from __future__ import annotations

import pytest

from mcache import Cache, FakeClock
from mcache.model.tags import version_ms


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
