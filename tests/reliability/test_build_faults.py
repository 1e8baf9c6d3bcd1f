"""Builds that fail: a lock holder killed, a backend that raises or hangs past ``wait``.

Wherever there is a stale page it is served; where there is none the error
reaches the caller as it would without a cache; no lock is left behind.
"""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
from django.core.cache import caches
from django.test import Client, override_settings

from mcache import Cache
from mcache.engine.writing import BUSY_SECONDS
from tests.core import workers
from tests.reliability import site
from tests.reliability.test_server_faults import django_settings


@pytest.mark.parametrize("server", ["memcached", "memcached_text"])
def test_a_killed_lock_holder_costs_stale_answers_then_one_rebuild(
    request: pytest.FixtureRequest, server: str
) -> None:
    memcached_url = request.getfixturevalue(f"{server}_url")
    cache = Cache(memcached_url, namespace="kl", jitter=0)
    cache.get_or_build("job", lambda: "old", ttl=1, stale_ttl=60)
    time.sleep(1.1)  # stale now: the holder takes the lock to rebuild it, and dies
    context = multiprocessing.get_context("spawn")
    building = context.Event()  # killed while it builds, not between its win and its build
    holder = context.Process(
        target=workers.hold_lock_forever, args=(memcached_url, "kl", "job", 2, building)
    )
    holder.start()
    assert building.wait(30), "the holder never started its build"
    workers.wait_for_lock(cache, "job")
    deadline = time.monotonic() + 30
    holder.kill()
    holder.join()
    killed = time.monotonic()
    built: list[int] = []
    value = "old"
    while value == "old" and workers.build_lock_held(cache, "job"):  # until the lock expires
        value = cache.get_or_build("job", lambda: built.append(1) or "new", ttl=1)
        # On memcached's own lease the stale entry goes with the dead holder's lease: it
        # may expire between the check and the call, which then builds (once).
        assert value == "old" or workers.server_leases(cache), "stale meanwhile"
        assert time.monotonic() < deadline + 5
        time.sleep(0.05)
    assert time.monotonic() - killed < 2 + 1 + 0.5, "freed within its lock_timeout (+ slack)"
    # This process trusts a lock it found held for BUSY_SECONDS: then it rebuilds. (On
    # memcached's own lease the stale entry went with the lease: the next call builds.)
    expired = time.monotonic()
    while value == "old":
        value = cache.get_or_build("job", lambda: built.append(1) or "new", ttl=1)
        assert time.monotonic() - expired < BUSY_SECONDS + 0.2, "rebuilt once it expired"
        time.sleep(0.01)
    assert value == "new" and built == [1], "one rebuild"
    assert not workers.build_lock_held(cache, "job"), "and its own lock released"


def mcache_page(client: Client) -> tuple[int, str, str]:
    response = client.get("/catalog/")
    return response.status_code, response.content.decode(), response["X-Cache"]


def flask_page(client) -> tuple[int, str, str]:
    response = client.get("/catalog/")
    return response.status_code, response.data.decode(), response.headers.get("X-Cache", "")


@pytest.mark.django_db
@pytest.mark.parametrize("framework", ["django", "flask"])
def test_a_failing_backend_serves_stale_or_raises_and_leaves_no_lock(
    framework: str, memcached_url: str
) -> None:
    with override_settings(**django_settings(memcached_url)):
        if framework == "django":
            client, page, core = Client(), mcache_page, caches["default"].mcache
        else:
            app = site.flask_app(memcached_url, TESTING=True)  # errors propagate, as uncached
            client, page = app.test_client(), flask_page
            core = app.extensions["mcache"]
        assert page(client) == (200, "catalog v1", "MISS")
        site.CATALOG["fail"] = True
        time.sleep(1.1)  # the page is stale: its rebuild fails, the stale page is served
        assert page(client) == (200, "catalog v1", "STALE")
        core.invalidate("catalog")
        core.store.flush()  # no stale page left at all: the error is the caller's
        with pytest.raises(RuntimeError, match="the database is down"):
            page(client)
        waits = core.counts.local()["lock_waits"]
        site.CATALOG["fail"] = False
        assert page(client) == (200, "catalog v1", "MISS"), "built at once: no lock was left"
        assert core.counts.local()["lock_waits"] == waits


def wait_for_renders(count: int, timeout: float = 10) -> None:
    """Wait until the backend has been entered ``count`` times (a visitor holds the lock)."""
    deadline = time.monotonic() + timeout
    while len(site.renders) < count:
        assert time.monotonic() < deadline, "the first visitor never started building"
        time.sleep(0.01)


@pytest.mark.django_db
def test_a_backend_hanging_past_wait_costs_the_others_wait_seconds_not_the_hang(
    memcached_url: str,
) -> None:
    with override_settings(**django_settings(memcached_url, wait=0.3)):
        core = caches["default"].mcache
        site.CATALOG["sleep"] = 1.5
        first = threading.Thread(target=lambda: Client().get("/catalog/"))
        first.start()
        wait_for_renders(1)  # the first visitor holds the lock, building for 1.5 s
        site.CATALOG["sleep"] = 0.0
        timeouts = core.counts.local()["wait_timeouts"]
        status, body, state = mcache_page(Client())
        first.join()
        assert (status, body, state) == (200, "catalog v1", "MISS")
        assert core.counts.local()["wait_timeouts"] == timeouts + 1, "it waited, then built"
        assert site.renders.count("django") == 2
        time.sleep(1.1)  # stale now; a hung rebuild must not hold anyone up
        site.CATALOG["sleep"] = 1.5
        builder = threading.Thread(target=lambda: Client().get("/catalog/"))
        builder.start()
        wait_for_renders(3)  # the rebuild has started and hangs
        started = time.monotonic()
        assert mcache_page(Client())[1:] == ("catalog v1", "STALE")
        assert time.monotonic() - started < 1.0, "the stale page comes at once, not after 1.5 s"
        builder.join()
