"""A Redis replica behind its primary never makes a reader reset a tag.

With ``replica_reads`` a hit's tag versions come from a replica. A tag the replica does
not have yet is created on the primary with ``add``; when that fails (the primary has it),
its version must be read back from the primary. Read back from the replica, it was missing
there too, and the reader wrote a version of its own over the primary's: every entry
recorded against the tag counted as changed, though nothing was written (found by the
simulation, with a replica half a second behind: ``docs/explanation/simulation.md``).
"""

from __future__ import annotations

import time

import redis

from mcache import Cache
from mcache.stores.redis.store import RedisStore
from tests.servers import redis_process


def wait_for_link(replica: redis.Redis) -> None:
    deadline = time.monotonic() + 10
    while replica.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica never caught up"
        time.sleep(0.05)


def test_a_tag_the_replica_lacks_is_read_back_from_the_primary() -> None:
    primary = redis_process().start()
    replica = redis_process(replica_of=primary.address).start()
    try:
        primary_client = redis.Redis(host="127.0.0.1", port=primary.port)
        replica_client = redis.Redis(host="127.0.0.1", port=replica.port)
        wait_for_link(replica_client)
        replica_client.replicaof("NO", "ONE")  # a replica that fell behind, and stays so
        writer = Cache(f"redis://{primary.address}/0", namespace="lag")
        built: list[str] = []

        def build(name: str) -> str:
            built.append(name)
            return name

        writer.get_or_build("one", lambda: build("one"), tags=["shared"], ttl=60)
        writer.get_or_build("two", lambda: build("two"), tags=["shared"], ttl=60)
        tags_before = {k: primary_client.get(k) for k in primary_client.keys("*shared*")}

        reader = Cache(
            RedisStore(f"redis://{primary.address}/0", replica=replica_client), namespace="lag"
        )
        assert reader.get_or_build("one", lambda: build("one again"), tags=["shared"], ttl=60)

        assert {k: primary_client.get(k) for k in tags_before} == tags_before
        assert writer.get_or_build("two", lambda: build("two again"), tags=["shared"], ttl=60)
        assert "two again" not in built, "the entry recorded against the tag was rebuilt"
    finally:
        replica.kill()
        primary.kill()
