"""Tag versions: invalidating a whole group of entries in O(1).

A tag is a key ``{ns}:t:{name}`` holding a version: a time that only ever grows,
counted in 2**-20 ms (:data:`VERSION_BITS`: the milliseconds, then 20 bits more). An
entry records the versions of its tags when its build starts; it is valid only while
each tag still has that version. Bumping a tag therefore invalidates every entry that
carries it, however many there are, without finding or deleting any of them.

Why a bump is ``max(now, old + 1)`` by ``incr``, why a lost tag key is
recreated at the current time, and how a pool keeps a copy of each version on
every server: docs/explanation/tags.md. An entry records which copy it read
(its label: the copy's key without the tag prefix, ``name`` or ``name~n``), so
a version is only ever compared with the copy it came from; every process
sharing a namespace must see the same servers (:class:`~mcache.contract.store.Colocating`).

``local_ttl`` (``tag_cache_ttl``) keeps a process-local copy of versions: a bump
by *another* process may go unseen here that long, unless the store pushes
invalidations (:mod:`mcache.model.near`). A version read is kept only if no
invalidation of its key arrived since the read began
(:class:`~mcache.model.near.Invalidations`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping

from mcache.clock import Clock
from mcache.contract.store import Colocating, Store
from mcache.contract.store_helpers import stored_count
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.model.keys import MAX_KEY_BYTES, make_key
from mcache.model.near import Invalidations
from mcache.randomness import RandomSource, system_random
from mcache.sansio.steps import Steps, StoreCall, perform, run_steps

__all__ = ["VERSION_BITS", "Slot", "Tags", "version_ms", "version_now"]

VERSION_BITS = 20
"""A version is its time in milliseconds shifted left by this many bits. A bump moves a
tag to ``max(now, old + 1)``; a lost tag key is recreated at ``now`` plus a random draw of
these bits, so that two processes recreating it in one millisecond (or a host whose
clock lags onto the millisecond the lost copy had) almost never give it back the version
entries recorded against the lost copy: one chance in a million, where the millisecond
alone gave it back every time. ``2**63`` is still ahead until the year 2248."""


def version_now(clock: Clock) -> int:
    """Return the version a bump made now would move a tag to, at least."""
    return clock.time_ms() << VERSION_BITS


def version_ms(version: int) -> int:
    """Return the time in milliseconds a version was made at (a version written before
    versions had their 20 more bits reads as a time in 1970: long ago)."""
    return version >> VERSION_BITS


# Names kept readable in their keys: printable ASCII without "~" (copies end in
# "~n") and not starting with "#" (hashed names do), so no tag's key is another
# tag's key or copy. Anything else is hashed.
_SAFE_NAME = re.compile(r"(?!#)[!-}]{1,150}")
_COPY_ROOM = 8  # bytes kept free after a tag key for a copy's ``~n`` suffix

Slot = tuple[str, str]
"""One copy of a tag's version: (label recorded in entries, store key)."""


