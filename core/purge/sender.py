"""Purges off the request path: batched, retried, and logged once per interval.

``invalidate(tag)`` must not wait on a CDN's API, nor fail a save because Varnish is
down. :meth:`Purger.purge` only notes the tags' keys and wakes one sender thread,
which waits ``delay`` seconds so the tags of one save (or of several saves in a
burst) go out in as few requests as each target takes, then sends them. A target that
fails keeps its keys and is tried again after a back-off (doubling to ``max_backoff``);
its failures are logged once per interval, never raised. Purges are idempotent, so a
batch sent twice after a timeout does no harm; one never sent would leave a stale
page in front, so a process that exits waits up to ``exit_wait`` seconds for its
purges to go out.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence

from mcache.logs import FailureLog

from .surrogate import surrogate_key
from .targets import PurgeRequest, PurgeTarget, batches

__all__ = ["PurgeFailed", "Purger", "send"]


class PurgeFailed(Exception):
    """A purge request was refused or could not be sent."""


def send(request: PurgeRequest, timeout: float) -> None:
    """Send ``request``; raise :class:`PurgeFailed` unless the target accepted it."""
    http = urllib.request.Request(
        request.url, data=request.body, headers=request.headers, method=request.method
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        raise PurgeFailed(f"{request.method} {request.url}: HTTP {error.code}") from None
    except (OSError, ValueError) as error:
        raise PurgeFailed(f"{request.method} {request.url}: {error}") from None
    if body[:1] == b"{" and json.loads(body).get("success") is False:  # Cloudflare's way
        raise PurgeFailed(f"{request.method} {request.url}: refused: {body[:200]!r}")


class _Target:
    """One target's keys waiting to go out, and when it may be tried again."""

    def __init__(self, target: PurgeTarget) -> None:
        self.target = target
        self.pending: dict[str, None] = {}
        self.retry_at = 0.0
        self.backoff = 0.0


class Purger:
    """Sends the keys of invalidated tags to each target, from a thread of its own."""

    def __init__(
        self,
        targets: PurgeTarget | Sequence[PurgeTarget],
        *,
        delay: float = 0.05,
        timeout: float = 5.0,
        max_backoff: float = 30.0,
        max_pending: int = 100_000,
        exit_wait: float = 2.0,
        failures: FailureLog | None = None,
        sender: Callable[[PurgeRequest, float], None] = send,
    ) -> None:
        listed = [targets] if hasattr(targets, "requests") else list(targets)  # type: ignore[arg-type]
        self._targets = [_Target(target) for target in listed]
        self.delay, self.timeout, self.max_backoff = delay, timeout, max_backoff
        self.max_pending, self.exit_wait = max_pending, exit_wait
        self.failures = failures or FailureLog()
        self._send = sender
        self._lock = threading.Condition()
        self._busy = False
        self._pid = 0
        self.sent = 0
        """Requests the targets accepted (for tests and stats)."""

    # -- the caller's side ------------------------------------------------------------------

    def purge(self, tags: Iterable[str]) -> None:
        """Have every target purge ``tags`` soon; returns at once."""
        keys = [surrogate_key(tag) for tag in tags]
        if not keys:
            return
        with self._lock:
            self._started()
            for state in self._targets:
                state.pending.update(dict.fromkeys(keys))
                if len(state.pending) > self.max_pending:
                    dropped = len(state.pending) - self.max_pending
                    for key in list(state.pending)[:dropped]:
                        del state.pending[key]
                    self.failures.warning(
                        "purge.dropped", "%d purge keys dropped: the target is far behind", dropped
                    )
            self._lock.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every key noted so far to go out; return
        whether it did (a failing target's keys stay pending)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._busy or any(state.pending for state in self._targets):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.notify_all()
                self._lock.wait(min(left, 0.05))
        return True

    def close(self) -> None:
        """Stop sending: what is pending is dropped (a test's purger, a cache put away)."""
        with self._lock:
            self._pid = 0
            for state in self._targets:
                state.pending.clear()
            self._lock.notify_all()
        atexit.unregister(self.flush)

    # -- the sender thread ------------------------------------------------------------------

    def _started(self) -> None:
        """Start the sender in this process (again after a fork: threads do not follow)."""
        if self._pid == os.getpid():
            return
        if self._pid:  # a forked child: what the parent had pending is the parent's to send
            for state in self._targets:
                state.pending.clear()
        self._pid = os.getpid()
        self._busy = False
        threading.Thread(target=self._run, name="mcache-purge", daemon=True).start()
        atexit.register(self.flush, self.exit_wait)

    def _run(self) -> None:
        pid = os.getpid()
        while True:
            with self._lock:
                while self._pid == pid and not self._due():
                    self._lock.wait(self._wait())
                if self._pid != pid:  # closed
                    return
                self._busy = True
            time.sleep(self.delay)  # let the rest of a save's tags join this batch
            try:
                for state in self._targets:
                    self._send_pending(state)
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()

    def _due(self) -> bool:
        now = time.monotonic()
        return any(state.pending and state.retry_at <= now for state in self._targets)

    def _wait(self) -> float | None:
        waiting = [state.retry_at for state in self._targets if state.pending]
        return max(0.0, min(waiting) - time.monotonic()) if waiting else None

    def _send_pending(self, state: _Target) -> None:
        with self._lock:
            if not state.pending or state.retry_at > time.monotonic():
                return
            keys, state.pending = list(state.pending), {}
        runs = list(batches(keys, state.target.batch, 1 << 20))
        for index, run in enumerate(runs):
            try:
                for request in state.target.requests(run):
                    self._send(request, self.timeout)
                    self.sent += 1
            except PurgeFailed as error:
                unsent = dict.fromkeys(key for later in runs[index:] for key in later)
                with self._lock:  # kept ahead of keys noted meanwhile
                    state.pending = {**unsent, **state.pending}
                    state.backoff = min(self.max_backoff, max(0.5, state.backoff * 2))
                    state.retry_at = time.monotonic() + state.backoff
                self.failures.warning(
                    "purge.failed",
                    "a purge failed, tried again in %.1f s: %s",
                    state.backoff,
                    error,
                )
                return
        state.backoff = 0.0
