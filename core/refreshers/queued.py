"""What every task-queue refresher shares: hand-off, a sender thread, the fallback.

A request that wins a stale key's lock must not wait for a broker, which may take
seconds to refuse (Celery on Redis: 6 s here): it hands the job to a sender thread and
goes on with the stale value. A failed send falls back (``fallback``: this process's
thread pool, or ``"none"``) and opens a circuit: for ``retry_after`` seconds, doubling up
to ``max_retry_after``, every rebuild falls back at once instead of each spending the
broker's seconds while its lock is held. See docs/how-to/task-queue.md. A rebuild that
cannot leave the process (a closure, a page that needs its request) runs in the pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from mcache.clock import Clock, system_clock
from mcache.errors import ConfigError
from mcache.logs import FailureLog
from mcache.refreshers.thread import ThreadPoolRefresher
from mcache.sansio.steps import Steps, perform, run_steps

__all__ = ["Publish", "QueueRefresher"]


@dataclass(slots=True)
class Publish:
    """The one operation of a send that is not a store's: the payload to the queue. The
    sender thread's driver runs it; a simulation delivers it to a broker of its own."""

    refresher: QueueRefresher
    payload: str
    context: Any

    def run(self) -> None:
        self.refresher.send(self.payload, self.context)


class QueueRefresher:
    """Sends addressable rebuilds to a task queue (subclasses say how: :meth:`send`)."""

    default_queue: str | None = None

    def __init__(
        self,
        queue: str | None = None,
        fallback: str = "thread",
        hold: float = 60.0,
        pool: ThreadPoolRefresher | None = None,
        max_pending: int = 256,
        retry_after: float = 5.0,
        max_retry_after: float = 60.0,
        clock: Clock = system_clock,
    ) -> None:
        """``clock``: what the circuit's windows are counted on (a simulation's moves them)."""
        if fallback not in ("thread", "none"):
            raise ConfigError(f"fallback must be 'thread' or 'none', got {fallback!r}")
        if not hold >= 1:
            raise ConfigError(f"hold must be >= 1 second (a worker's time to start), got {hold!r}")
        self.queue = queue or self.default_queue
        self.fallback = fallback
        self.hold = hold
        self.pool = pool or ThreadPoolRefresher()
        self.clock = clock
        self.failures = FailureLog(clock=clock)
        self._pending = threading.BoundedSemaphore(max_pending)
        self._sender: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._told: set[str] = set()
        self._idle = threading.Condition()
        self._sends = 0
        self.retry_after = retry_after
        self.max_retry_after = max_retry_after
        self._opened_at = -1.0  # clock.monotonic() when the last window opened
        self._closed_at = 0.0  # clock.monotonic() when sending may be tried again
        self._window = retry_after

    def send(self, payload: str, context: Any) -> None:
        """Publish one job's payload; raise when the queue cannot take it.

        ``context`` is what :meth:`context` returned in the caller's thread.
        """
        raise NotImplementedError

    def context(self) -> Any:
        """Return what :meth:`send` needs from the caller's thread (a thread-local app)."""
        return None

    def __call__(self, job: Callable[[], object]) -> bool:
        """Queue ``job`` if it can leave the process, else run it here."""
        if getattr(job, "hand_off", None) is None:
            return self.pool(job)  # someone's own callable: it can only run here
        if self.broken():
            return self._fall_back(job)
        if not self._pending.acquire(blocking=False):
            self.failures.warning(
                "refresh.backlog", "%s: too many rebuilds waiting to be sent", self
            )
            return self._fall_back(job)
        with self._idle:
            self._sends += 1
        # Describing the job, extending its lock and publishing all happen on the
        # sender thread: the request that won the lock is answered at once.
        self.submit(job, self.context())
        return True

    def submit(self, job: Any, context: Any) -> None:
        """Run :meth:`send_steps` for ``job`` off the caller's thread (here: the sender
        thread; a simulation runs them on a simulated thread), then :meth:`sent`."""
        self._sending().submit(self._send, job, context)

    def sent(self) -> None:
        """A send submitted is over, however it ended."""
        self._pending.release()
        with self._idle:
            self._sends -= 1
            self._idle.notify_all()

    def broken(self) -> bool:
        """Whether a recent failed send keeps every rebuild off the queue for now."""
        return self.clock.monotonic() < self._closed_at

    def _send(self, job: Any, context: Any) -> None:
        try:
            run_steps(self.send_steps(job, context), perform)
        finally:
            self.sent()

    def send_steps(self, job: Any, context: Any) -> Steps[None]:
        """Hand ``job``'s lock off and publish its payload; if the queue cannot take it,
        open the circuit, take the lock back and fall back. As steps, so that a
        simulation interleaves a send with the callers and the workers."""
        started = self.clock.monotonic()
        try:
            why = job.why_local()
            if why is not None:
                self._tell_once(job.name, why)
                if not self.pool(job):
                    yield from job.give_up_steps()
                return
            if self.broken():
                yield from self._fall_back_steps(job)  # its lock is still renewed here
                return
            payload = yield from job.hand_off_steps(self.hold)
            if payload is None:
                return  # the lock is no longer ours: someone else rebuilds
            started = self.clock.monotonic()
            yield Publish(self, payload, context)
            self._window = self.retry_after
        except Exception as error:
            self._open_circuit(error, started)
            if (yield from job.take_back_steps()):
                yield from self._fall_back_steps(job)

    def _open_circuit(self, error: Exception, started: float) -> None:
        """Send nothing for the window. A send begun before the window opened (under way
        when the broker went: a client may retry it for seconds, past the window) belongs
        to the outage that opened it: it neither reopens the window nor doubles the next."""
        with self._lock:
            if self.broken() or started < self._opened_at:
                return
            self._opened_at = self.clock.monotonic()
            self._closed_at = self._opened_at + self._window
            window, self._window = self._window, min(2 * self._window, self.max_retry_after)
        self.failures.warning(
            "refresh.send",
            "%s could not queue a rebuild (%r); falling back (%s) for %.0f s",
            self, error, self.fallback, window,
        )  # fmt: skip

    def _fall_back(self, job: Any) -> bool:
        return run_steps(self._fall_back_steps(job), perform)

    def _fall_back_steps(self, job: Any) -> Steps[bool]:
        if self.fallback == "thread" and self.pool(job):
            return True
        yield from job.give_up_steps()
        return False

    def _sending(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._sender is None:
                self._sender = ThreadPoolExecutor(2, f"mcache-{type(self).__name__}")
            return self._sender

    def _tell_once(self, name: str, why: str) -> None:
        if name not in self._told:
            self._told.add(name)
            self.failures.warning(f"refresh.local.{name}", "%s", why)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no send is pending and the fallback pool is idle (tests, demos)."""
        with self._idle:
            sent = self._idle.wait_for(lambda: self._sends == 0, timeout)
        return sent and self.pool.wait_idle(timeout)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the sender and the fallback pool."""
        with self._lock:
            sender, self._sender = self._sender, None
        if sender is not None:
            sender.shutdown(wait=wait)
        self.pool.shutdown(wait=wait)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(queue={self.queue!r}, fallback={self.fallback!r})"
