"""What every stepped store's blocking side shares: each contract call, its steps performed.

The calls whose steps take the same arguments in every store (memcached, Redis, SQL,
tiers) are here, once; a store's async twin (:class:`~mcache.contract.stepped_twin.SteppedTwin`)
awaits the same steps. A store overrides a call only for a hand-tuned fast path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mcache.contract.store import CasToken, NoValueType
from mcache.sansio.steps import perform, run_steps

__all__ = ["SteppedStore"]


class SteppedStore:
    """A blocking store whose every call runs ``self.<call>_steps`` through ``_perform``."""

    # Do one operation's I/O (each operation's own ``run``, with no frame of ours: the
    # tiered store's hits pass here); a store on its own connections replaces this.
    _perform = staticmethod(perform)

    def get(self, key: str) -> bytes | NoValueType:
        return run_steps(self.get_steps(key), self._perform)  # type: ignore[attr-defined]

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return run_steps(self.get_many_steps(keys), self._perform)  # type: ignore[attr-defined]

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        return run_steps(self.gets_steps(key), self._perform)  # type: ignore[attr-defined]

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        run_steps(self.set_steps(key, value, ttl), self._perform)  # type: ignore[attr-defined]

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        return run_steps(self.set_many_steps(items, ttl), self._perform)  # type: ignore[attr-defined]

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return run_steps(self.add_steps(key, value, ttl), self._perform)  # type: ignore[attr-defined]

    def append(self, key: str, value: bytes) -> bool:
        return run_steps(self.append_steps(key, value), self._perform)  # type: ignore[attr-defined]

    def prepend(self, key: str, value: bytes) -> bool:
        return run_steps(self.prepend_steps(key, value), self._perform)  # type: ignore[attr-defined]

    def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return run_steps(self.replace_steps(key, value, ttl), self._perform)  # type: ignore[attr-defined]

    def incr(self, key: str, delta: int = 1) -> int | None:
        return run_steps(self.incr_steps(key, delta, "incr"), self._perform)  # type: ignore[attr-defined]

    def decr(self, key: str, delta: int = 1) -> int | None:
        return run_steps(self.incr_steps(key, delta, "decr"), self._perform)  # type: ignore[attr-defined]

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        return run_steps(self.incr_many_steps(deltas), self._perform)  # type: ignore[attr-defined]

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        return run_steps(self.cas_steps(key, value, token, ttl), self._perform)  # type: ignore[attr-defined]

    def delete(self, key: str) -> bool:
        return run_steps(self.delete_steps(key), self._perform)  # type: ignore[attr-defined]

    def delete_many(self, keys: Iterable[str]) -> None:
        run_steps(self.delete_many_steps(keys), self._perform)  # type: ignore[attr-defined]

    def touch(self, key: str, ttl: int) -> bool:
        return run_steps(self.touch_steps(key, ttl), self._perform)  # type: ignore[attr-defined]

    def flush(self) -> None:
        run_steps(self.flush_steps(), self._perform)  # type: ignore[attr-defined]
