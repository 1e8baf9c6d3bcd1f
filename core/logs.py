"""Rate-limited failure logging.

A cache failure must never flood the log: a dead memcached under 2,000 requests a
second would otherwise write 2,000 identical lines a second. Each failure *kind*
is logged at most once per interval, with a count of what was suppressed.
"""

from __future__ import annotations

import logging
import threading

from mcache.clock import Clock, system_clock

__all__ = ["FailureLog", "logger"]

logger = logging.getLogger("mcache")


class FailureLog:
    """Log each kind of event at most once per ``interval`` seconds (at WARNING by default),
    counted on ``clock`` (a simulation's moves it)."""

    def __init__(
        self,
        log: logging.Logger | None = None,
        interval: float = 60.0,
        level: int = logging.WARNING,
        clock: Clock = system_clock,
    ) -> None:
        self._log = log or logger
        self._clock = clock
        self._interval = interval
        self._level = level
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def log(self, kind: str, message: str, *args: object, exc: BaseException | None = None) -> bool:
        """Log ``message`` at this log's level unless ``kind`` was logged within the interval;
        return whether it was."""
        now = self._clock.monotonic()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self._interval:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return False
            self._last[kind] = now
            suppressed = self._suppressed.pop(kind, 0)
        if suppressed:
            message += " (%d more like it not logged in the last interval)"
            args = (*args, suppressed)
        self._log.log(self._level, message, *args, exc_info=exc)
        return True

    warning = log  # the default level is WARNING

    def reset(self) -> None:
        """Forget what was logged, so the next failure of each kind is logged again."""
        with self._lock:
            self._last.clear()
            self._suppressed.clear()
