"""What every stepped store's async twin shares: the contract, each call its store's steps awaited.

The twin of a :class:`~mcache.contract.stepped_store.SteppedStore` awaits the same
steps, its ``_perform`` doing the I/O on the running loop; it adds what is its own
(``stats``, ``close``…) and overrides what its store's steps do differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mcache.contract.store import CasToken, NoValueType
from mcache.sansio.steps import arun_steps

__all__ = ["SteppedTwin"]


class SteppedTwin:
    """The async twin of ``self.store``: each call awaits ``self.store.<call>_steps``."""

    store: Any

    def __init__(self, store: Any) -> None:
        self.store = store
        self.max_value_size = store.max_value_size

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r})"

    async def _perform(self, operation: Any) -> Any:
        raise NotImplementedError

    async def get(self, key: str) -> bytes | NoValueType:
        return await arun_steps(self.store.get_steps(key), self._perform)

    async def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return await arun_steps(self.store.get_many_steps(keys), self._perform)

    async def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        return await arun_steps(self.store.gets_steps(key), self._perform)

    async def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        await arun_steps(self.store.set_steps(key, value, ttl), self._perform)

    async def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        return await arun_steps(self.store.set_many_steps(items, ttl), self._perform)

    async def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return await arun_steps(self.store.add_steps(key, value, ttl), self._perform)

    async def append(self, key: str, value: bytes) -> bool:
        return await arun_steps(self.store.append_steps(key, value), self._perform)

    async def prepend(self, key: str, value: bytes) -> bool:
        return await arun_steps(self.store.prepend_steps(key, value), self._perform)

    async def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return await arun_steps(self.store.replace_steps(key, value, ttl), self._perform)

    async def incr(self, key: str, delta: int = 1) -> int | None:
        return await arun_steps(self.store.incr_steps(key, delta, "incr"), self._perform)

    async def decr(self, key: str, delta: int = 1) -> int | None:
        return await arun_steps(self.store.incr_steps(key, delta, "decr"), self._perform)

    async def flush(self) -> None:
        await arun_steps(self.store.flush_steps(), self._perform)

    async def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        return await arun_steps(self.store.incr_many_steps(deltas), self._perform)

    async def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        return await arun_steps(self.store.cas_steps(key, value, token, ttl), self._perform)

    async def delete(self, key: str) -> bool:
        return await arun_steps(self.store.delete_steps(key), self._perform)

    async def delete_many(self, keys: Iterable[str]) -> None:
        await arun_steps(self.store.delete_many_steps(keys), self._perform)

    async def touch(self, key: str, ttl: int) -> bool:
        return await arun_steps(self.store.touch_steps(key, ttl), self._perform)
