"""A reader whose stale claim finds the entry rewritten since its read serves the newer
entry if it is fresh, not the one it read (guarantee 2 of docs/explanation/consistency.md:
a stale value only while it is rebuilt).

Found by the simulation (seed 184336354820, on the meta protocol): a reader found an entry
stale by a bumped tag, which the server cannot see, and went to mark it stale and bid for
its rebuild (``md … I C<cas>``, then ``mg``). Its reply came late; meanwhile another process
had rebuilt the entry. The mark failed on the changed cas, and the ``mg`` after it found the
new entry, unleased and unmarked, so nothing was leased to the reader, and it served the
old value stale, with nobody rebuilding it, while a fresh entry was in the store. Now a
claim that finds the entry rewritten has the key read again first.

Two caches on one real memcached stand for two processes; the store of the reader's
rewrites the entry through the other cache just before its claim, the moment the
simulation's late reply gave the other process.
"""

from __future__ import annotations

from collections.abc import Callable

from mcache import Cache
from mcache.contract.store import LeaseBid
from mcache.engine.build import STALE_SERVED
from mcache.stores.memcached.store import MemcachedStore

OPTIONS = {"ttl": 60, "stale_ttl": 30}


class RewrittenBeforeItsClaim(MemcachedStore):
    """memcached, where another process rewrites the entry just before this one's first
    stale claim reaches the server."""

    rewrite: Callable[[], object] | None = None

    def claim_stale(self, key: str, token: int, bid: LeaseBid) -> None:
        rewrite, self.rewrite = self.rewrite, None
        if rewrite is not None:
            rewrite()
        super().claim_stale(key, token, bid)


def test_a_stale_claim_that_finds_the_entry_rebuilt_serves_the_new_entry(
    memcached_url: str,
) -> None:
    other = Cache(memcached_url, namespace="rewritten")
    store = RewrittenBeforeItsClaim([memcached_url.removeprefix("memcached://")], protocol="meta")
    reader = Cache(store, namespace="rewritten")
    assert other.get_or_build("k", lambda: "old", tags=["t"], **OPTIONS) == "old"
    other.invalidate("t")  # stale by its tag: the server does not know it

    store.rewrite = lambda: other.get_or_build("k", lambda: "rebuilt", tags=["t"], **OPTIONS)
    STALE_SERVED.set(False)  # a request's flag, which an earlier test's call may have set
    value = reader.get_or_build("k", lambda: "the reader's build", tags=["t"], **OPTIONS)

    assert store.rewrite is None, "the reader's read did not lead it to a stale claim"
    assert (value, STALE_SERVED.get()) == ("rebuilt", False), (
        "the reader served the entry it had read stale, though it had been rebuilt"
    )
    assert other.get_or_build("k", lambda: "built again", tags=["t"], **OPTIONS) == "rebuilt"
