"""The in-process store on an event loop: the same memory, no threads, no waiting.

:class:`AsyncMemoryStore` answers from the very items its
:class:`~mcache.stores.memory.store.MemoryStore` holds, so sync and async views see
one cache. An operation holds the store's lock for microseconds and never waits
on I/O, so it is called directly on the loop: no thread hop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from mcache.contract.store import CasToken, NoValueType

if TYPE_CHECKING:
    from mcache.stores.memory.store import MemoryStore

__all__ = ["AsyncMemoryStore"]


class AsyncMemoryStore:
    """:class:`~mcache.contract.store.AsyncStore` over a :class:`MemoryStore`'s items."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.max_value_size = store.max_value_size

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.store!r})"

    async def get(self, key: str) -> bytes | NoValueType:
        return self.store.get(key)

    async def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return self.store.get_many(keys)

    async def get_many_expiring(self, keys: Iterable[str]) -> dict[str, tuple[bytes, int | None]]:
        return self.store.get_many_expiring(keys)

    async def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        self.store.set(key, value, ttl)

    async def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        return self.store.set_many(items, ttl)

    async def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return self.store.add(key, value, ttl)

    async def append(self, key: str, value: bytes) -> bool:
        return self.store.append(key, value)

    async def prepend(self, key: str, value: bytes) -> bool:
        return self.store.prepend(key, value)

    async def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return self.store.replace(key, value, ttl)

    async def incr(self, key: str, delta: int = 1) -> int | None:
        return self.store.incr(key, delta)

    async def decr(self, key: str, delta: int = 1) -> int | None:
        return self.store.decr(key, delta)

    async def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        return self.store.incr_many(deltas)

    async def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        return self.store.gets(key)

    async def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        return self.store.cas(key, value, token, ttl)

    async def delete(self, key: str) -> bool:
        return self.store.delete(key)

    async def delete_many(self, keys: Iterable[str]) -> None:
        self.store.delete_many(keys)

    async def touch(self, key: str, ttl: int) -> bool:
        return self.store.touch(key, ttl)

    async def flush(self) -> None:
        self.store.flush()

    async def stats(self) -> dict[str, dict[str, int | float | str]]:
        return self.store.stats()

    async def close(self) -> None:
        """Do nothing: there is no connection to release."""
