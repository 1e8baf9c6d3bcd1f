"""One primary of three SIGKILLed under load in a Redis Cluster: a non-event for users.

The primary killed is the one serving the ``get_or_build`` entry, so the load
reads and writes keys of the dead node and of the live ones at once. Its
replica takes over after the cluster's node timeout; the store learns the new
map on its own and the killed primary's keys hit again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.redis_groups import ClusterGroup
from tests.reliability.failover import (
    FAST,
    assert_a_non_event,
    assert_cached_again,
    builder_cache,
    kill_under_load,
)
from tests.reliability.test_server_faults import django_settings


@pytest.fixture
def cluster(cluster_group: ClusterGroup) -> Iterator[ClusterGroup]:
    """A cluster of this test's own (``cluster_group`` checks the binaries are there)."""
    with ClusterGroup() as own:
        yield own


@pytest.mark.django_db
def test_one_primary_of_three_killed_under_load_costs_no_error_and_hits_resume(
    cluster: ClusterGroup, caplog
) -> None:
    url = cluster.url(query=FAST)
    victim = cluster.serving(builder_cache(url).key("catalog"))
    probe = cluster.key_on(victim, "probe")
    with override_settings(**django_settings(url)), caplog.at_level(logging.WARNING):
        seen = kill_under_load(url, victim.kill, probe_key=probe)
        primaries = cluster.primaries()
        assert victim not in primaries and len(primaries) == 3, "its replica was promoted"
        assert_a_non_event(seen, caplog.records)
        print(f"\ncluster: {len(seen.outcomes)} answers; hits again {seen.hits_again_after:.2f} s")
        assert_cached_again(url)
