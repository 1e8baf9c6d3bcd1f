"""Test-suite wiring: real servers, started by the suite itself.

Three memcached nodes, one redis-server and one PostgreSQL (a throwaway
cluster made by ``initdb``) start once per session on free loopback ports and
are flushed before each test that uses them. Where a binary
is missing the tests that need it are skipped with a message, unless
``MCACHE_REQUIRE_SERVERS=1`` (CI sets it): then a missing server is a failure.
At its end a session (each xdist worker's) fails if a server it started, by any
route, is still running (:mod:`tests.stray_servers`), and stops it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.redis_groups import ClusterGroup, SentinelGroup
from tests.servers import (
    ServerProcess,
    memcached_process,
    postgres_bindir,
    postgres_process,
    redis_process,
)
from tests.stray_servers import MARK, left_running, mark_session, stop

REQUIRE_SERVERS = os.environ.get("MCACHE_REQUIRE_SERVERS", "") not in {"", "0", "false", "no"}
MEMCACHED_NODES = 3
NEAR_MODE = os.environ.get("MCACHE_TEST_NEAR_TTL", "")
"""Set by tests/test_near_mode.py: the suites it names run again with every cache built
with this ``near_ttl`` unless the test gives one (the near cache on, everywhere)."""


def pytest_configure(config: pytest.Config) -> None:
    """Mark this session's environment: every server it starts inherits the mark."""
    mark_session()


