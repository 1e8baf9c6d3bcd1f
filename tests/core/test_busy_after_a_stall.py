"""What a read learned of a key's lock is as old as the read: a process that acts on it
late (stopped, or its reply slow to come) does not trust it longer for that.

Found by the simulation (tests/sim, on the meta protocol): a process paused for
seconds resumed with the answers its reads had got before the pause ("another reader
holds the lease") and, taking them as news, let its readers serve the key stale without
asking for the next quarter second; meanwhile the holder had finished and the key had
been invalidated again, so a reader was served stale with nobody rebuilding it
(guarantee 2 of docs/explanation/consistency.md). Here a proxy holds back the reply of
one read for 0.6 s, standing for the pause.
"""

from __future__ import annotations

import threading

from mcache import Cache
from mcache.engine.build import STALE_SERVED
from tests.held_builds import hold_build
from tests.memcached_proxy import MemcachedProxy, upstream_of

OPTIONS = {"ttl": 60, "stale_ttl": 60, "stale_wait": 0, "refresh": "sync"}


def test_a_late_answer_does_not_keep_readers_off_the_lock(memcached_url: str) -> None:
    with MemcachedProxy(upstream_of(memcached_url)) as proxy:
        holder = Cache(memcached_url, namespace="late-answer")
        late = Cache(f"memcached://{proxy.address}", namespace="late-answer")
        holder.clear()
        late.get_or_build("warm", lambda: "up", **OPTIONS)  # connected, the protocol known
        assert holder.get_or_build("k", lambda: "v0", tags=["t"], **OPTIONS) == "v0"
        holder.invalidate("t")
        held = hold_build(holder, "k", "v1", ["t"], OPTIONS)
        proxy.reply_delay = 0.6
        threading.Timer(0.3, lambda: setattr(proxy, "reply_delay", 0.0)).start()
        # its read is answered "another reader holds the lease", 0.6 s late
        assert late.get_or_build("k", lambda: "never", tags=["t"], **OPTIONS) == "v0"
        held.let_go()
        holder.invalidate("t")  # stale again, and nobody rebuilds it now
        STALE_SERVED.set(False)  # (the first read's answer was stale: a request of its own)
        value = late.get_or_build("k", lambda: "v2", tags=["t"], **OPTIONS)
        assert (value, STALE_SERVED.get()) == ("v2", False), (
            "the late answer kept this process's readers off the key's lease: served"
            " stale with nobody rebuilding it"
        )
