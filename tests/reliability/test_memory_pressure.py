"""memcached with 8 MiB and a working set four times larger.

Evictions happen; counters and locks keep working (what eviction loses is in
the README: a counter restarts, a view counter reseeds from its ``initial``);
and the hit ratio ``mcache_stats`` reports is the ratio the callers measured.
"""

from __future__ import annotations

import io
import json
import os
import random
from collections.abc import Iterator

import pytest
from django.core.cache import caches
from django.core.management import call_command
from django.test import override_settings

from tests.reliability.test_server_faults import django_settings
from tests.servers import ServerProcess, memcached_process

VALUE_BYTES = 10_000
ENTRIES = 3_300  # ~33 MB of incompressible values into 8 MiB


@pytest.fixture
def small_memcached(memcached_nodes) -> Iterator[ServerProcess]:
    node = memcached_process(memory_mb=8).start()
    yield node
    node.kill()


@pytest.mark.django_db
def test_a_working_set_four_times_the_memory(small_memcached: ServerProcess) -> None:
    url = f"memcached://{small_memcached.address}"
    with override_settings(**django_settings(url, prefix="mem", compress_threshold=None)):
        cache = caches["default"]
        rng = random.Random(7)
        measured = {"hits": 0, "lookups": 0}
        visits = cache.view_counter("post", initial=lambda ident: 1000)
        hits_counter = cache.counter("api")

        def lookup(i: int) -> None:
            built = []
            cache.get_or_set(f"entry:{i}", lambda: built.append(1) or os.urandom(VALUE_BYTES), 600)
            measured["lookups"] += 1
            measured["hits"] += not built

        for i in range(ENTRIES):  # the fill: every lookup a miss, the oldest evicted
            lookup(i)
            if i % 100 == 0:
                visits.incr(7)
                hits_counter.incr()
                with cache.lock("nightly", timeout=5):  # locks keep working under pressure
                    pass
        for _ in range(3_000):  # reads: recent entries mostly hit, old ones were evicted
            lookup(ENTRIES - 1 - int(rng.expovariate(1 / 400)) % ENTRIES)

        servers = cache.mcache.store.stats()
        assert int(servers[small_memcached.address]["evictions"]) > 0
        assert 0 < measured["hits"] < measured["lookups"]
        assert visits.value(7) == 1000 + 33 and hits_counter.value() == 33, "kept: no loss"
        # Small keys outlive 10 KB values in memcached's LRU; evict the counters by hand:
        store = cache.mcache.store
        for key in (visits.key(7), visits._baseline_key(7), hits_counter.key):
            store.delete(key)
        assert visits.incr(7) == 1001, "an evicted view count reseeds from initial, never 0"
        assert hits_counter.incr() == 1, "an evicted counter restarts at 0 (README)"
        with cache.lock("nightly", timeout=5):  # a held lock still excludes others
            assert cache.lock("nightly", timeout=5).acquire() is False

        cache.mcache.counts.flush()  # as the site's processes do every stats_interval
        out = io.StringIO()
        call_command("mcache_stats", "--json", stdout=out)
        reported = json.loads(out.getvalue())["cache"]
        assert reported["hit_ratio"] == pytest.approx(
            measured["hits"] / measured["lookups"], abs=0.002
        ), "the command reports the ratio the callers saw"
        assert reported["hits"] + reported["misses"] == measured["lookups"]
        visits.push()  # now, while its server runs: not at exit, after the fixture killed it
