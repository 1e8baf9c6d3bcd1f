"""The store contract suite, driven through an async store.

One suite, two drivers: :class:`mcache.testing.store_contract.StoreContract` calls a store's
methods; here each call is awaited on an event loop instead, through
:class:`BlockingDriver`, so an :class:`~mcache.contract.store.AsyncStore` is held to the
very same tests (atomic races across processes and threads included)::

    class TestMyAsyncStore(AsyncStoreContract):
        @pytest.fixture
        def store(self):
            driver = BlockingDriver(MyStore(...).asynchronous())
            yield driver
            driver.close()
        @pytest.fixture
        def store_factory(self): return functools.partial(driven, "my://url")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar

from mcache.contract.store import AsyncStore, CasToken, NoValueType, StoreTraits
from mcache.sansio.steps import twin_of
from mcache.testing.store_contract import StoreContract

__all__ = ["AsyncStoreContract", "BlockingDriver", "driven"]

T = TypeVar("T")


class BlockingDriver:
    """A blocking :class:`~mcache.contract.store.Store` whose every call awaits an async store's.

    Each thread awaits on an event loop of its own (a loop runs on one thread),
    so the contract's thread races reach the async store from several loops,
    as an ASGI site with several workers would.
    """

    traits = StoreTraits(incr_many=True)
    """It calls the async store's operations, and ``incr_many`` (which every twin has)."""

    def __init__(self, store: AsyncStore) -> None:
        self.astore = store
        self.max_value_size = store.max_value_size
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._guard = threading.Lock()

    def _wait(self, awaitable: Awaitable[T]) -> T:
        loop = getattr(self._local, "loop", None)
        if loop is None:
            loop = self._local.loop = asyncio.new_event_loop()
            with self._guard:
                self._loops.append(loop)
        return loop.run_until_complete(awaitable)

    def get(self, key: str) -> bytes | NoValueType:
        return self._wait(self.astore.get(key))

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return self._wait(self.astore.get_many(keys))

    def set(self, key: str, value: bytes, ttl: int = 0) -> None:
        self._wait(self.astore.set(key, value, ttl))

    def set_many(self, items: Mapping[str, bytes], ttl: int = 0) -> list[str]:
        return self._wait(self.astore.set_many(items, ttl))

    def add(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return self._wait(self.astore.add(key, value, ttl))

    def append(self, key: str, value: bytes) -> bool:
        return self._wait(self.astore.append(key, value))

    def prepend(self, key: str, value: bytes) -> bool:
        return self._wait(self.astore.prepend(key, value))

    def replace(self, key: str, value: bytes, ttl: int = 0) -> bool:
        return self._wait(self.astore.replace(key, value, ttl))

    def incr(self, key: str, delta: int = 1) -> int | None:
        return self._wait(self.astore.incr(key, delta))

    def decr(self, key: str, delta: int = 1) -> int | None:
        return self._wait(self.astore.decr(key, delta))

    def incr_many(self, deltas: Mapping[str, int]) -> dict[str, int | None]:
        return self._wait(self.astore.incr_many(deltas))  # type: ignore[attr-defined]

    def gets(self, key: str) -> tuple[bytes | NoValueType, CasToken | None]:
        return self._wait(self.astore.gets(key))

    def cas(self, key: str, value: bytes, token: CasToken, ttl: int = 0) -> bool:
        return self._wait(self.astore.cas(key, value, token, ttl))

    def delete(self, key: str) -> bool:
        return self._wait(self.astore.delete(key))

    def delete_many(self, keys: Iterable[str]) -> None:
        self._wait(self.astore.delete_many(keys))

    def touch(self, key: str, ttl: int) -> bool:
        return self._wait(self.astore.touch(key, ttl))

    def flush(self) -> None:
        self._wait(self.astore.flush())

    def stats(self) -> dict[str, dict[str, int | float | str]]:
        return self._wait(self.astore.stats())

    def close(self) -> None:
        """Close the async store's connections on this thread's loop, then every loop."""
        self._wait(self.astore.close())
        with self._guard:
            loops, self._loops = self._loops, []
        for loop in loops:
            if not loop.is_running():
                loop.close()
        self._local = threading.local()


def driven(url: str) -> BlockingDriver:
    """Return the async twin of the store ``url`` names, driven (for process races)."""
    from mcache.stores import from_url

    store: Any = from_url(url)
    twin = twin_of(store)
    if twin is None:
        raise TypeError(f"{store!r} has no async twin")
    return BlockingDriver(twin)


class AsyncStoreContract(StoreContract):
    """:class:`StoreContract`, with ``store`` a :class:`BlockingDriver` over an async store."""
