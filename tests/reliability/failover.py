"""A Redis primary SIGKILLed under load: what every failover test drives and measures.

Eight threads ask for the Django page, the Flask page and a ``get_or_build``
entry for five seconds; the primary dies one second in. Meanwhile a probe
writes and reads back a key the dead primary served, every 20 ms, and notes
when that first works again: the time from the kill to the first cache hit
after promotion.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mcache import Cache
from tests.redis_groups import HitsAgain
from tests.reliability import site
from tests.reliability.test_server_faults import Outcome, drive, fetchers, wrong

FAST = "socket_timeout=0.3&socket_connect_timeout=0.2"
KILL_AT = 1.0
LOAD_SECONDS = 5.0


@dataclass
class Failover:
    """What the load saw: every outcome, and when the killed primary's keys hit again."""

    outcomes: list[Outcome]
    hits_again_after: float | None  # seconds from the kill; None: not within the wait


def builder_cache(url: str) -> Cache:
    """The cache of the load's ``get_or_build`` entry, keyed ``"catalog"``."""
    return Cache(url, namespace="rel-gob")


def builder_fetch(url: str) -> Callable[[], tuple[int, bytes]]:
    """A ``get_or_build`` of the catalog, answered as a page would be."""
    cache = builder_cache(url)

    def fetch() -> tuple[int, bytes]:
        value = cache.get_or_build("catalog", lambda: site.render_catalog("core"), ttl=1)
        return 200, value.encode()

    return fetch


def kill_under_load(url: str, kill: Callable[[], None], probe_key: str, wait: float = 30.0):
    """Kill the primary ``KILL_AT`` s into ``LOAD_SECONDS`` of load; return a :class:`Failover`."""
    django, flask = fetchers(url)
    fetches = [django, flask, builder_fetch(url)]
    drive(fetches, 0.3, threads=2)  # cached before the crash
    killed = threading.Event()
    probe = HitsAgain(url, probe_key, killed)

    def kill_now() -> None:
        kill()
        killed.set()

    killer = threading.Timer(KILL_AT, kill_now)
    killer.start()
    probe.start()
    outcomes = drive(fetches, LOAD_SECONDS, threads=8)
    killer.join()
    probe.join(wait)
    return Failover(outcomes, probe.hits_again_after)


def assert_a_non_event(seen: Failover, records: list[logging.LogRecord]) -> None:
    """Every answer is the page, none waited on the dead server, the logs stayed short,
    and the killed primary's keys hit again once its replica took over."""
    assert len(seen.outcomes) > 100
    assert wrong(seen.outcomes, "v1") == [], "every response is the page, none an error"
    assert max(took for took, _, _ in seen.outcomes) < 2.0, "no request waits on the dead server"
    warnings = [r for r in records if r.name.startswith("mcache")]
    assert 0 < len(warnings) <= 15, f"{len(warnings)} warnings for {len(seen.outcomes)} requests"
    assert seen.hits_again_after is not None, "the dead primary's keys never hit again"


def assert_cached_again(url: str) -> None:
    """What was cached during the failover goes stale, then the pages cache again."""
    time.sleep(1.1)
    django, flask = fetchers(url)
    renders_before = len(site.renders)
    drive([django, flask, builder_fetch(url)], 0.5, threads=2)
    caching = len(site.renders) - renders_before
    assert caching <= 6, f"{caching} renders after the failover: the cache is in use again"
