"""A distributed lock on the store's atomic ``add``.

``add`` succeeds for exactly one caller across every process and host, and its
TTL frees the lock on its own when the holder dies mid-build. The value is a
random owner token that release and extend compare first (``gets`` then
``cas``), so a holder whose lock expired and was taken by someone else never
releases or extends that one's lock. A store whose clock counts whole seconds
(memcached: a TTL of ``t`` lasts ``t - 1`` to ``t`` seconds) says so with
``expiry_slack``, added to the TTL, so a lock never lasts less than its
``timeout`` and one renewed every third of it (:mod:`mcache.engine.renewal`)
never lapses while its holder lives.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from mcache.clock import Clock, system_clock
from mcache.contract.store import NO_VALUE, Store
from mcache.errors import LockTimeout
from mcache.randomness import RandomSource, system_random
from mcache.sansio.steps import Pause, Steps, StoreCall, perform, run_steps

if TYPE_CHECKING:
    from mcache.engine.renewal import LockRenewer

__all__ = ["Lock", "pauses"]


def pauses(clock: Clock, draws: RandomSource, seconds: float, cap: float = 0.05) -> Iterator[float]:
    """Yield jittered, doubling sleeps (the first within 10-20 ms, none over ``cap``) that
    together last ``seconds`` at most.

    For callers that poll the store for what another caller is building: the
    sync driver sleeps them, the async one awaits them.
    """
    deadline, delay = clock.monotonic() + seconds, 0.01
    while (remaining := deadline - clock.monotonic()) > 0:
        yield min(draws.uniform(delay, delay * 2), cap, remaining)
        delay = min(delay * 2, cap)


class Lock:
    """An expiring lock held under ``key`` with a random owner token.

    Used as a context manager with a ``renewer``, it is renewed for as long as
    the block runs, so the block may take longer than ``timeout``; a process
    that dies in the block stops renewing, and the lock frees within ``timeout``.
    """

    def __init__(
        self,
        store: Store,
        key: str,
        timeout: int = 30,
        wait: float = 0.0,
        renewer: LockRenewer | None = None,
        token: bytes | None = None,
        draws: RandomSource = system_random,
        clock: Clock = system_clock,
    ) -> None:
        if timeout < 1:
            raise ValueError(f"lock timeout must be >= 1 second, got {timeout!r}")
        self.store = store
        self.key = key
        self.timeout = int(timeout)
        self.wait = wait
        self.renewer = renewer
        # A token given is an owner's handing its lock over (to a queue worker, say).
        self.token = token or draws.token(16).encode()
        self.draws, self.clock = draws, clock
        self.held = token is not None
        self._slack = store.traits.expiry_slack

    def __repr__(self) -> str:
        return f"Lock({self.key!r}, held={self.held})"

    def expiry(self, timeout: int | None = None) -> int:
        """Return the store TTL that holds the lock ``timeout`` seconds (default: its own)."""
        return int(timeout or self.timeout) + self._slack

    def try_acquire(self) -> bool:
        """Take the lock if it is free; never wait."""
        return run_steps(self.try_acquire_steps(), perform)

    def try_acquire_steps(self) -> Steps[bool]:
        """:meth:`try_acquire`, as steps (see :mod:`mcache.sansio.steps`)."""
        self.held = yield StoreCall(self.store, "add", (self.key, self.token, self.expiry()))
        return self.held

    def acquire(self, wait: float | None = None) -> bool:
        """Take the lock, polling with backoff up to ``wait`` seconds; return whether held."""
        return run_steps(self.acquire_steps(wait), perform)

    def acquire_steps(self, wait: float | None = None) -> Steps[bool]:
        """:meth:`acquire`, as steps: its sleeps are pauses a driver schedules."""
        if (yield from self.try_acquire_steps()):
            return True
        for pause in pauses(self.clock, self.draws, self.wait if wait is None else wait, cap=0.1):
            yield Pause(pause)
            if (yield from self.try_acquire_steps()):
                return True
        return False

    def take_over_steps(self, token: bytes) -> Steps[bool]:
        """Hold the lock under ``token`` from now on, if it still holds the token it was
        handed over under; return whether it does.

        A queue worker's: brokers deliver a job at least once, and a copy delivered twice
        would otherwise extend the same token as the first, and both would build.
        """
        handed, self.token = self.token, token
        self.held = yield from self._compare_and_steps(self.expiry(), expected=handed)
        return self.held

    def _compare_and_steps(self, ttl: int, expected: bytes | None = None) -> Steps[bool]:
        """Rewrite the lock with our token and ``ttl`` (-1: delete it) if it still holds
        ``expected`` (by default our token).

        A renewal of this same lock may land between the read and the write (the owner
        rewrites its own token, with a new cas unique): then the token is still ours and
        the write is tried once more, so a release never leaves the lock to its timeout.
        """
        for _ in range(2):
            value, cas_token = yield StoreCall(self.store, "gets", (self.key,))
            if value is NO_VALUE or value != (expected or self.token):
                return False
            if (yield StoreCall(self.store, "cas", (self.key, self.token, cas_token, ttl))):
                return True
        return False

    def release(self) -> bool:
        """Release the lock if this owner still holds it; ``False`` if it was not ours."""
        return run_steps(self.release_steps(), perform)

    def release_steps(self) -> Steps[bool]:
        """:meth:`release`, as steps."""
        released = yield from self._compare_and_steps(-1)
        self.held = False
        return released

    def extend(self, timeout: int | None = None) -> bool:
        """Push the expiry out by ``timeout`` seconds, only if this owner still holds it."""
        return run_steps(self.extend_steps(timeout), perform)

    def extend_steps(self, timeout: int | None = None) -> Steps[bool]:
        """:meth:`extend`, as steps."""
        self.held = yield from self._compare_and_steps(self.expiry(timeout))
        return self.held

    def __enter__(self) -> Lock:
        if not self.acquire():
            raise LockTimeout(f"could not take lock {self.key!r} within {self.wait}s")
        if self.renewer is not None:
            self.renewer.hold(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.renewer is not None:
            self.renewer.drop(self)
        self.release()
