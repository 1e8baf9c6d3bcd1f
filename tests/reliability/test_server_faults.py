"""Pages stay up through server faults: a memcached killed under load, all down, Redis restarted.

Every response is a 200 with the right page, whatever the servers do; what the
design keeps (replicated sessions) survives; a server that comes back rejoins
without serving old values; failures are logged once per interval, and no
request waits on a dead server longer than the configured timeouts.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.core.cache import caches
from django.test import Client, override_settings

from tests.reliability import site
from tests.servers import ServerProcess, free_port

FAST = "connect_timeout=0.2&timeout=0.3&dead_timeout=1&retry_attempts=1"
Fetch = Callable[[], tuple[int, bytes]]


def django_settings(url: str, prefix: str = "rel", **options: object) -> dict:
    """Settings for the Django half of the site on ``url``."""
    return {
        "CACHES": {
            "default": {
                "BACKEND": "django_mcache.backend.MCacheBackend",
                "LOCATION": url,
                "KEY_PREFIX": prefix,
                "OPTIONS": options,
            }
        },
        "ROOT_URLCONF": "tests.reliability.site",
        "SESSION_ENGINE": "django_mcache.sessions",
        "MCACHE_SESSION_REPLICAS": 2,
    }


def fetchers(url: str, page: str = "/catalog/") -> tuple[Fetch, Fetch]:
    """A Django and a Flask GET of ``page``; each thread builds its own clients."""
    app = site.flask_app(url)
    local = threading.local()

    def django() -> tuple[int, bytes]:
        client = local.__dict__.setdefault("django", Client())
        response = client.get(page)
        return response.status_code, response.content

    def flask() -> tuple[int, bytes]:
        client = local.__dict__.setdefault("flask", app.test_client())
        response = client.get(page)
        return response.status_code, response.data

    return django, flask


Outcome = tuple[float, int, bytes]


def drive(
    fetches: list[Fetch], seconds: float, threads: int = 8, by_thread: dict | None = None
) -> list[Outcome]:
    """Call the fetches round-robin from ``threads`` threads for ``seconds``; every outcome.

    ``by_thread``, when given, receives each thread's answers from each fetch, in order.
    """
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + seconds

    def loop(offset: int) -> None:
        n = offset
        while time.monotonic() < deadline:
            which = n % len(fetches)
            fetch = fetches[which]
            n += 1
            started = time.monotonic()
            try:
                status, body = fetch()
            except Exception as error:  # an error page, as a user would see it
                status, body = 500, repr(error).encode()
            outcomes.append((time.monotonic() - started, status, body))
            if by_thread is not None:
                by_thread.setdefault((offset, which), []).append(body)

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return outcomes


def wrong(outcomes: list[tuple[float, int, bytes]], *versions: str) -> list[tuple[int, bytes]]:
    allowed = {f"catalog {v}".encode() for v in versions}

    return [
        (status, body[:80])
        for _, status, body in outcomes
        if (status, body) not in {(200, a) for a in allowed}
    ]


def page_owner(nodes: list[ServerProcess]) -> ServerProcess:
    """The node holding the most cached pages (found with ``lru_crawler metadump``)."""
    from tests.reliability.test_corrupt_entries import stored_keys

    return max(nodes, key=lambda n: sum(":view." in k for k in stored_keys(n.address)))


@pytest.mark.django_db
def test_one_memcached_killed_under_load_costs_no_error_and_no_session(trio) -> None:
    url = "memcached://" + ",".join(n.address for n in trio) + "?" + FAST
    with override_settings(**django_settings(url)):
        from django_mcache.sessions import SessionStore

        sessions = []
        for i in range(30):
            session = SessionStore()
            session["user"] = i
            session.save()
            sessions.append(session.session_key)
        django, flask = fetchers(url)
        long_pages = fetchers(url, "/catalog-long/")
        drive([django, flask, *long_pages], 0.3)  # every page cached somewhere
        victim = page_owner(trio)
        killer = threading.Timer(1.5, victim.kill)
        killer.start()
        outcomes = drive([django, flask], 5.0)
        killer.join()
        assert len(outcomes) > 100
        assert wrong(outcomes, "v1") == [], "every response is the page, none an error"
        lost = [k for i, k in enumerate(sessions) if SessionStore(k).load().get("user") != i]
        assert lost == [], "a replicated session survives its server"

        site.CATALOG["version"] = "v2"  # changed while the server is away …
        caches["default"].invalidate("catalog")
        flask_app = site.flask_app(url)
        with flask_app.app_context():
            flask_app.extensions["mcache"].invalidate("catalog")
        victim.restart()  # … and it comes back, empty
        time.sleep(1.2)  # past dead_timeout: the next call to it probes and rejoins it
        seen: dict[tuple[int, int], list[bytes]] = {}
        # 300 s pages: only the bump can make them v2 now, not their ttl
        after = drive(list(long_pages), 1.5, by_thread=seen)
        assert wrong(after, "v1", "v2") == []
        for bodies in seen.values():
            first_new = bodies.index(b"catalog v2")
            assert b"catalog v1" not in bodies[first_new:], "an old page after the new one"
            assert bodies[-1] == b"catalog v2"
        store = caches["default"].mcache.store
        store.get_many([f"probe:{i}" for i in range(200)])  # traffic to every server's keys
        assert store.dead_servers() == [], "traffic brought the restarted server back"
        assert int(store.stats()[victim.address]["cmd_get"]) > 0, "and it serves reads again"


class SilentServer:
    """A TCP port that accepts connections and never answers: a hung memcached."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(64)
        self.address = f"127.0.0.1:{self.socket.getsockname()[1]}"

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def dead_pool() -> Iterator[str]:
    """A pool of one refusing port and one hung server."""
    silent = SilentServer()
    yield f"memcached://127.0.0.1:{free_port()},{silent.address}?{FAST}"
    silent.close()


