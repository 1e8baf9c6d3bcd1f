"""A Redis primary SIGKILLed under load behind Sentinel: a non-event for the site's users.

The Django and the Flask halves of the reliability site run on a
``redis+sentinel://`` URL while the primary is killed. Every response must be
the page (no error, no request waiting on the dead server); the sentinels
promote the replica, the store finds it on its own, and the cache is used again
after that; the failures are logged once per kind and interval, not per request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
import redis
from django.test import override_settings

from mcache.stores import from_url
from tests.redis_groups import SentinelGroup
from tests.reliability.failover import (
    FAST,
    assert_a_non_event,
    assert_cached_again,
    kill_under_load,
)
from tests.reliability.test_server_faults import django_settings
from tests.servers import HOST


@pytest.fixture
def group(sentinel_group: SentinelGroup) -> Iterator[SentinelGroup]:
    """A Sentinel group of this test's own (``sentinel_group`` checks the binary is there)."""
    with SentinelGroup(service="failover") as own:
        yield own


def wait_for_promotion(group: SentinelGroup, old_port: int, seconds: float) -> float:
    """Wait until the sentinels name another primary; return how long it took."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if group.primary_port() != old_port:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"no replica promoted within {seconds} s")


@pytest.mark.django_db
def test_the_primary_killed_under_load_costs_no_error_and_the_store_follows(
    group: SentinelGroup, caplog
) -> None:
    url = group.url(query=FAST)
    old_port = group.primary_port()
    with override_settings(**django_settings(url)), caplog.at_level(logging.WARNING):
        seen = kill_under_load(url, group.primary.kill, probe_key="probe")
        assert group.primary_port() != old_port, "the sentinels promoted the replica"
        assert_a_non_event(seen, caplog.records)
        print(f"\nsentinel: {len(seen.outcomes)} answers; hits again {seen.hits_again_after:.2f} s")
        assert_cached_again(url)


def test_a_store_made_before_a_failover_writes_to_the_promoted_replica(
    group: SentinelGroup,
) -> None:
    store = from_url(group.url(query=FAST))
    old_port = group.primary_port()
    old_primary = redis.Redis(host=HOST, port=old_port)
    old_primary.set("before", b"1")
    assert old_primary.wait(1, 5000) == 1, "the replica has it (replication is asynchronous)"
    old_primary.close()
    group.primary.kill()
    wait_for_promotion(group, old_port, 20)
    deadline = time.monotonic() + 10
    errors = []
    while time.monotonic() < deadline:
        try:
            store.set("after", b"2")
            break
        except Exception as error:  # connections to the dead primary fail once each, then go
            errors.append(error)
            time.sleep(0.05)
    else:
        raise AssertionError(f"never wrote after the failover: {errors[-3:]}")
    new_primary = redis.Redis(host=HOST, port=group.primary_port())
    assert new_primary.get("after") == b"2", "written to the new primary"
    assert store.get("before") == b"1", "what was replicated before the crash is still there"
    roles = {fields["role"] for fields in store.stats().values() if not fields.get("dead")}
    assert roles == {"primary"}, "the stats name the new primary (its replica is dead)"
    new_primary.close()
    store.close()


def test_replica_reads_serve_hits_from_the_replica_and_keep_decisions_on_the_primary(
    sentinel_url: str, sentinel_group: SentinelGroup
) -> None:
    store = from_url(sentinel_url + "?replica_reads=true")
    replica = redis.Redis(host=HOST, port=sentinel_group.replica.port)
    primary = redis.Redis(host=HOST, port=sentinel_group.primary_port())
    try:
        store.set("page", b"cached")
        time.sleep(0.2)  # replication is asynchronous
        hits_before = replica.info("stats")["keyspace_hits"]
        primary_hits_before = primary.info("stats")["keyspace_hits"]
        assert [store.get("page") for _ in range(20)] == [b"cached"] * 20
        assert store.get_many(["page"]) == {"page": b"cached"}
        assert replica.info("stats")["keyspace_hits"] - hits_before >= 21, "read on the replica"
        assert primary.info("stats")["keyspace_hits"] == primary_hits_before
        value, token = store.gets("page")  # a lease or a lock: read on the primary
        assert value == b"cached" and store.cas("page", b"new", token)
        assert primary.info("stats")["keyspace_hits"] > primary_hits_before
        assert {fields["role"] for fields in store.stats().values()} == {"primary", "replica"}
    finally:
        replica.close()
        primary.close()
        store.close()
