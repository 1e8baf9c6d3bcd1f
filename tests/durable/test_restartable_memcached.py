"""memcached 1.6's own restartable mode (``-e`` memory file) as a ``memcached://`` store.

The nearest thing to a persistent memcached-protocol server that Debian packages (it has
no MemcacheDB): memcached keeps its items in a file it maps, writes what it needs to
find them again when stopped with SIGUSR1, and starts with them from the same file. The
store contract holds on it as on any memcached; a graceful restart keeps entries, tag
versions, counters and the time their TTLs have left; a crash keeps nothing
(``docs/how-to/durable-tier.md`` says which to use for what).
"""

from __future__ import annotations

import functools
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcache import NO_VALUE, Cache, Codec
from mcache.stores import from_url
from mcache.testing import StoreContract
from tests.servers import ServerProcess, memcached_process

CODEC = Codec(signing_key=b"a secret the site's processes share")


@pytest.fixture(scope="module")
def restartable(
    memcached_nodes: list[ServerProcess], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A memcached of this module's own, its items in a memory file on disk
    (``memcached_nodes``: skipped, or failed under ``MCACHE_REQUIRE_SERVERS=1``, as they are,
    when memcached is missing)."""
    memory_file = tmp_path_factory.mktemp("restartable") / "memcached.memory"
    node = memcached_process(options=("-e", str(memory_file))).start()
    yield node
    node.kill()


@pytest.fixture
def restartable_url(restartable: ServerProcess) -> str:
    """The restartable memcached, running and flushed."""
    if restartable.process is None or restartable.process.poll() is not None:
        restartable.restart()
    store = from_url(f"memcached://{restartable.address}")
    store.flush()
    store.close()
    return f"memcached://{restartable.address}"


def stop_and_start(node: ServerProcess, sig: int = signal.SIGUSR1) -> None:
    """Stop the server with ``sig`` and start it again on the same port and file.

    memcached takes a warm restart only once its clock has moved past the second it
    stopped in (it checks that time went forward), so the start waits for that.
    """
    node.kill(sig)
    time.sleep(1.1)
    node.restart()


def warm(node: ServerProcess) -> bool:
    """Whether the server's last start took its items back from the memory file."""
    node._log.seek(0)
    log = node._log.read().decode(errors="replace")
    starts = log.split("Gracefully stopping")
    return "starting with a clean cache" not in starts[-1]


class TestRestartableMemcached(StoreContract):
    """memcached with ``-e``: memcached's semantics, the contract passed as by any."""

    @pytest.fixture
    def store(self, restartable_url: str):
        store = from_url(restartable_url)
        yield store
        store.close()

    @pytest.fixture
    def store_factory(self, restartable_url: str):
        return functools.partial(from_url, restartable_url)


def test_a_graceful_restart_keeps_entries_tags_counters_and_their_ttls(
    restartable: ServerProcess, restartable_url: str
) -> None:
    cache = Cache(restartable_url, namespace="warm", codec=CODEC)
    builds: list[str] = []

    def report() -> str:
        builds.append("report")
        return "a 4-second report"

    assert cache.get_or_build("report", report, ttl=600, tags=["org:1"]) == "a 4-second report"
    cache.set("short", "gone in 4 s", ttl=4)
    assert cache.counter("views").incr(5) == 5
    stop_and_start(restartable)
    assert warm(restartable)
    again = Cache(restartable_url, namespace="warm", codec=CODEC)
    assert again.get_or_build("report", report, ttl=600, tags=["org:1"]) == "a 4-second report"
    assert builds == ["report"], "the entry and its tag's version came back: no rebuild"
    assert again.counter("views").incr() == 6
    assert again.get("short") == "gone in 4 s"
    time.sleep(3.2)  # its 4 s counted the time the server was stopped
    assert again.get("short") is NO_VALUE
    again.invalidate("org:1")
    assert again.get_or_build("report", lambda: "rebuilt", ttl=600, tags=["org:1"]) == "rebuilt"


def test_a_crash_keeps_nothing(restartable: ServerProcess, restartable_url: str) -> None:
    """Only a stop that memcached sees (SIGUSR1) saves what finds the items again."""
    cache = Cache(restartable_url, namespace="crash", codec=CODEC)
    cache.set("page", "cached", ttl=0)
    stop_and_start(restartable, signal.SIGKILL)
    assert not warm(restartable)
    assert Cache(restartable_url, namespace="crash", codec=CODEC).get("page") is NO_VALUE


def test_extstore_on_disk_is_no_warm_restart(
    memcached_nodes: list[ServerProcess], tmp_path: Path
) -> None:
    """memcached's external storage keeps values on disk but their index in memory, and
    refuses a warm restart beside it: with it on, a restart keeps nothing either."""
    node = memcached_process(
        options=("-e", str(tmp_path / "memory"), "-o", f"ext_path={tmp_path / 'ext'}:64m")
    ).start()
    try:
        url = f"memcached://{node.address}"
        Cache(url, namespace="ext", codec=CODEC).set("page", "cached", ttl=0)
        stop_and_start(node)
        assert Cache(url, namespace="ext", codec=CODEC).get("page") is NO_VALUE
    finally:
        node.kill()
