"""Tag versions: invalidating a whole group of entries in O(1).

A tag is a key ``{ns}:t:{name}`` holding a version: a time in milliseconds that
only ever grows. An entry records the versions of its tags when its build
starts; it is valid only while each tag still has that version. Bumping a tag
therefore invalidates every entry that carries it, however many there are,
without finding or deleting any of them.

A bump moves a version to ``max(now, old + 1)``: it reads the old version, then
adds the difference with the store's atomic ``incr``. Two concurrent bumps both
land (each adds at least 1), the result is never behind the clock, and a clock
that runs late on one host cannot move a version backwards, so an invalidated
entry can never become valid again. A tag key the store lost (evicted, or the
server restarted) counts as changed now: it is recreated with the current time,
which differs from every version an entry recorded before.

``local_ttl`` enables a process-local copy of tag versions: reads within that
many seconds of the last fetch skip the tag keys, so a hit is one key's round
trip; in exchange a bump made by *another* process may go unseen here for up to
``local_ttl``. It is off by default; a bump made by this process updates its
copy at once.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Mapping

from .api import NO_VALUE, Store
from .clock import Clock
from .keys import MAX_KEY_BYTES, make_key
from .stores.base import stored_count

__all__ = ["Tags"]

_SAFE_NAME = re.compile(r"[!-~]{1,150}")


class Tags:
    """Versions of a namespace's tags in a (shared) store."""

    def __init__(self, store: Store, namespace: str, clock: Clock, local_ttl: float = 0.0) -> None:
        self.store = store
        self.namespace = namespace
        self.clock = clock
        self.local_ttl = local_ttl
        self._local: dict[str, tuple[int, float]] = {}
        self._keys: dict[str, str] = {}
        self._created: dict[str, int] = {}
        self._lock = threading.Lock()

    def key(self, name: str) -> str:
        """Return the store key of tag ``name``."""
        key = self._keys.get(name)
        if key is None:
            prefix = f"{self.namespace}:t:" if self.namespace else "t:"
            if _SAFE_NAME.fullmatch(name) and len(prefix) + len(name) <= MAX_KEY_BYTES:
                key = prefix + name
            else:
                key = prefix + "#" + make_key("", name).rsplit(":", 1)[-1]
            if len(self._keys) >= 4096:
                self._keys.clear()
            self._keys[name] = key
        return key

    def cached(self, names: Iterable[str]) -> dict[str, int] | None:
        """Return the process-local versions of all ``names``, or None if any is missing or old."""
        if not self.local_ttl:
            return None
        now = time.monotonic()
        versions: dict[str, int] = {}
        for name in names:
            known = self._local.get(name)
            if known is None or known[1] < now:
                return None
            versions[name] = known[0]
        return versions

    def _remember(self, versions: Mapping[str, int]) -> None:
        if self.local_ttl:
            until = time.monotonic() + self.local_ttl
            with self._lock:
                for name, version in versions.items():
                    known = self._local.get(name)
                    # A read that started before this process's own bump may finish
                    # after it: never let the older version replace the newer one.
                    if known is None or version >= known[0]:
                        self._local[name] = (version, until)

    def from_found(self, names: Iterable[str], found: Mapping[str, bytes]) -> dict[str, int]:
        """Return versions from a ``get_many`` result, creating the tags that are missing."""
        versions: dict[str, int] = {}
        missing: list[str] = []
        for name in names:
            version = stored_count(found.get(self.key(name)))
            if version is None:
                missing.append(name)
            else:
                versions[name] = version
        if missing:
            versions.update(self._create(missing))
        self._remember(versions)
        return versions

    def read(self, names: Iterable[str]) -> dict[str, int]:
        """Return the current versions of ``names`` (local copy, or one round trip)."""
        names = list(names)
        if not names:
            return {}
        local = self.cached(names)
        if local is not None:
            return local
        return self.from_found(names, self.store.get_many([self.key(n) for n in names]))

    def _create(self, names: list[str]) -> dict[str, int]:
        """Create lost tags with the current time; a racing creator's version wins."""
        return self._recreate(names, self.clock.time_ms(), forward=False)

    def _recreate(self, names: list[str], now: int, forward: bool) -> dict[str, int]:
        """Create missing tags at ``now``; where someone else just did, take their version.

        With ``forward`` (a bump) that version is moved on as well. Foreign bytes
        under a tag key, or a key that vanished again, are replaced by ``now``.
        """
        versions: dict[str, int] = {}
        for name in names:
            key = self.key(name)
            # A tag lost within the millisecond this process created it must not come
            # back with the same version, or entries recorded against it stay valid.
            start = max(now, self._created.get(name, 0) + 1)
            if self.store.add(key, b"%d" % start, 0):
                versions[name] = start
                continue
            current = stored_count(self.store.get(key))
            if current is not None and forward:
                current = self.store.incr(key, max(1, start - current))
            if current is None:
                self.store.set(key, b"%d" % start, 0)
                current = start
            versions[name] = current
        if len(self._created) > 4096:
            self._created.clear()
        self._created.update(versions)
        return versions

    def bump(self, names: Iterable[str]) -> dict[str, int]:
        """Move each tag to ``max(now, old + 1)``; return the new versions.

        Two round trips whatever the number of tags: one read of every tag, one
        batch of increments (pipelined per server where the store can).
        """
        names = list(dict.fromkeys(names))
        if not names:
            return {}
        keys = {name: self.key(name) for name in names}
        found = self.store.get_many(list(keys.values()))
        now = self.clock.time_ms()
        deltas: dict[str, int] = {}
        missing: list[str] = []
        for name, key in keys.items():
            old = stored_count(found.get(key, NO_VALUE))
            if old is None:
                missing.append(name)
            else:
                deltas[key] = max(1, now - old)
        results = incr_many(self.store, deltas)
        versions = {}
        for name, key in keys.items():
            if key in deltas and results.get(key) is not None:
                versions[name] = results[key]
            elif name not in missing:
                missing.append(name)  # deleted between the read and the increment
        versions.update(self._recreate(missing, now, forward=True))
        self._remember(versions)
        return versions


def incr_many(store: Store, deltas: Mapping[str, int]) -> dict[str, int | None]:
    """Increment several keys, in one batch per server where the store offers it."""
    if not deltas:
        return {}
    batched = getattr(store, "incr_many", None)
    if batched is not None:
        return batched(deltas)
    return {key: store.incr(key, delta) for key, delta in deltas.items()}
