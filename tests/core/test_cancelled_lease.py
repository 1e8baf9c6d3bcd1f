"""An async caller cancelled while its read wins the server's lease gives the lease back
(rule 4 of docs/explanation/consistency.md: a lock lives as long as its build).

On the meta protocol the read itself wins the rebuild (``mg … N``: a placeholder, leased
to this reader), as the text protocol's ``add`` wins a lock. A caller cancelled once the
server leased it the key, before the answer reached it, builds nothing; unless the lease
goes back, every other reader is told that someone builds (``Z``) until the placeholder
expires, a whole ``lock_timeout``. The text protocol's lock attempt already gives back
what a cancelled caller won; the lease's read now does the same.
"""

from __future__ import annotations

import asyncio

from mcache import Cache
from mcache.contract.store import LeaseBid
from mcache.engine.call import Call
from mcache.sansio.steps import perform, run_steps
from tests.memcached_proxy import MemcachedProxy, upstream_of


def test_a_cancelled_caller_gives_back_the_lease_its_read_won(memcached_url: str) -> None:
    with MemcachedProxy(upstream_of(memcached_url)) as proxy:
        slow = Cache(f"memcached://{proxy.address}", namespace="cancel-lease")
        other = Cache(memcached_url, namespace="cancel-lease")
        key = slow.key("page")

        async def cancelled_in_its_read() -> None:
            await slow.aget("warm")  # connected, and its protocol known
            proxy.reply_delay = 0.3  # the server answers at once; the answer comes late
            task = asyncio.ensure_future(
                slow.aget_or_build("page", lambda: "never", ttl=60, lock_timeout=30)
            )
            await asyncio.sleep(0.15)  # the mg has reached the server, which leased the miss
            task.cancel()
            await asyncio.sleep(0.8)  # the shielded read ends, and what it won goes back
            proxy.reply_delay = 0.0

        asyncio.run(cancelled_in_its_read())
        bid = LeaseBid(lease_ttl=30, early_ttl=0)
        other.store.get_many_leasing([key], bid)
        assert bid.outcome is True, "the lease is free: the next reader wins the rebuild"


def test_a_lease_won_on_a_miss_and_let_go_takes_its_placeholder_away(memcached_url: str) -> None:
    # A caller cancelled once its lock attempt won the lease (its answer came, the build
    # had not begun) lets go of what it won; on a miss that is the server's placeholder.
    cache = Cache(memcached_url, namespace="let-go-lease")
    other = Cache(memcached_url, namespace="let-go-lease")
    key = cache.key("page")
    call = Call(key, lambda: "never", [], cache.call_options(lock_timeout=30), {})
    call.claim = LeaseBid(lease_ttl=31, early_ttl=0)
    writer = cache.builder.writer
    lease = run_steps(writer.try_lock_steps(call), perform)
    assert lease is not None, "the miss was leased to this caller"
    run_steps(writer.let_go(key, lease, None), perform)
    bid = LeaseBid(lease_ttl=30, early_ttl=0)
    other.store.get_many_leasing([key], bid)
    assert bid.outcome is True, "the placeholder went with the lease: the next reader wins"
