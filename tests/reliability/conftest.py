"""Servers of their own for the reliability tests: they kill and restart them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability import site
from tests.servers import ServerProcess, memcached_process, redis_process


@pytest.fixture
def trio(memcached_nodes) -> Iterator[list[ServerProcess]]:
    """Three memcached of this test's own (``memcached_nodes`` checks the binary is there)."""
    nodes = [memcached_process().start() for _ in range(3)]
    yield nodes
    for node in nodes:
        node.kill()


@pytest.fixture
def own_redis(redis_node) -> Iterator[ServerProcess]:
    """A redis-server of this test's own (``redis_node`` checks the binary is there)."""
    node = redis_process().start()
    yield node
    node.kill()


@pytest.fixture(autouse=True)
def fresh_catalog() -> Iterator[None]:
    site.CATALOG.update(version="v1", fail=False, sleep=0.0, size=0)
    site.renders.clear()
    yield
    site.CATALOG.update(version="v1", fail=False, sleep=0.0, size=0)
