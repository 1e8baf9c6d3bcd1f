"""A server of a test module's own, started for its fixtures and killed after them."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from tests.conftest import _missing
from tests.servers import ServerProcess

PACKAGES = {"memcached": "memcached", "redis-server": "redis-server"}


def running(server: ServerProcess) -> Iterator[ServerProcess]:
    """Start ``server`` (skipped, or failed under MCACHE_REQUIRE_SERVERS=1, when its binary
    is missing), yield it, then kill it."""
    if shutil.which(server.binary) is None:
        _missing(server.name, PACKAGES[server.name])
    server.start()
    yield server
    server.kill()