@pytest.mark.django_db
def test_every_memcached_down_pages_render_log_once_and_never_hang(dead_pool, caplog) -> None:
    budget = 3 * (0.2 + 0.3) + 1.0  # every try of one call times out, plus slack
    with override_settings(**django_settings(dead_pool)), caplog.at_level(logging.WARNING):
        django, flask = fetchers(dead_pool)
        outcomes = drive([django, flask], 3.0, threads=4)
    assert len(outcomes) > 40
    assert wrong(outcomes, "v1") == []
    assert max(took for took, _, _ in outcomes) < budget, "no request waits past the timeouts"
    warnings = [r for r in caplog.records if r.name.startswith("mcache")]
    assert 0 < len(warnings) <= 12, f"{len(warnings)} warnings for {len(outcomes)} requests"
    assert site.renders.count("django") + site.renders.count("flask") == len(outcomes)


@pytest.mark.django_db
def test_a_page_rendered_with_the_store_down_says_so() -> None:
    """A store that is down is no hit and no bypass: MISS, with the reason store-down."""
    url = f"memcached://127.0.0.1:{free_port()}?{FAST}"
    with override_settings(**django_settings(url)):
        pages = [Client().get("/catalog/") for _ in range(2)]
        flask_pages = [site.flask_app(url).test_client().get("/catalog/") for _ in range(2)]
    for headers in [*(p.headers for p in pages), *(p.headers for p in flask_pages)]:
        assert (headers["X-Cache"], headers["X-Cache-Reason"]) == ("MISS", "store-down")
        assert headers["Cache-Status"] == "mcache; fwd=uri-miss; detail=store-down"
    assert [p.status_code for p in [*pages, *flask_pages]] == [200] * 4


@pytest.mark.django_db
def test_redis_stopped_and_restarted_mid_run(own_redis: ServerProcess, caplog) -> None:
    url = f"redis://{own_redis.address}/0?socket_timeout=0.3&socket_connect_timeout=0.2"
    with override_settings(**django_settings(url)), caplog.at_level(logging.WARNING):
        django, flask = fetchers(url)
        stopper = threading.Timer(1.0, own_redis.kill)
        starter = threading.Timer(2.5, own_redis.restart)
        stopper.start()
        starter.start()
        outcomes = drive([django, flask], 4.0, threads=4)
        stopper.join()
        starter.join()
        assert wrong(outcomes, "v1") == []
        assert max(took for took, _, _ in outcomes) < 2.0, "no request waits on the dead server"
        warnings = [r for r in caplog.records if r.name.startswith("mcache")]
        assert len(warnings) <= 12, f"{len(warnings)} warnings for {len(outcomes)} requests"
        renders_before = len(site.renders)
        time.sleep(1.1)  # the entries written since the restart go stale, then cache again
        drive([django, flask], 0.5, threads=2)
        caching = len(site.renders) - renders_before
        assert caching <= 4, f"{caching} renders after the restart: the cache is back in use"
