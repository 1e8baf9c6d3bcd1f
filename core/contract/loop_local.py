"""One value per running event loop (a client, connection pools), closed by its loop.

Asyncio connections belong to the loop that opened them, and ``asyncio.run`` in a
test or asgiref's loop for one Flask request each need their own. The closer made
here is an async generator, which an ending loop finalizes (``shutdown_asyncgens``):
the value is closed on its loop, not left to a closed one ("Event loop is closed").
A loop that is garbage collected takes its value with it (the map is weak).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["LoopLocal"]

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class _Held(Generic[T]):
    """A loop's value and the async generator that closes it with the loop."""

    value: T
    closing: AsyncGenerator[None, None] | None = None


class LoopLocal(Generic[T]):
    """``make()`` once per event loop; ``close(value)`` when that loop shuts down."""

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._held: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Held[T]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    async def get(self) -> T:
        """Return the running loop's value, made on its first use there."""
        loop = asyncio.get_running_loop()
        found = self._held.get(loop)
        if found is None:
            made = _Held(self._make())
            with self._lock:
                found = self._held.setdefault(loop, made)
            if found is made:
                made.closing = self._closer(made.value)
                await anext(made.closing)  # started: the loop now finalizes it at shutdown
        return found.value

    async def _closer(self, value: T) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await self._close(value)

    async def close(self) -> None:
        """Close the running loop's value now; the next :meth:`get` on it makes another."""
        with self._lock:
            held = self._held.pop(asyncio.get_running_loop(), None)
        if held is not None and held.closing is not None:
            await held.closing.aclose()
