"""Purges off the request path: batched, retried, repeated once, and logged once per interval.

``invalidate(tag)`` must not wait on a CDN's API, nor fail a save because Varnish is
down. :meth:`Purger.purge` only notes the tags' keys and wakes one sender thread,
which waits ``delay`` seconds so the tags of one save (or of several saves in a
burst) go out in as few requests as each target takes, then sends them. A target that
fails keeps its keys and is tried again after a back-off (doubling to ``max_backoff``),
or after the wait a rate-limited API asks for in ``Retry-After`` when that is longer;
its failures are logged once per interval, never raised, and no failure stops the
thread.

Each key is purged a second time ``repeat_after`` seconds after the first: a page
whose build began before the bump, or another process's copy kept for
``tag_cache_ttl`` or ``near_ttl``, can still hand the old page to a cache in front
just after the first purge. Purges are idempotent, so a batch sent twice does no
harm; one never sent would leave a stale page in front, so a process that exits
waits up to ``exit_wait`` seconds for its purges to go out (and logs what it drops).
"""

from __future__ import annotations

import atexit
import email.utils
import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Iterable, Sequence

from mcache.logs import FailureLog

from .surrogate import surrogate_key
from .targets import PurgeRequest, PurgeTarget, batches

__all__ = ["PurgeFailed", "Purger", "send"]


MAX_RETRY_AFTER = 300.0
"""The longest ``Retry-After`` honoured, in seconds: a bogus date must not stall purges."""


class PurgeFailed(Exception):
    """A purge request was refused or could not be sent; ``retry_after``: the seconds the
    target asked to wait before the next request (a 429 or 503 with ``Retry-After``)."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(value: str | None, now: float) -> float:
    """Return the seconds a ``Retry-After`` header asks for (RFC 9110: delay-seconds or
    an HTTP-date; ``now``: ``time.time()``), 0 if there is none or it cannot be read,
    at most :data:`MAX_RETRY_AFTER`."""
    if not value:
        return 0.0
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - now
        except (TypeError, ValueError):
            return 0.0
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: a purge API's answer is its own, and its token goes nowhere else."""

    def redirect_request(self, *args: object) -> None:  # type: ignore[override]
        return None


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())
"""For a Varnish beside the site: never through a proxy the environment names."""
_VIA_PROXY = urllib.request.build_opener(_NoRedirects())
"""For a CDN's API: through the environment's proxy, where one is set."""


def send(request: PurgeRequest, timeout: float) -> None:
    """Send ``request``; raise :class:`PurgeFailed` unless the target accepted it."""
    message = urllib.request.Request(
        request.url, data=request.body, headers=request.headers, method=request.method
    )
    opener = _DIRECT if request.direct else _VIA_PROXY
    try:
        with opener.open(message, timeout=timeout) as response:
            body = response.read()
            refused = body[:1] == b"{" and json.loads(body).get("success") is False  # Cloudflare
    except urllib.error.HTTPError as error:
        wait = retry_after(error.headers.get("Retry-After"), time.time())
        raise PurgeFailed(f"{request.method} {request.url}: HTTP {error.code}", wait) from None
    except (OSError, ValueError, http.client.HTTPException) as error:
        raise PurgeFailed(f"{request.method} {request.url}: {error!r}") from None
    if refused:
        raise PurgeFailed(f"{request.method} {request.url}: refused: {body[:200]!r}")


class _Target:
    """One target's keys waiting to go out, those to send again, and when to try next."""

    def __init__(self, target: PurgeTarget) -> None:
        self.target = target
        self.pending: dict[str, None] = {}
        self.again: dict[str, float] = {}
        """Keys sent once, and when to send them the second time."""
        self.retry_at = 0.0
        self.backoff = 0.0

    def due_again(self, now: float) -> list[str]:
        return [key for key, when in self.again.items() if when <= now]


def _next_send(state: _Target) -> float | None:
    """Return when ``state`` next has something to send (its back-off holding both its
    pending keys and its repeats), or None."""
    times = [state.retry_at] if state.pending else []
    if state.again:
        times.append(max(state.retry_at, min(state.again.values())))
    return min(times) if times else None


_LIVE: weakref.WeakSet[Purger] = weakref.WeakSet()
"""The purgers of this process, for a forked child to reset (held weakly: a purger made
to check a setting at start-up is not kept alive by the fork hook)."""
_FORKS_WATCHED = threading.Event()


def _watch_forks(purger: Purger) -> None:
    _LIVE.add(purger)
    if not _FORKS_WATCHED.is_set():
        _FORKS_WATCHED.set()
        os.register_at_fork(after_in_child=_reset_in_child)


def _reset_in_child() -> None:
    for purger in list(_LIVE):
        purger._forked()