@pytest.fixture(scope="session", autouse=True)
def no_server_left_running() -> Iterator[None]:
    """Fail the session's last test if a server the session started outlives its teardown.

    Autouse: set up before the session fixtures that start servers, so torn down after them.
    """
    mark = os.environ[MARK]
    yield
    left = left_running(mark, grace=5.0)
    if left:
        stop(set(left))
        worker = (
            f" (xdist worker {os.environ['PYTEST_XDIST_WORKER']})"
            if "PYTEST_XDIST_WORKER" in os.environ
            else ""
        )
        listed = "\n".join(f"  pid {pid}: {command}" for pid, command in sorted(left.items()))
        pytest.fail(
            f"servers this test session{worker} started were still running after its"
            f" teardown (stopped now):\n{listed}",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def near_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """In near mode, make ``near_ttl`` every ``Cache``'s default for this test."""
    if NEAR_MODE:
        from mcache import Cache

        defaults = {**Cache.__init__.__kwdefaults__, "near_ttl": float(NEAR_MODE)}
        monkeypatch.setattr(Cache.__init__, "__kwdefaults__", defaults)


def _missing(binary: str, package: str) -> None:
    message = (
        f"{binary} is not installed (apt-get install {package} / brew install {package});"
        " the tests start their own server when it is"
    )
    if REQUIRE_SERVERS:
        pytest.fail(f"MCACHE_REQUIRE_SERVERS=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def memcached_nodes() -> Iterator[list[ServerProcess]]:
    """Start three memcached processes for the whole session."""
    if shutil.which("memcached") is None:
        _missing("memcached", "memcached")
    nodes = [memcached_process().start() for _ in range(MEMCACHED_NODES)]
    yield nodes
    for node in nodes:
        node.kill()


@pytest.fixture(scope="session")
def redis_node() -> Iterator[ServerProcess]:
    """Start one redis-server for the whole session."""
    if shutil.which("redis-server") is None:
        _missing("redis-server", "redis-server")
    node = redis_process().start()
    yield node
    node.kill()


def _flush_memcached(nodes: list[ServerProcess]) -> None:
    from pymemcache.client.base import Client

    for node in nodes:
        if node.process is None or node.process.poll() is not None:
            node.restart()
        client = Client(("127.0.0.1", node.port), connect_timeout=2, timeout=2)
        client.flush_all(noreply=False)
        client.close()


@pytest.fixture
def trio(memcached_nodes) -> Iterator[list[ServerProcess]]:
    """Three memcached of the test's own, so killing one disturbs nobody."""
    nodes = [memcached_process().start() for _ in range(3)]
    yield nodes
    for node in nodes:
        node.kill()


@pytest.fixture
def memcached_url(memcached_nodes: list[ServerProcess]) -> str:
    """Return the URL of one flushed memcached node."""
    _flush_memcached(memcached_nodes)
    return f"memcached://{memcached_nodes[0].address}"


@pytest.fixture
def memcached_cluster_url(memcached_nodes: list[ServerProcess]) -> str:
    """Return the URL of all three flushed memcached nodes."""
    _flush_memcached(memcached_nodes)
    return "memcached://" + ",".join(node.address for node in memcached_nodes)


@pytest.fixture
def memcached_text_url(memcached_url: str) -> str:
    """One flushed memcached node, spoken to in the text protocol (the default is meta)."""
    return memcached_url + "?protocol=text"


@pytest.fixture
def memcached_cluster_text_url(memcached_cluster_url: str) -> str:
    """The three flushed memcached nodes, spoken to in the text protocol."""
    return memcached_cluster_url + "?protocol=text"


@pytest.fixture(scope="session")
def sentinel_group() -> Iterator[SentinelGroup]:
    """A Redis primary, its replica and three sentinels, for the whole session."""
    if shutil.which("redis-server") is None:
        _missing("redis-server", "redis-server")
    with SentinelGroup() as group:
        yield group


@pytest.fixture
def sentinel_url(sentinel_group: SentinelGroup) -> str:
    """Return the ``redis+sentinel://`` URL of the group's database 0, flushed."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=sentinel_group.primary_port())
    client.flushall()
    client.close()
    return sentinel_group.url()


@pytest.fixture(scope="session")
def cluster_group() -> Iterator[ClusterGroup]:
    """A Redis Cluster of three primaries with a replica each, for the whole session."""
    for binary in ("redis-server", "redis-cli"):
        if shutil.which(binary) is None:
            _missing(binary, "redis-server")
    with ClusterGroup() as group:
        yield group


@pytest.fixture
def cluster_url(cluster_group: ClusterGroup) -> str:
    """Return the ``redis+cluster://`` URL of the session's cluster, flushed."""
    cluster_group.flush()
    return cluster_group.url()


@pytest.fixture
def redis_url(redis_node: ServerProcess) -> str:
    """Return the URL of database 0 of the flushed redis-server."""
    import redis

    if redis_node.process is None or redis_node.process.poll() is not None:
        redis_node.restart()
    client = redis.Redis(host="127.0.0.1", port=redis_node.port)
    client.flushall()
    client.close()
    return f"redis://{redis_node.address}/0"


@pytest.fixture(scope="session")
def postgres_node() -> Iterator[ServerProcess]:
    """Start one PostgreSQL server (its own cluster) for the whole session."""
    bindir = postgres_bindir()
    if bindir is None:
        _missing("initdb", "postgresql")
    node = postgres_process(bindir).start(timeout=30)
    yield node
    node.kill()
    shutil.rmtree(node.datadir, ignore_errors=True)  # type: ignore[attr-defined]


def wait_for_postgres(url: str, timeout: float = 30.0) -> None:
    """Wait until PostgreSQL accepts a session (it answers the port while starting up)."""
    import time

    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, autocommit=True).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture
def postgres_url(postgres_node: ServerProcess) -> str:
    """Return the URL of the session's PostgreSQL database, every mcache table dropped."""
    import psycopg

    if postgres_node.process is None or postgres_node.process.poll() is not None:
        postgres_node.restart()
    url = f"postgresql://postgres@{postgres_node.address}/postgres"
    wait_for_postgres(url)
    with psycopg.connect(url, autocommit=True) as connection:
        tables = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename LIKE 'mcache%%'"
        ).fetchall()
        for (table,) in tables:
            connection.execute(f"DROP TABLE {table}")
    return url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """Return the URL of an SQLite file of the test's own."""
    return f"sqlite:///{tmp_path}/cache.db"
