"""A Redis of their own for the reliability tests (they kill it), and a fresh catalog."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability import site
from tests.servers import ServerProcess, redis_process


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