class Purger:
    """Sends the keys of invalidated tags to each target, from a thread of its own."""

    def __init__(
        self,
        targets: PurgeTarget | Sequence[PurgeTarget],
        *,
        delay: float = 0.05,
        repeat_after: float = 2.0,
        timeout: float = 5.0,
        max_backoff: float = 30.0,
        max_pending: int = 100_000,
        exit_wait: float = 2.0,
        failures: FailureLog | None = None,
        sender: Callable[[PurgeRequest, float], None] = send,
    ) -> None:
        listed = [targets] if hasattr(targets, "requests") else list(targets)  # type: ignore[arg-type]
        self._targets = [_Target(target) for target in listed]
        self.delay, self.repeat_after, self.timeout = delay, repeat_after, timeout
        self.max_backoff, self.max_pending, self.exit_wait = max_backoff, max_pending, exit_wait
        self.failures = failures or FailureLog()
        self._send = sender
        self._lock = threading.Condition()
        self._busy = False
        self._generation = 0
        """Which sender thread is the live one (0: none in this process yet)."""
        self._pid = 0
        self.sent = 0
        """Requests the targets accepted (for tests and stats)."""
        _watch_forks(self)

    # -- the caller's side ------------------------------------------------------------------

    def purge(self, tags: Iterable[str]) -> None:
        """Have every target purge ``tags`` soon (and once more later); returns at once."""
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
        """Wait up to ``timeout`` seconds for every key noted so far to go out once; return
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
            self._generation += 1  # the running thread, if any, ends at its next look
            self._pid = 0
            for state in self._targets:
                state.pending.clear()
                state.again.clear()
            self._lock.notify_all()
        atexit.unregister(self._at_exit)

    # -- the sender thread ------------------------------------------------------------------

    def _started(self) -> None:
        """Start the sender in this process, once (called holding the lock)."""
        if self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._generation += 1
        threading.Thread(
            target=self._run, args=(self._generation,), name="mcache-purge", daemon=True
        ).start()
        atexit.register(self._at_exit)

    def _forked(self) -> None:
        """In a forked child: a lock of its own, nothing of the parent's to send, no thread."""
        self._lock = threading.Condition()
        self._busy, self._pid = False, 0
        for state in self._targets:
            state.pending.clear()
            state.again.clear()
        atexit.unregister(self._at_exit)

    def _at_exit(self) -> None:
        if not self.flush(self.exit_wait):
            left = sum(len(state.pending) for state in self._targets)
            self.failures.warning("purge.exit", "%d purge keys not sent before exit", left)

    def _run(self, generation: int) -> None:
        while True:
            with self._lock:
                while self._generation == generation and not self._due():
                    self._lock.wait(self._wait())
                if self._generation != generation:  # closed, or replaced
                    return
                self._busy = True
            try:
                time.sleep(self.delay)  # let the rest of a save's tags join this batch
                for state in self._targets:
                    self._send_due(state)
            except Exception as error:  # never let the thread die: later purges need it
                self.failures.warning("purge.sender", "the purge sender failed: %r", error)
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()

    def _due(self) -> bool:
        now = time.monotonic()
        return any(when <= now for when in map(_next_send, self._targets) if when is not None)

    def _wait(self) -> float | None:
        times = [when for when in map(_next_send, self._targets) if when is not None]
        return max(0.0, min(times) - time.monotonic()) if times else None

    def _send_due(self, state: _Target) -> None:
        now = time.monotonic()
        with self._lock:
            if state.retry_at > now:
                return
            repeats = state.due_again(now)
            for key in repeats:
                del state.again[key]
            keys = list(dict.fromkeys([*state.pending, *repeats]))
            first = [key for key in state.pending if key not in state.again]
            state.pending = {}
        runs = list(batches(keys, state.target.batch, 1 << 20))
        for index, run in enumerate(runs):
            try:
                for request in state.target.requests(run):
                    self._send(request, self.timeout)
                    self.sent += 1
            except Exception as error:
                unsent = dict.fromkeys(key for later in runs[index:] for key in later)
                with self._lock:  # kept ahead of keys noted meanwhile
                    state.pending = {**unsent, **state.pending}
                    state.backoff = min(self.max_backoff, max(0.5, state.backoff * 2))
                    asked = error.retry_after if isinstance(error, PurgeFailed) else 0.0
                    wait = max(state.backoff, asked)
                    state.retry_at = time.monotonic() + wait
                    self._again(state, [key for key in first if key not in unsent])
                self.failures.warning(
                    "purge.failed",
                    "a purge failed, tried again in %.1f s: %s",
                    wait,
                    error,
                )
                return
        with self._lock:
            state.backoff = 0.0
            self._again(state, first)

    def _again(self, state: _Target, keys: list[str]) -> None:
        """Schedule ``keys``, just sent the first time, to be sent once more."""
        if self.repeat_after > 0:
            when = time.monotonic() + self.repeat_after
            for key in keys:
                state.again.setdefault(key, when)
