"""In-process single flight.

Threads of one process that want the same missing entry share one call: the
first (the leader) does the store and lock work, the others wait for its result
(or its exception) without sending a single request. Only leaders of different
processes ever meet at the distributed lock.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any

__all__ = ["Flight", "LeaderGone", "NotShared", "SingleFlight"]


class LeaderGone(Exception):
    """The flight's leader was cancelled or interrupted: a follower must take over."""


class NotShared(Exception):
    """The leader's value was its own (``Uncacheable``): each follower builds its own."""


class Flight:
    """One in-flight call whose outcome other threads, or coroutines, may wait for.

    The leader publishes what its value depends on too (:mod:`mcache.model.dependencies`),
    so a follower inside a build of its own passes it on as the leader would.
    """

    __slots__ = ("depends", "future", "served_stale", "stale")

    def __init__(self) -> None:
        self.future: Future[Any] = Future()
        self.depends: dict[str, int] = {}
        self.stale = False
        self.served_stale = False
        """The leader's answer was a stale entry, served while another rebuilds it."""

    def fail(self, error: BaseException) -> None:
        """Publish a leader's exception; a cancellation or interrupt means "take over"."""
        self.future.set_exception(error if isinstance(error, Exception) else LeaderGone())

    def finish(self, value: Any) -> None:
        """Publish the leader's value and wake the waiters."""
        self.future.set_result(value)

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; return whether the outcome is there."""
        wait_futures([self.future], timeout)
        return self.future.done()

    async def await_for(self, timeout: float) -> bool:
        """Await the outcome for up to ``timeout`` seconds without blocking the loop."""
        # asyncio.wait, not wait_for: a leader's own TimeoutError must not read as
        # "the wait ran out", and the leader's future is never cancelled from here.
        await asyncio.wait({asyncio.wrap_future(self.future)}, timeout=timeout)
        return self.future.done()

    def answered(self) -> bool:
        """Return whether the flight ended with a value or a build error (not a lost leader)."""
        return self.future.done() and not isinstance(self.future.exception(), LeaderGone)

    def outcome(self) -> Any:
        """Return the leader's value, or raise the leader's exception."""
        return self.future.result(timeout=0)


class SingleFlight:
    """A registry of in-flight calls by key."""

    def __init__(self) -> None:
        self._flights: dict[str, Flight] = {}
        self._lock = threading.Lock()

    def join(self, key: str, stalled: Flight | None = None) -> tuple[Flight, bool]:
        """Return the key's flight and whether the caller is its leader.

        ``stalled``: a flight that ran too long, replaced by the first follower to give up
        on it, whom the others follow: one extra call, not one per thread.
        """
        with self._lock:
            current = self._flights.get(key)
            if current is not None and current is not stalled:
                return current, False
            flight = self._flights[key] = Flight()
            return flight, True

    def leave(self, key: str, flight: Flight) -> None:
        """Retire the leader's flight so the next caller starts afresh."""
        with self._lock:
            if self._flights.get(key) is flight:
                del self._flights[key]
