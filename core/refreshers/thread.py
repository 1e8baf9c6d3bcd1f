"""The in-process refresher: a bounded pool of threads, the default."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from mcache.logs import FailureLog

__all__ = ["ThreadPoolRefresher"]


class ThreadPoolRefresher:
    """A bounded in-process pool for background rebuilds.

    When ``max_queue`` jobs are already waiting the job is refused: the caller
    releases its lock and serves the stale value, and a later request retries.
    Refusing rather than rebuilding in the request keeps latency flat exactly
    when the machine is too busy to keep up.
    """

    def __init__(self, max_workers: int = 4, max_queue: int = 64) -> None:
        self.max_workers = max_workers
        self.max_queue = max_queue
        self._executor: ThreadPoolExecutor | None = None
        self._slots = threading.BoundedSemaphore(max_workers + max_queue)
        self._lock = threading.Lock()
        self._idle = threading.Condition()
        self._in_flight = 0
        self.failures = FailureLog()

    def __call__(self, job: Callable[[], object]) -> bool:
        """Queue ``job`` unless the queue is full."""
        if not self._slots.acquire(blocking=False):
            self.failures.warning("refresh.full", "background refresh queue full; serving stale")
            return False
        context = contextvars.copy_context()  # the caller's language, request state, …
        with self._idle:
            self._in_flight += 1
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.max_workers, "mcache-refresh")
            self._executor.submit(self._run, context, job)
        return True

    def _run(self, context: contextvars.Context, job: Callable[[], object]) -> None:
        try:
            context.run(job)
        except Exception as error:
            self.failures.warning("refresh.error", "background refresh failed: %s", error)
        finally:
            self._slots.release()
            with self._idle:
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is queued or running; return whether that happened in time.

        For a test or a demo that counts what the background rebuilds did; new
        jobs are still accepted meanwhile.
        """
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the pool, waiting for running jobs when ``wait``."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait)
