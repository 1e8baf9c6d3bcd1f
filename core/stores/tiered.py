"""Tiers: a faster store in front of a slower one, nested as deep as a site needs.

``memory://`` over ``memcached://`` over ``postgresql://`` is three tiers: a
process's RAM, the site's RAM, and a table that survives both restarting.
Reads try the hot tier and fall back to the cold one, copying what they find
into the hot tier for the time the value has left there (a cold tier that
cannot say, like memcached, lends it for ``hot_ttl`` or a minute), so a hot
tier flushed or restarted refills from the cold one without a build. Writes
go through, cold tier first, so the colder tier is never behind; deletes reach
every tier. The cold tier is the authority: ``add``, ``gets``/``cas`` and
counting happen there.

Two kinds of hot tier:

* **Process-local** (``memory://``): another process's write or delete reaches
  it only when its copy expires, so copies live at most ``hot_ttl`` (default
  5 s). Counters and tag versions are never copied into it, and tag versions
  and locks are read from the cold tier (:attr:`TieredStore.shared`), so
  invalidation still holds on a near hit.
* **Shared** (``memcached://``, ``redis://``): every process reads the same
  copies and every write goes through them, so they live as long as the value
  (``hot_ttl``, if given, caps that). The whole stack is then what processes
  share: tag versions are read from the hot tier and refilled from the cold
  one. A copied number (a counter, a tag version) is only ever *raised* to
  what the cold tier counted, and a copy is only added where none is, so two
  processes racing can never move a tag version back; an invalidation
  therefore reaches every tier. A hot tier that fails is skipped: reads go to
  the cold tier, and writes that reached it count as done.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from ..api import NO_VALUE, CasToken, NoValueType, Store, TellsTimeLeft
from ..errors import ConfigError, StoreUnavailable, ValueTooLarge
from ..tags import incr_many
from .base import stored_count

__all__ = ["TieredStore"]

LENT = 60
"""Seconds a shared hot tier keeps a copy whose time left the cold tier cannot tell."""
PRIVATE_HOT_TTL = 5
"""Seconds a process-local hot tier keeps a copy, unless ``hot_ttl`` says otherwise."""

Expiring = dict[str, tuple[bytes, "int | None"]]


class TieredStore:
    """A hot store in front of a cold one; either may itself be tiered."""

    def __init__(self, hot: Store, cold: Store, *, hot_ttl: int | None = None) -> None:
        if hot_ttl is not None and (not isinstance(hot_ttl, int) or hot_ttl < 1):
            raise ConfigError(
                f"tiered: hot_ttl must be a whole number of seconds >= 1, got {hot_ttl!r}"
            )
        self.hot = hot
        self.cold = cold
        self.private_hot = bool(getattr(hot, "process_local", False))
        self.hot_ttl = PRIVATE_HOT_TTL if hot_ttl is None and self.private_hot else hot_ttl
        self.max_value_size = cold.max_value_size
        self._cold_expiring = cold.get_many_expiring if isinstance(cold, TellsTimeLeft) else None

    def __repr__(self) -> str:
        return f"TieredStore(hot={self.hot!r}, cold={self.cold!r}, hot_ttl={self.hot_ttl})"

    @property
    def process_local(self) -> bool:
        """Return whether the cold tier (what processes share) lives in this process alone."""
        return bool(getattr(self.cold, "process_local", False))

    @property
    def expiry_slack(self) -> int:
        """Return the cold tier's (locks live there)."""
        return int(getattr(self.cold, "expiry_slack", 0))

    @property
    def shared(self) -> Store:
        """Return what every process sees: where tag versions and locks must live."""
        return self.cold if self.private_hot else self

    # -- copies in the hot tier -----------------------------------------------------------

    def _copy_ttl(self, left: int | None) -> int:
        """Return how long a hot copy may live, given the value's time left (None: unknown)."""
        if left is None:
            return self.hot_ttl or LENT
        if self.hot_ttl is None:
            return left
        return self.hot_ttl if left == 0 else min(left, self.hot_ttl)

    def _copy(self, key: str, value: bytes, left: int | None, filling: bool) -> None:
        """Put a copy of ``value`` in the hot tier (``filling``: only where none is)."""
        is_count = stored_count(value) is not None
        try:
            if is_count and self.private_hot:
                self.hot.delete(key)  # a private copy of a shared count would go stale
            elif filling:
                self.hot.add(key, value, self._copy_ttl(left))
            else:
                self.hot.set(key, value, self._copy_ttl(left))
        except ValueTooLarge:
            self._drop(key)  # the hot tier may be smaller; the cold tier serves it
        except StoreUnavailable:
            pass

    def _drop(self, *keys: str) -> None:
        with contextlib.suppress(StoreUnavailable):
            self.hot.delete_many(keys)

    def _raise(self, key: str, count: int) -> None:
        """Raise the hot copy of a count to ``count``, never lower it (shared hot tiers)."""
        digits = str(count).encode()
        try:
            for _attempt in range(4):
                current, token = self.hot.gets(key)
                if current is NO_VALUE:
                    if self.hot.add(key, digits, self._copy_ttl(None)):
                        return
                    continue
                known = stored_count(current)
                if known is not None and known >= count:
                    return
                if self.hot.cas(key, digits, token, self._copy_ttl(None)):
                    return
            self.hot.delete(key)  # the next read copies the cold tier's count
        except StoreUnavailable:
            pass

    def _counted(self, counts: Mapping[str, int | None]) -> None:
        for key, count in counts.items():
            if count is None or self.private_hot:
                self._drop(key)
            else:
                self._raise(key, count)

    # -- reads ----------------------------------------------------------------------------

    def _hot_many(self, keys: list[str]) -> dict[str, bytes]:
        try:
            return self.hot.get_many(keys)
        except StoreUnavailable:
            return {}

    def _from_cold(self, keys: list[str]) -> Expiring:
        if self._cold_expiring is not None:
            found: Expiring = self._cold_expiring(keys)
        else:
            found = {key: (value, None) for key, value in self.cold.get_many(keys).items()}
        for key, (value, left) in found.items():
            self._copy(key, value, left, filling=True)
        return found

    def get(self, key: str) -> bytes | NoValueType:
        """Return the hot copy, else the cold one (copied to the hot tier)."""
        try:
            value = self.hot.get(key)
        except StoreUnavailable:
            value = NO_VALUE
        if value is not NO_VALUE:
            return value
        if self._cold_expiring is None:
            value = self.cold.get(key)
            if value is not NO_VALUE:
                self._copy(key, value, None, filling=True)  # type: ignore[arg-type]
            return value
        found = self._from_cold([key]).get(key)
        return NO_VALUE if found is None else found[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return hot copies, and fetch the rest from the cold tier in one call."""
        keys = list(keys)
        found = self._hot_many(keys)
        missing = [k for k in keys if k not in found]
        if missing:
            found.update((k, v) for k, (v, _left) in self._from_cold(missing).items())
        return found

    def get_many_expiring(self, keys: Iterable[str]) -> Expiring:
        """Return ``{key: (value, seconds left or None)}``: a hot copy's time is not known."""
        keys = list(keys)
        found: Expiring = {key: (value, None) for key, value in self._hot_many(keys).items()}
        missing = [k for k in keys if k not in found]
        if missing:
            found.update(self._from_cold(missing))
        return found

    def forget_near(self, key: str) -> None:
        """Drop this process's near copy of ``key`` (a transient value, e.g. a build's mark)."""
        if self.private_hot:
            self._drop(key)

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Read with a cas token from the cold tier."""
        return self.cold.gets(key)

    # -- writes ---------------------------------------------------------------------------

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Write through: cold tier first, then hot."""
        try:
            self.cold.set(key, value, ttl)
        except ValueTooLarge:
            self._drop(key)
            raise
        if ttl < 0:
            self._drop(key)
        else:
            self._copy(key, value, ttl, filling=False)

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Write several values through both tiers; return those the cold tier refused."""
        failed = self.cold.set_many(items, ttl)
        if failed or ttl < 0:
            self._drop(*(failed if ttl >= 0 else items))
        if ttl >= 0:
            for key, value in items.items():
                if key not in failed:
                    self._copy(key, value, ttl, filling=False)
        return failed

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Let the cold tier decide (it is shared); copy the winner's value to hot."""
        won = self.cold.add(key, value, ttl)
        if won:
            self._copy(key, value, ttl, filling=False)
        return won

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Compare-and-set in the cold tier; refresh the hot copy on success."""
        stored = self.cold.cas(key, value, token, ttl)
        if stored and ttl >= 0:
            self._copy(key, value, ttl, filling=False)
        else:
            self._drop(key)
        return stored

    def append(self, key: str, value: bytes) -> bool:
        """Append in the cold tier; drop the hot copy."""
        self._drop(key)
        return self.cold.append(key, value)

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Count in the cold tier; a shared hot copy is raised to the count."""
        count = self.cold.incr(key, delta)
        self._counted({key: count})
        return count

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        """Count several keys in the cold tier (a tag bump), then raise the hot copies."""
        counts = incr_many(self.cold, deltas)
        self._counted(counts)
        return counts

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Count down in the cold tier; the hot copy is dropped (it is only ever raised)."""
        self._drop(key)
        return self.cold.decr(key, delta)

    def delete(self, key: str) -> bool:
        """Delete from every tier, cold first; ``True`` when the cold tier had it."""
        existed = self.cold.delete(key)
        self._drop(key)
        return existed

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys from every tier."""
        keys = list(keys)
        self.cold.delete_many(keys)
        self._drop(*keys)

    def touch(self, key: str, ttl: int) -> bool:
        """Touch in the cold tier; the hot copy is dropped and copied again on a read."""
        self._drop(key)
        return self.cold.touch(key, ttl)

    def flush(self) -> None:
        """Flush every tier."""
        self.cold.flush()
        self.hot.flush()

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return the cold tier's servers plus the hot tier's, prefixed ``hot:``."""
        report = dict(self.cold.stats())
        report.update({f"hot:{name}": fields for name, fields in self.hot.stats().items()})
        return report

    def close(self) -> None:
        """Close every tier."""
        self.hot.close()
        self.cold.close()
