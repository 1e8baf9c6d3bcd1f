"""A build that stored nothing gives a stale entry back its own life, and no renewal of its
lock keeps the entry alive after that (guarantee 2 of docs/explanation/consistency.md: a
stale value is served for at most ``ttl + stale_ttl``).

Found by the simulation (tests/sim, seed 1154): after a failed rebuild, the build's
settling gave the stale entry back the life it had of its own, and only then stopped the
lock's renewal; a renewal falling due in between ran the entry's keep-alive, which gave it
two lock timeouts again. The renewal now stops first. Here the settling's steps are driven
one request at a time against a real server: no request is sent while the renewer still
holds the lock (its thread may renew it at any moment, the gap between two requests
included), and after each one a renewal runs if the renewer holds the lock, as its thread
would at that moment.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
import redis

from mcache import Cache
from mcache.engine.write_lease import Lease
from mcache.sansio.steps import perform, run_steps

OWN_LIFE = 3
"""The seconds the stale entry had left of its own life when its rebuild began."""


def seconds_left(url: str, key: str) -> int:
    """The key's remaining time to live, as the server reports it."""
    address = urlsplit(url)
    if address.scheme.startswith("redis"):
        return int(redis.Redis(address.hostname or "", address.port or 6379).ttl(key))
    with socket.create_connection((address.hostname, address.port), timeout=5) as conn:
        conn.sendall(f"mg {key} t\r\n".encode())
        reply = conn.recv(256).decode()
    assert reply.startswith("HD"), f"the entry is gone: {reply!r}"
    return int(reply.split()[1][1:])


@pytest.mark.parametrize("server", ["memcached_text_url", "redis_url"])
def test_no_keep_alive_after_a_failed_rebuild_gives_the_entry_back(
    request: pytest.FixtureRequest, server: str
) -> None:
    url = request.getfixturevalue(server)
    cache = Cache(url, namespace="settled", lock_timeout=10)
    store, key = cache.store, "settled:entry"
    store.set(key, b"stale value", 60)
    _, token = store.gets(key)
    writer = cache.builder.writer
    renewer = cache.builder.parts.renewer
    lock = cache.lock("settled", timeout=10)
    assert lock.try_acquire()
    renewer.hold(lock)
    now = cache.clock.monotonic()
    lease = Lease(b"stale value", token, False, b"stale value", now + OWN_LIFE)
    assert run_steps(writer.keep_lease_steps(key, lease, lock), perform), "kept for the build"
    assert seconds_left(url, key) > 2 * OWN_LIFE
    lease.expires = cache.clock.monotonic() + 1  # a renewal later: its keep-alive is due

    def renewal() -> None:
        if renewer.holds(lock):  # the renewer's thread renews only what it still holds
            run_steps(writer.keep_lease_steps(key, lease, lock), perform)

    settle = writer.settle_steps(key, lease, lock)
    try:
        operation = next(settle)
        while True:
            assert not renewer.holds(lock), f"{operation} sent while the lock is still renewed"
            result = perform(operation)
            renewal()
            operation = settle.send(result)
    except StopIteration:
        pass
    renewer.drop(lock)
    assert seconds_left(url, key) <= OWN_LIFE, "a renewal kept the stale entry past its life"