class Tags:
    """Versions of a namespace's tags in a (shared) store."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        clock: Clock,
        local_ttl: float = 0.0,
        invalidations: Invalidations | None = None,
        draws: RandomSource = system_random,
    ) -> None:
        self.store = store
        self.draws = draws
        """Where a recreated tag's low bits come from (its cache's source)."""
        self.invalidations = invalidations or Invalidations()
        self.namespace = namespace
        self.clock = clock
        self.local_ttl = local_ttl
        self._placing: Colocating | None = store if store.traits.colocates else None  # type: ignore[assignment]
        self._prefix = f"{namespace}:t:" if namespace else "t:"
        self._local: dict[str, tuple[int, float]] = {}
        self._keys: BoundedMemo[str, str] = BoundedMemo(4096)
        self._created: BoundedMemo[str, int] = BoundedMemo(PER_KEY_LIMIT)
        self.bumped: BoundedMemo[str, int] = BoundedMemo(PER_KEY_LIMIT)
        """The version each tag this cache bumped last got (by tag name): a router of this
        process knows its own writes at once (:class:`mcache.engine.fresh_reads.ChangeTimes`)."""
        self._stray: BoundedMemo[str, bool] = BoundedMemo(PER_KEY_LIMIT)
        self._lock = threading.Lock()
        # Caches on one store and namespace share tags: what one reads, another can check.
        self.scope = (id(store), namespace)

    def key(self, name: str) -> str:
        """Return the store key of tag ``name`` (its first copy, where there are several)."""
        key = self._keys.get(name)
        if key is None:
            prefix = self._prefix
            if _SAFE_NAME.fullmatch(name) and len(prefix) + len(name) <= MAX_KEY_BYTES - _COPY_ROOM:
                key = prefix + name
            else:
                key = prefix + "#" + make_key("", name).rsplit(":", 1)[-1]
            self._keys.remember(name, key)
        return key

    def label(self, name: str) -> str:
        """Return the label entries record for tag ``name`` (of its first copy): what a
        cache in front is told as the tag's surrogate key, on a page and in a purge."""
        return self.key(name)[len(self._prefix) :]

    def near(self, names: Iterable[str], key: str) -> list[Slot]:
        """Return the copy of each tag to read along with the entry stored under ``key``
        (labelled by its key without the tag prefix: one label, one key)."""
        placing, cut = self._placing, len(self._prefix)
        if placing is None:
            return [(k[cut:], k) for k in map(self.key, names)]
        return [(c[cut:], c) for c in (placing.colocated(self.key(n), key) for n in names)]

    def everywhere(self, name: str) -> list[Slot]:
        """Return every copy of tag ``name``: a bump must move them all."""
        base, cut = self.key(name), len(self._prefix)
        copies = (base,) if self._placing is None else self._placing.spread(base)
        return [(copy[cut:], copy) for copy in copies]

    def cached(self, slots: Iterable[Slot]) -> dict[str, int] | None:
        """Return the process-local versions of all ``slots``, or None if any is missing or old."""
        if not self.local_ttl:
            return None
        return self.local_versions(label for label, _key in slots)

    def local_versions(self, labels: Iterable[str]) -> dict[str, int] | None:
        """Return the process-local versions of the copies ``labels`` name, or None if any
        is missing or old (a near hit checks its entry's ``tags`` against them)."""
        now = self.clock.monotonic()
        local = self._local
        versions: dict[str, int] = {}
        for label in labels:
            known = local.get(label)
            if known is None or known[1] < now:
                return None
            versions[label] = known[0]
        return versions

    def all_current(self, versions: dict[str, int], now: float) -> bool:
        """Return whether the process-local copies hold exactly ``versions``, none of them
        old at ``now`` (the clock's ``monotonic()``): :meth:`local_versions` compared, with no dict
        made (it runs on every near hit)."""
        local = self._local
        for label, version in versions.items():
            known = local.get(label)
            if known is None or known[0] != version or known[1] < now:
                return False
        return True

    def forget(self, keys: Iterable[str]) -> None:
        """Drop the process-local versions of the tag keys among ``keys`` (they changed)."""
        prefix, cut = self._prefix, len(self._prefix)
        for key in keys:
            if key.startswith(prefix):
                self._local.pop(key[cut:], None)

    def forget_all(self) -> None:
        """Drop every process-local version."""
        self._local.clear()

    def _remember(self, versions: Mapping[str, int], mark: int | None = None) -> None:
        """Keep ``versions`` locally; read ones (``mark``: when the read began) only if no
        invalidation of their key arrived since."""
        if self.local_ttl:
            until = self.clock.monotonic() + self.local_ttl
            unchanged, prefix = self.invalidations.unchanged, self._prefix
            with self._lock:
                if len(self._local) > PER_KEY_LIMIT:
                    self._local.clear()
                for label, version in versions.items():
                    if mark is not None and not unchanged(prefix + label, mark):
                        continue
                    known = self._local.get(label)
                    # A read that started before this process's own bump may finish
                    # after it: never let the older version replace the newer one.
                    if known is None or version >= known[0]:
                        self._local[label] = (version, until)

    def versions_found(
        self, slots: Iterable[Slot], found: Mapping[str, bytes], mark: int
    ) -> tuple[dict[str, int], list[Slot]]:
        """Return the versions a ``get_many`` result holds (remembered; ``mark``: taken
        before the read), and the copies it lacks, for :meth:`create_steps` to make."""
        versions: dict[str, int] = {}
        missing: list[Slot] = []
        for label, key in slots:
            data = found.get(key)
            if type(data) is bytes and data.isdigit():  # as written: stored_count's fast case
                versions[label] = int(data)
            elif (version := stored_count(data)) is not None:
                versions[label] = version
            else:
                missing.append((label, key))
        if self.local_ttl:
            self._remember(versions, mark)
        return versions, missing

    def create_steps(self, slots: list[Slot]) -> Steps[dict[str, int]]:
        """Create lost copies with the current time (remembered); a racing creator's wins."""
        mark = self.invalidations.mark()
        versions = yield from self._recreate_steps(slots, version_now(self.clock), forward=False)
        self._remember(versions, mark)
        return versions

    def read(self, names: Iterable[str], near: str) -> dict[str, int]:
        """Return the current versions of ``names`` as an entry under ``near`` records them."""
        return run_steps(self.read_steps(names, near), perform)

    def read_steps(self, names: Iterable[str], near: str) -> Steps[dict[str, int]]:
        """:meth:`read`, as steps (see :mod:`mcache.sansio.steps`)."""
        slots = self.near(names, near)
        if not slots:
            return {}
        local = self.cached(slots)
        if local is not None:
            return local
        return (yield from self._fetch_steps(slots))

    def _fetch_steps(self, slots: list[Slot]) -> Steps[dict[str, int]]:
        """Return the versions of ``slots`` read from the store, creating lost copies."""
        mark = self.invalidations.mark()
        found = yield StoreCall(self.store, "get_many", ([key for _, key in slots],))
        versions, missing = self.versions_found(slots, found, mark)
        if missing:
            versions.update((yield from self.create_steps(missing)))
        return versions

    def slots_of(self, labels: Iterable[str]) -> list[Slot]:
        """Return the copies behind labels an entry recorded (its ``tags``)."""
        return [(label, self._prefix + label) for label in labels]

    def strays(self, labels: Iterable[str]) -> set[str]:
        """Return the labels that are no longer a copy of their tag: the pool changed since.

        A bump moves only the copies on the pool's servers now, so an entry that
        recorded another must count as changed, not as current for ever.
        """
        if self._placing is None:
            return set()
        return {label for label in labels if self._is_stray(label)}

    def _is_stray(self, label: str) -> bool:
        known = self._stray.get(label)  # a process's pool never changes: decided once
        if known is None:
            base = self._prefix + label.split("~", 1)[0]
            copies = self._placing.spread(base)  # type: ignore[union-attr]
            known = self._prefix + label not in copies
            self._stray.remember(label, known)
        return known

    def of_labels(self, labels: Iterable[str]) -> dict[str, int]:
        """Return the current versions of the copies an entry recorded (its ``tags``);
        a stray copy (:meth:`strays`) gets -1, which no entry recorded."""
        return run_steps(self.of_labels_steps(labels), perform)

    def of_labels_steps(self, labels: Iterable[str]) -> Steps[dict[str, int]]:
        """:meth:`of_labels`, as steps (see :mod:`mcache.sansio.steps`)."""
        labels = list(labels)
        strays = self.strays(labels)
        slots = self.slots_of(label for label in labels if label not in strays)
        local = self.cached(slots)
        if local is None:
            local = yield from self._fetch_steps(slots)
        return {**local, **dict.fromkeys(strays, -1)} if strays else local

    def _recreate_steps(
        self, slots: list[Slot], now: int, forward: bool, seen: Mapping[str, int] | None = None
    ) -> Steps[dict[str, int]]:
        """Create missing copies at ``now`` (a version) plus a random draw of its low bits;
        where someone else just did, take their version (moved on as well with ``forward``: a
        bump). Foreign bytes, or a key that vanished again, are replaced by that or
        ``seen[key] + 1``, whichever is later: a host whose clock runs late must not move a
        version backwards."""
        versions: dict[str, int] = {}
        seen = seen or {}
        for label, key in slots:
            start = self._fresh(now, max(self._created.get(key, 0), seen.get(key, -1)) + 1)
            store = self.store
            if (yield StoreCall(store, "add", (key, b"%d" % start, 0))):
                current: int | None = start
            else:
                # gets: from the primary, where the add failed (a replica that serves the
                # hits may not have the copy yet, and a version set over it would count
                # every entry recorded against it as changed)
                found, _ = yield StoreCall(store, "gets", (key,))
                current = stored_count(found)
                if current is not None and forward:
                    current = yield StoreCall(store, "incr", (key, max(1, start - current)))
                if current is None:
                    yield StoreCall(store, "set", (key, b"%d" % start, 0))
                    current = start
            versions[label] = self._created.remember(key, current)
        return versions

    def bump_steps(self, names: Iterable[str]) -> Steps[dict[str, int]]:
        """Move every copy of each tag to ``max(now, old + 1)``; return each tag's new version.

        Two round trips whatever the number of tags: one read of every copy, one batch
        of increments. Missing copies are created with ``add``, or in the batch where
        the store creates what it counts (:meth:`_bump_creating_steps`).
        """
        names = list(dict.fromkeys(names))
        slots = list(dict.fromkeys(slot for name in names for slot in self.everywhere(name)))
        if not slots:
            return {}
        found = yield StoreCall(self.store, "get_many", ([key for _, key in slots],))
        now = version_now(self.clock)
        seen = {key: old for _, key in slots if (old := stored_count(found.get(key))) is not None}
        missing = [slot for slot in slots if slot[1] not in seen]
        deltas = {key: max(1, now - old) for key, old in seen.items()}
        if self.store.traits.leases and self.store.creates_counters:  # type: ignore[attr-defined]
            versions = yield from self._bump_creating_steps(slots, deltas, seen, missing, now)
        else:
            results = yield from incr_many_steps(self.store, deltas)
            versions = {}
            for label, key in slots:
                if key in deltas and results.get(key) is not None:
                    versions[label] = results[key]  # type: ignore[assignment]
                elif (label, key) not in missing:
                    missing.append((label, key))  # deleted between the read and the increment
            versions.update((yield from self._recreate_steps(missing, now, True, seen)))
        self._remember(versions)
        cut = len(self._prefix)
        bumped = {name: versions[self.key(name)[cut:]] for name in names}
        for name, version in bumped.items():
            self.bumped.remember(name, version)
        return bumped

    def _bump_creating_steps(
        self,
        slots: list[Slot],
        deltas: dict[str, int],
        seen: dict[str, int],
        missing: list[Slot],
        now: int,
    ) -> Steps[dict[str, int]]:
        """The increments of :meth:`bump_steps` on a store that creates what it counts
        (memcached's ``ma … N J``): a missing copy is created in the same batch. One that
        someone else created meanwhile is counted up by one, which may leave it behind
        ``now``: only those are moved on afterwards."""
        targets = {key: seen[key] + delta for key, delta in deltas.items()}
        for _, key in missing:
            targets[key] = self._fresh(now, self._created.get(key, 0) + 1)
            deltas[key] = 1
        results = yield StoreCall(self.store, "incr_many_creating", (deltas, targets))
        versions = {label: results[key] for label, key in slots}
        behind = [(label, key) for label, key in slots if results[key] < targets[key]]
        if behind:
            ahead = {key: max(1, targets[key] - results[key]) for _, key in behind}
            moved = yield from incr_many_steps(self.store, ahead)
            versions.update({label: moved[key] or targets[key] for label, key in behind})  # type: ignore[misc]
        for label, key in missing:
            self._created.remember(key, versions[label])
        return versions

    def _fresh(self, now: int, floor: int) -> int:
        """Return the version a tag key created at ``now`` gets: no lower than ``floor``
        (a version this process knew: it never repeats one), plus a draw of its low bits.

        The draw comes on top of the floor, not beside it: a version known here may have
        been bumped by one meanwhile by another process, and ``floor`` alone would then
        give that lost version back, and keep valid the entries recorded against it.
        """
        return max(now, floor) + self.draws.randint(0, (1 << VERSION_BITS) - 1)


def incr_many(store: Store, deltas: Mapping[str, int]) -> dict[str, int | None]:
    """Increment several keys, in one batch per server where the store offers it."""
    return run_steps(incr_many_steps(store, deltas), perform)


def incr_many_steps(store: Store, deltas: Mapping[str, int]) -> Steps[dict[str, int | None]]:
    """:func:`incr_many`, as steps."""
    if not deltas:
        return {}
    if store.traits.incr_many:
        return (yield StoreCall(store, "incr_many", (deltas,)))
    counts: dict[str, int | None] = {}
    for key, delta in deltas.items():
        counts[key] = yield StoreCall(store, "incr", (key, delta))
    return counts
