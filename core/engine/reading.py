"""Reading an entry with the current versions of everything it depends on.

An entry records the tags its caller declares (read in the entry's own round
trip) and those of the cached values it was built from
(:mod:`mcache.model.dependencies`), known only once it is read. For those the
process remembers per key which tags the entry carried last time and asks for
them along with it, so a hit on a page of cached fragments is still one round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcache.contract.store import NO_VALUE, LeaseBid, NoValueType, StaleClaim
from mcache.engine.bidding import shielded_bid
from mcache.errors import MCacheError
from mcache.memo import PER_KEY_LIMIT, BoundedMemo
from mcache.model.dependencies import report
from mcache.model.entry import Entry, is_placeholder
from mcache.sansio.steps import Steps, StoreCall, perform, run_steps

if TYPE_CHECKING:
    from mcache.engine.parts import CacheParts
    from mcache.model.tags import Slot

__all__ = ["Reader"]

_NONE: dict[str, int] = {}  # read-only: returned where there are no versions at all
_Plan = tuple[list[str], list["Slot"], list["Slot"], tuple[str, ...], StoreCall]
"""A read's plan: the caller's tags, their slots, every slot wanted, the keys, and the
store's ``get_many`` of those keys (made once: a hot key's hits send the same one)."""


class Reader:
    """Reads entries for a ``Cache``, validating every tag they recorded."""

    def __init__(self, parts: CacheParts) -> None:
        self.parts = parts
        self.others: BoundedMemo[str, tuple[str, ...]] = BoundedMemo(PER_KEY_LIMIT)  # other tags
        self.plans: BoundedMemo[str, _Plan] = BoundedMemo(PER_KEY_LIMIT)  # key -> its read's plan

    def read_steps(
        self, key: str, tags: list[str], claim: StaleClaim | LeaseBid | None = None
    ) -> Steps[tuple[Entry | None, dict[str, int], dict[str, int]]]:
        """Return the entry, the versions of the declared tags, and of the entry's other tags;
        with a ``claim`` (:mod:`mcache.engine.bidding`), bidding for its rebuild too."""
        parts = self.parts
        known = self.others.get(key)
        if not tags and not known:
            entry = self.decode(key, (yield from self._get_steps(key, claim)))
            if entry is None or not entry.tags:
                return entry, _NONE, _NONE
            others = yield from self._other_versions_steps(key, entry, _NONE, _NONE)
            return entry, _NONE, others
        tags_of = parts.tags
        plan = self.plans.get(key)
        if plan is None or plan[0] is not tags or known:
            plan = self._plan(key, tags, known)
        _, slots, wanted, keys, read_all = plan
        local = tags_of.cached(wanted) if tags_of.local_ttl else None
        mark = tags_of.invalidations.mark()
        if local is not None:
            entry, found = self.decode(key, (yield from self._get_steps(key, claim))), local
        else:
            if parts.shared is parts.store:
                if claim is None:
                    got = yield read_all
                else:
                    bid = StoreCall(parts.store, claim.read_method, (keys, claim))
                    got = yield shielded_bid(parts, key, bid, claim)
                entry = self.decode(key, got.get(key, NO_VALUE))
            else:
                entry = self.decode(key, (yield StoreCall(parts.store, "get", (key,))))
                got = yield StoreCall(parts.shared, "get_many", ([k for _, k in wanted],))
            found, missing = tags_of.versions_found(wanted, got, mark)
            if missing:
                found = {**found, **(yield from tags_of.create_steps(missing))}
        declared = {label: found[label] for label, _ in slots} if known else found
        if entry is None or len(entry.tags) <= len(declared):
            if known and entry is not None:
                self.others.pop(key, None)  # its fragments no longer carry tags
            return entry, declared, _NONE
        others = yield from self._other_versions_steps(key, entry, declared, found)
        return entry, declared, others

    def _plan(self, key: str, tags: list[str], known: tuple[str, ...] | None) -> _Plan:
        """Return which tag copies and keys a read of ``key`` with ``tags`` fetches; kept, as a
        hot key comes with the same tag list every time, unless it needs ``known`` tags too."""
        slots = self.parts.tags.near(tags, key)
        wanted = [*slots, *self.parts.tags.slots_of(known)] if known else slots
        keys = (key, *[k for _, k in wanted])
        plan = (tags, slots, wanted, keys, StoreCall(self.parts.store, "get_many", (keys,)))
        if not known:
            self.plans.remember(key, plan)
        return plan

    def _get_steps(
        self, key: str, claim: StaleClaim | LeaseBid | None
    ) -> Steps[bytes | NoValueType]:
        """Return what the store holds under ``key``, claiming it with ``claim`` if given."""
        if claim is None:
            return (yield StoreCall(self.parts.store, "get", (key,)))
        bid = StoreCall(self.parts.store, claim.read_method, ([key], claim))
        found = yield shielded_bid(self.parts, key, bid, claim)
        return found.get(key, NO_VALUE)  # type: ignore[no-any-return]

    def _other_versions_steps(
        self, key: str, entry: Entry, declared: dict[str, int], found: dict[str, int]
    ) -> Steps[dict[str, int]]:
        """Return the versions of the entry's tags beyond the declared ones (remembered)."""
        labels = tuple(label for label in entry.tags if label not in declared)
        missing = [label for label in labels if label not in found]
        if missing:
            found = {**found, **(yield from self.parts.tags.of_labels_steps(missing))}
        strays = self.parts.tags.strays(labels)
        if strays:  # recorded before the pool changed: no bump moves them any more
            found = {**found, **dict.fromkeys(strays, -1)}
        if self.others.get(key) != labels:
            self.others.remember(key, labels)
        return {label: found[label] for label in labels}

    def is_current_steps(self, entry: Entry, declared: dict[str, int]) -> Steps[bool]:
        """Return whether ``entry`` records ``declared`` and every other tag it has is current."""
        labels = [label for label in entry.tags if label not in declared]
        others = (yield from self.parts.tags.of_labels_steps(labels)) if labels else _NONE
        return entry.tags_current(declared, others)

    def decode(self, key: str, data: object) -> Entry | None:
        """Return the entry stored as ``data``, or None for a miss or undecodable bytes.

        A value written by a plain ``set`` is an untagged entry, fresh until the store
        drops it (as Django's ``get_or_set`` after ``set`` returns what was set). A
        build's placeholder is a miss, the server's (empty bytes) too.
        """
        if data is NO_VALUE or not data:
            return None
        value = self.parts.codec.loads(data, key)  # type: ignore[arg-type]
        entry = Entry.from_wire(value)
        if entry is not None:
            return entry
        if value is NO_VALUE:
            return None  # foreign or corrupted bytes: the codec logged them
        if is_placeholder(value):
            self.forget_near(key)
            return None  # a build is under way: nothing there yet
        return Entry(value, 0)

    def forget_near(self, key: str) -> None:
        """Drop a near (per-process) copy of a build's placeholder, so the next read of
        ``key`` sees the built entry as soon as it is written, not ``hot_ttl`` later."""
        if self.parts.traits.tiered:
            self.parts.store.forget_near(key)  # type: ignore[attr-defined]

    def peek(self, key: str) -> Entry | None:
        """Return whatever entry is stored now (any freshness), or None."""
        return run_steps(self.peek_steps(key), perform)

    def peek_steps(self, key: str) -> Steps[Entry | None]:
        """:meth:`peek`, as steps (see :mod:`mcache.sansio.steps`)."""
        try:
            return self.decode(key, (yield StoreCall(self.parts.store, "get", (key,))))
        except Exception as error:
            self.parts.store_failed("get_or_build", error)
            return None

    # -- plain reads (get, get_many): no building, no stale values -----------------------

    def plain_steps(self, store_key: str, data: bytes) -> Steps[Any]:
        """Return what a plain ``get`` reads in ``data``: an entry's value while it is
        fresh and current, a plain value as it is, else ``NO_VALUE`` (a stale entry, a
        build's placeholder, undecodable bytes); as steps (see :mod:`mcache.sansio.steps`)."""
        values = yield from self.plain_many_steps({store_key: data})
        return values.get(store_key, NO_VALUE)

    def plain_many_steps(self, found: Mapping[str, bytes]) -> Steps[dict[str, Any]]:
        """Return :meth:`plain_steps` of each store key in ``found`` that has a value."""
        values: dict[str, Any] = {}
        entries: dict[str, Entry] = {}
        for store_key, data in found.items():
            entry = self.decode(store_key, data)
            if entry is None:
                continue
            if entry.fresh_until_ms or entry.tags:
                entries[store_key] = entry  # its freshness and tags checked below
            else:
                values[store_key] = entry.value  # a plain value, or an entry fresh for ever
        if entries:
            values.update((yield from self.current_steps(entries)))
        return values

    def current_steps(self, entries: Mapping[str, Entry]) -> Steps[dict[str, Any]]:
        """Return the values of the entries that are fresh, with every tag unchanged (reported
        to an enclosing build, as ``get_or_build``'s are)."""
        parts = self.parts
        now = parts.clock.time_ms()
        fresh = {key: entry for key, entry in entries.items() if entry.is_fresh(now)}
        # in the entries' order (a set's would be the hash seed's): one request, replayable
        labels = list(dict.fromkeys(label for entry in fresh.values() for label in entry.tags))
        try:
            versions = (yield from parts.tags.of_labels_steps(labels)) if labels else _NONE
        except MCacheError as error:
            parts.store_failed("get", error)
            return {}
        values = {}
        for key, entry in fresh.items():
            if all(versions.get(label) == v for label, v in entry.tags.items()):
                report(parts.tags.scope, entry.tags)
                values[key] = entry.value
        return values
