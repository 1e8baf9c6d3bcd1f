"""Two tiers: a small, fast near cache in front of a shared store.

The usual pair is an in-process ``MemoryStore`` of a few MB over memcached: a hot
key is then read from this process's memory, with no round trip at all. Reads
try the hot tier and fall back to the cold one, promoting what they find. Writes
go through to the cold tier first, then to the hot one (write-through), so the
shared tier is never behind this process.

The hot tier is private to the process, so another process's write or delete
reaches it only when its copy expires: ``hot_ttl`` (default 5 s) bounds that
staleness for plain values. Cache entries built by ``get_or_build`` carry their
own tag versions and fresh-until time, and the tag versions are read from the
shared tier (:attr:`TieredStore.shared`), so invalidation still holds on a
near-cache hit. Counters (decimal values) and cas tokens live only in the cold
tier.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..api import NO_VALUE, CasToken, NoValueType, Store
from ..errors import ConfigError, ValueTooLarge
from ..tags import incr_many
from .base import stored_count

__all__ = ["TieredStore"]


class TieredStore:
    """A hot near cache over a cold shared store."""

    def __init__(self, hot: Store, cold: Store, *, hot_ttl: int = 5) -> None:
        if not isinstance(hot_ttl, int) or hot_ttl < 1:
            raise ConfigError(
                f"tiered: hot_ttl must be a whole number of seconds >= 1, got {hot_ttl!r}"
            )
        self.hot = hot
        self.cold = cold
        self.hot_ttl = hot_ttl
        self.max_value_size = cold.max_value_size

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
        """Return the tier every process sees: where tag versions and locks must live."""
        return self.cold

    def _hot_ttl(self, ttl: int) -> int:
        return self.hot_ttl if ttl == 0 else min(ttl, self.hot_ttl)

    def _promote(self, key: str, value: bytes) -> None:
        self._promote_with(key, value, self.hot_ttl)

    def get(self, key: str) -> bytes | NoValueType:
        """Return the hot copy, else the cold one (promoted)."""
        value = self.hot.get(key)
        if value is not NO_VALUE:
            return value
        value = self.cold.get(key)
        if value is not NO_VALUE:
            self._promote(key, value)  # type: ignore[arg-type]
        return value

    def forget_near(self, key: str) -> None:
        """Drop this process's near copy of ``key`` (a transient value, e.g. a build's mark)."""
        self.hot.delete(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Return hot copies, and fetch the rest from the cold tier in one call."""
        keys = list(keys)
        found = self.hot.get_many(keys)
        missing = [k for k in keys if k not in found]
        if missing:
            from_cold = self.cold.get_many(missing)
            for key, value in from_cold.items():
                self._promote(key, value)
            found.update(from_cold)
        return found

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        """Write through: cold tier first, then hot."""
        try:
            self.cold.set(key, value, ttl)
        except ValueTooLarge:
            self.hot.delete(key)
            raise
        if ttl < 0:
            self.hot.delete(key)
        else:
            self._promote_with(key, value, self._hot_ttl(ttl))

    def _promote_with(self, key: str, value: bytes, ttl: int) -> None:
        # A decimal value is a counter, changed server-side by every process: a hot
        # copy would be a stale count, so counters are only ever read from cold.
        if stored_count(value) is not None:
            self.hot.delete(key)
            return
        try:
            self.hot.set(key, value, ttl)
        except ValueTooLarge:
            self.hot.delete(key)  # the hot tier may be smaller; the cold tier serves it

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        """Write several values through both tiers; return those the cold tier refused."""
        failed = self.cold.set_many(items, ttl)
        stored = {k: v for k, v in items.items() if k not in failed}
        for key in failed:
            self.hot.delete(key)
        for key, value in stored.items():
            self._promote_with(key, value, self._hot_ttl(ttl))
        return failed

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        """Let the cold tier decide (it is shared); copy the winner's value to hot."""
        won = self.cold.add(key, value, ttl)
        if won:
            self._promote_with(key, value, self._hot_ttl(ttl))
        return won

    def append(self, key: str, value: bytes) -> bool:
        """Append in the cold tier; drop the hot copy."""
        self.hot.delete(key)
        return self.cold.append(key, value)

    def incr(self, key: str, delta: int = 1) -> int | None:
        """Count in the cold tier only (a hot copy would be a stale count)."""
        self.hot.delete(key)
        return self.cold.incr(key, delta)

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        """Count several keys in the cold tier."""
        self.hot.delete_many(list(deltas))
        return incr_many(self.cold, deltas)

    def decr(self, key: str, delta: int = 1) -> int | None:
        """Count down in the cold tier only."""
        self.hot.delete(key)
        return self.cold.decr(key, delta)

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        """Read with a cas token from the cold tier."""
        return self.cold.gets(key)

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        """Compare-and-set in the cold tier; refresh the hot copy on success."""
        stored = self.cold.cas(key, value, token, ttl)
        if stored:
            self._promote_with(key, value, self._hot_ttl(ttl))
        else:
            self.hot.delete(key)
        return stored

    def delete(self, key: str) -> bool:
        """Delete from both tiers; ``True`` when the cold tier had it."""
        self.hot.delete(key)
        return self.cold.delete(key)

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete several keys from both tiers."""
        keys = list(keys)
        self.hot.delete_many(keys)
        self.cold.delete_many(keys)

    def touch(self, key: str, ttl: int) -> bool:
        """Touch in the cold tier; the hot copy keeps its short life."""
        self.hot.delete(key)
        return self.cold.touch(key, ttl)

    def flush(self) -> None:
        """Flush both tiers."""
        self.hot.flush()
        self.cold.flush()

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        """Return the cold tier's servers plus the hot tier's, prefixed ``hot:``."""
        report = dict(self.cold.stats())
        report.update({f"hot:{name}": fields for name, fields in self.hot.stats().items()})
        return report

    def close(self) -> None:
        """Close both tiers."""
        self.hot.close()
        self.cold.close()
