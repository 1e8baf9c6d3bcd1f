"""Tiers: a faster store in front of a slower one, nested as deep as a site needs.

Reads fall back from the hot tier to the cold one and copy what they find
back, so a flushed hot tier refills without a build; writes go through, cold
first, so the colder tier is never behind; the cold tier is the authority
(``add``, ``gets``/``cas``, counting). A process-local hot tier (``memory://``)
keeps copies at most ``hot_ttl`` (5 s) and never holds counters, with tag versions
and locks read from the cold tier (:attr:`TieredStore.shared`); a shared one
(memcached, Redis) only ever *raises* a copied count, so racing processes never
move a tag version back. See docs/how-to/durable-tier.md#tiers-nest.

Every operation is written once, as steps that yield each tier's calls
(:class:`~mcache.sansio.steps.StoreCall`): the store calls its tiers, its async twin
(:mod:`mcache.stores.tiered.async_store`) awaits each tier's own twin.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from mcache.contract.stepped_store import SteppedStore
from mcache.contract.store import NO_VALUE, CasToken, NoValueType, Store, StoreTraits
from mcache.contract.store_helpers import stored_count, twin_made_once
from mcache.errors import ConfigError, StoreUnavailable, ValueTooLarge
from mcache.model.tags import incr_many_steps
from mcache.sansio.steps import Steps, StoreCall, perform, run_steps

if TYPE_CHECKING:
    from mcache.stores.tiered.async_store import AsyncTieredStore

__all__ = ["TieredStore"]

LENT = 60
"""Seconds a shared hot tier keeps a copy whose time left the cold tier cannot tell."""
PRIVATE_HOT_TTL = 5
"""Seconds a process-local hot tier keeps a copy, unless ``hot_ttl`` says otherwise."""

Expiring = dict[str, tuple[bytes, "int | None"]]


class TieredStore(SteppedStore):
    """A hot store in front of a cold one; either may itself be tiered."""

    def __init__(self, hot: Store, cold: Store, *, hot_ttl: int | None = None) -> None:
        if hot_ttl is not None and (not isinstance(hot_ttl, int) or hot_ttl < 1):
            raise ConfigError(
                f"tiered: hot_ttl must be a whole number of seconds >= 1, got {hot_ttl!r}"
            )
        self.hot = hot
        self.cold = cold
        self.private_hot = hot.traits.process_local
        self.hot_ttl = PRIVATE_HOT_TTL if hot_ttl is None and self.private_hot else hot_ttl
        self.max_value_size = cold.max_value_size
        self._cold_tells_time = cold.traits.tells_time_left
        self._twin: AsyncTieredStore | None = None
        self.traits = StoreTraits(
            expiry_slack=cold.traits.expiry_slack,  # locks live in the cold tier
            # Local only when neither tier is shared: a shared hot tier is written by others.
            process_local=cold.traits.process_local and hot.traits.process_local,
            async_twin=True,
            incr_many=True,
            tiered=True,
            tells_time_left=True,
        )

    def __repr__(self) -> str:
        return f"TieredStore(hot={self.hot!r}, cold={self.cold!r}, hot_ttl={self.hot_ttl})"

    @property
    def shared(self) -> Store:
        """Return what every process sees: where tag versions and locks must live."""
        return self.cold if self.private_hot else self

    def asynchronous(self) -> AsyncTieredStore:
        """Return the async twin: these steps, awaiting each tier's own twin."""
        return twin_made_once(self, self._new_twin)

    def _new_twin(self) -> AsyncTieredStore:
        from mcache.stores.tiered.async_store import AsyncTieredStore

        return AsyncTieredStore(self)

    # -- copies in the hot tier -----------------------------------------------------------

    def _copy_ttl(self, left: int | None) -> int:
        """Return how long a hot copy may live, given the value's time left (None: unknown)."""
        if left is None:
            return self.hot_ttl or LENT
        if self.hot_ttl is None:
            return left
        return self.hot_ttl if left == 0 else min(left, self.hot_ttl)

    def _copy_steps(self, key: str, value: bytes, left: int | None, filling: bool) -> Steps[None]:
        """Put a copy of ``value`` in the hot tier (``filling``: only where none is)."""
        try:
            if self.private_hot and stored_count(value) is not None:
                yield StoreCall(self.hot, "delete", (key,))  # a private copy of a shared count
            else:
                command = "add" if filling else "set"
                yield StoreCall(self.hot, command, (key, value, self._copy_ttl(left)))
        except ValueTooLarge:
            yield from self._drop_steps(key)  # the hot tier may be smaller; the cold serves it
        except StoreUnavailable:
            pass

    def _drop_steps(self, *keys: str) -> Steps[None]:
        with contextlib.suppress(StoreUnavailable):
            yield StoreCall(self.hot, "delete_many", (keys,))

    def _raise_steps(self, key: str, count: int) -> Steps[None]:
        """Raise the hot copy of a count to ``count``, never lower it (shared hot tiers)."""
        digits, hot = str(count).encode(), self.hot
        try:
            for _attempt in range(4):
                current, token = yield StoreCall(hot, "gets", (key,))
                if current is NO_VALUE:
                    if (yield StoreCall(hot, "add", (key, digits, self._copy_ttl(None)))):
                        return
                    continue
                known = stored_count(current)
                if known is not None and known >= count:
                    return
                if (yield StoreCall(hot, "cas", (key, digits, token, self._copy_ttl(None)))):
                    return
            yield StoreCall(hot, "delete", (key,))  # the next read copies the cold tier's count
        except StoreUnavailable:
            pass

    def _counted_steps(self, counts: Mapping[str, int | None]) -> Steps[None]:
        for key, count in counts.items():
            if count is None or self.private_hot:
                yield from self._drop_steps(key)
            else:
                yield from self._raise_steps(key, count)

    # -- reads ----------------------------------------------------------------------------

    def _hot_many_steps(self, keys: list[str]) -> Steps[dict[str, bytes]]:
        try:
            return (yield StoreCall(self.hot, "get_many", (keys,)))
        except StoreUnavailable:
            return {}

    def _from_cold_steps(self, keys: list[str]) -> Steps[Expiring]:
        if self._cold_tells_time:
            found: Expiring = yield StoreCall(self.cold, "get_many_expiring", (keys,))
        else:
            values = yield StoreCall(self.cold, "get_many", (keys,))
            found = {key: (value, None) for key, value in values.items()}
        for key, (value, left) in found.items():
            yield from self._copy_steps(key, value, left, filling=True)
        return found

    def get_steps(self, key: str) -> Steps[bytes | NoValueType]:
        """Return the hot copy, else the cold one (copied to the hot tier)."""
        try:
            value = yield StoreCall(self.hot, "get", (key,))
        except StoreUnavailable:
            value = NO_VALUE
        if value is not NO_VALUE:
            return value  # type: ignore[no-any-return]
        found = (yield from self._from_cold_steps([key])).get(key)
        return NO_VALUE if found is None else found[0]

    def get_many_steps(self, keys: Iterable[str]) -> Steps[dict[str, bytes]]:
        """Return hot copies, and fetch the rest from the cold tier in one call."""
        keys = list(keys)
        found = yield from self._hot_many_steps(keys)
        missing = [k for k in keys if k not in found]
        if missing:
            cold = yield from self._from_cold_steps(missing)
            found.update((k, v) for k, (v, _left) in cold.items())
        return found

    def get_many_expiring_steps(self, keys: Iterable[str]) -> Steps[Expiring]:
        """Return ``{key: (value, seconds left or None)}``: a hot copy's time is not known."""
        keys = list(keys)
        hot = yield from self._hot_many_steps(keys)
        found: Expiring = {key: (value, None) for key, value in hot.items()}
        missing = [k for k in keys if k not in found]
        if missing:
            found.update((yield from self._from_cold_steps(missing)))
        return found

    def forget_near(self, key: str) -> None:
        """Drop this process's near copy of ``key`` (a transient value, e.g. a build's mark)."""
        if self.private_hot:
            run_steps(self._drop_steps(key), perform)

    def gets_steps(self, key: str) -> Steps[tuple[bytes | NoValueType, CasToken | None]]:
        """Read with a cas token from the cold tier."""
        return (yield StoreCall(self.cold, "gets", (key,)))

    # -- writes ---------------------------------------------------------------------------

    def set_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[None]:
        """Write through: cold tier first, then hot."""
        try:
            yield StoreCall(self.cold, "set", (key, value, ttl))
        except ValueTooLarge:
            yield from self._drop_steps(key)
            raise
        if ttl < 0:
            yield from self._drop_steps(key)
        else:
            yield from self._copy_steps(key, value, ttl, filling=False)

    def set_many_steps(self, items: Mapping[str, bytes], ttl: int = 0) -> Steps[list[str]]:
        """Write several values through both tiers; return those the cold tier refused."""
        failed = yield StoreCall(self.cold, "set_many", (items, ttl))
        if failed or ttl < 0:
            yield from self._drop_steps(*(failed if ttl >= 0 else items))
        if ttl >= 0:
            for key, value in items.items():
                if key not in failed:
                    yield from self._copy_steps(key, value, ttl, filling=False)
        return failed  # type: ignore[no-any-return]

    def add_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        """Let the cold tier decide (it is shared); copy the winner's value to hot."""
        won = yield StoreCall(self.cold, "add", (key, value, ttl))
        if won:
            yield from self._copy_steps(key, value, ttl, filling=False)
        return won  # type: ignore[no-any-return]

    def cas_steps(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> Steps[bool]:
        """Compare-and-set in the cold tier; refresh the hot copy on success."""
        stored = yield StoreCall(self.cold, "cas", (key, value, token, ttl))
        if stored and ttl >= 0:
            yield from self._copy_steps(key, value, ttl, filling=False)
        else:
            yield from self._drop_steps(key)
        return stored  # type: ignore[no-any-return]

    def append_steps(self, key: str, value: bytes) -> Steps[bool]:
        """Append in the cold tier; drop the hot copy."""
        yield from self._drop_steps(key)
        return (yield StoreCall(self.cold, "append", (key, value)))

    def prepend_steps(self, key: str, value: bytes) -> Steps[bool]:
        """Prepend in the cold tier; drop the hot copy."""
        yield from self._drop_steps(key)
        return (yield StoreCall(self.cold, "prepend", (key, value)))

    def replace_steps(self, key: str, value: bytes, ttl: int = 0) -> Steps[bool]:
        """Replace in the cold tier (it is shared); copy the value to hot if it was stored."""
        try:
            stored = yield StoreCall(self.cold, "replace", (key, value, ttl))
        except ValueTooLarge:
            yield from self._drop_steps(key)
            raise
        if stored and ttl >= 0:
            yield from self._copy_steps(key, value, ttl, filling=False)
        else:
            yield from self._drop_steps(key)
        return stored  # type: ignore[no-any-return]

    def incr_steps(self, key: str, delta: int = 1, kind: str = "incr") -> Steps[int | None]:
        """Count in the cold tier; a shared hot copy is raised to the count. Counting down
        drops the hot copy instead (it is only ever raised)."""
        if kind == "decr":
            yield from self._drop_steps(key)
            return (yield StoreCall(self.cold, "decr", (key, delta)))  # type: ignore[no-any-return]
        count = yield StoreCall(self.cold, "incr", (key, delta))
        yield from self._counted_steps({key: count})
        return count  # type: ignore[no-any-return]

    def incr_many_steps(self, deltas: Mapping[str, int]) -> Steps[dict[str, int | None]]:
        """Count several keys in the cold tier (a tag bump), then raise the hot copies."""
        counts = yield from incr_many_steps(self.cold, deltas)
        yield from self._counted_steps(counts)
        return counts

    def delete_steps(self, key: str) -> Steps[bool]:
        """Delete from every tier, cold first; ``True`` when the cold tier had it."""
        existed = yield StoreCall(self.cold, "delete", (key,))
        yield from self._drop_steps(key)
        return existed  # type: ignore[no-any-return]

    def delete_many_steps(self, keys: Iterable[str]) -> Steps[None]:
        """Delete several keys from every tier."""
        keys = list(keys)
        yield StoreCall(self.cold, "delete_many", (keys,))
        yield from self._drop_steps(*keys)

    def touch_steps(self, key: str, ttl: int) -> Steps[bool]:
        """Touch in the cold tier; the hot copy is dropped and copied again on a read."""
        yield from self._drop_steps(key)
        return (yield StoreCall(self.cold, "touch", (key, ttl)))

    def flush_steps(self) -> Steps[None]:
        """Flush every tier."""
        yield StoreCall(self.cold, "flush", ())
        yield StoreCall(self.hot, "flush", ())

    def stats_steps(self) -> Steps[dict[str, dict[str, int | float | str]]]:
        """Return the cold tier's servers plus the hot tier's, prefixed ``hot:``."""
        report = dict((yield StoreCall(self.cold, "stats", ())))
        hot = yield StoreCall(self.hot, "stats", ())
        report.update({f"hot:{name}": fields for name, fields in hot.items()})
        return report

    # -- the Store contract: the steps, performed by calling each tier ------------------------

    def get_many_expiring(self, keys: Iterable[str]) -> Expiring:
        return run_steps(self.get_many_expiring_steps(keys), perform)

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        return self.cold.gets(key)

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        return run_steps(self.stats_steps(), perform)

    def close(self) -> None:
        """Close every tier."""
        self.hot.close()
        self.cold.close()
