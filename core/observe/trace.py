"""Per-key event trace: one letter per logical event.

A debugging aid from memcached practice: ``tail -f`` on a key's trace file shows its life
as a string such as ``MLWUHHHHHMLLH`` (:data:`LETTERS`), so a stampede or a lock never
released stands out at a glance. Events go to ``{trace_dir}/{key}.trace`` and to the
``mcache.trace`` logger at DEBUG; off, each costs one attribute check.

Tracing must be cheap enough to leave on for a hot key (A. Smirnov, HighLoad++ 2008): a
key's file is kept open (the most recently traced :data:`OPEN_FILES` of them) and each
letter is one ``write`` to it, appended (``O_APPEND``) so that threads, forked children
and other processes tracing the same key interleave whole letters. Nothing is buffered,
so ``tail -f`` sees each letter at once and nothing is lost at exit. A file is opened
again after :data:`REOPEN_SECONDS`, so a trace directory deleted under a running site
comes back; a trace that cannot be written is logged once a minute and dropped, never
failing the request it describes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from mcache.clock import Clock, system_clock
from mcache.logs import FailureLog

__all__ = ["LEGEND", "LETTERS", "OPEN_FILES", "REOPEN_SECONDS", "Tracer"]

OPEN_FILES = 32
"""How many keys' trace files a tracer keeps open at once (the least recently traced closes)."""
REOPEN_SECONDS = 1.0
"""How long a trace file is written through one descriptor before it is opened again."""

LETTERS = {
    "M": "miss or stale read",
    "L": "lock attempt",
    "W": "freshly built entry written",
    "U": "unlock",
    "H": "hit",
    "S": "stale value served",
    "E": "build error",
    "X": "built entry not written: its key changed during the build",
    "B": "a background rebuild failed: its lock is kept for a back-off",
}
"""Every event letter a trace holds, and what it means (docs/reference/trace-letters.md)."""
LEGEND = ", ".join(f"{letter} {meaning.split(':')[0]}" for letter, meaning in LETTERS.items())
"""The letters in one line, as the stats commands print them beside a trace."""

logger = logging.getLogger("mcache.trace")
logging_events: Callable[[], bool] = functools.partial(logger.isEnabledFor, logging.DEBUG)
"""Whether the ``mcache.trace`` logger takes events now: the logger's own cached answer,
through no frame of ours (it is asked on every hit)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]")


class Tracer:
    """Append event letters per key to files and/or the ``mcache.trace`` logger."""

    def __init__(
        self, trace_dir: str | os.PathLike[str] | None = None, clock: Clock = system_clock
    ) -> None:
        """``clock``: when a key's file is reopened is counted on it (the cache's)."""
        self.clock = clock
        self.trace_dir = Path(trace_dir) if trace_dir else None
        self._lock = threading.Lock()
        self._open: OrderedDict[str, tuple[int, float]] = OrderedDict()  # key: (fd, reopen at)
        self._failures = FailureLog(logger, clock=clock)
        if self.trace_dir is not None:
            self.trace_dir.mkdir(parents=True, exist_ok=True)
            weakref.finalize(self, _close_all, self._open)
            _watch_forks(self)

    def path(self, key: str) -> Path:
        """Return the trace file of ``key`` (requires ``trace_dir``)."""
        assert self.trace_dir is not None
        return self.trace_dir / f"{_UNSAFE.sub('_', key)[:200]}.trace"

    def event(self, key: str, letter: str) -> None:
        """Record ``letter`` for ``key``."""
        if self.trace_dir is not None:
            with self._lock:
                self._append(key, letter.encode("ascii"))
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s", key, letter)

    def _append(self, key: str, letter: bytes) -> None:
        """Write ``letter`` to ``key``'s open file (opened or reopened as needed); a failure
        is logged and the letter dropped. Called under the lock."""
        opened = self._open.get(key)
        now = self.clock.monotonic()
        try:
            if opened is None or opened[1] < now:
                if opened is not None:
                    del self._open[key]
                    _close(opened[0])
                opened = self._open[key] = (self._open_file(key), now + REOPEN_SECONDS)
                if len(self._open) > OPEN_FILES:
                    _close(self._open.popitem(last=False)[1][0])
            else:
                self._open.move_to_end(key)
            os.write(opened[0], letter)
        except OSError as error:
            dropped = self._open.pop(key, None)
            if dropped is not None:
                _close(dropped[0])
            self._failures.log(
                "trace", "trace of %s not written to %s: %s", key, self.trace_dir, error
            )

    def _open_file(self, key: str) -> int:
        """Open ``key``'s trace file for appending, making the directory again if it went."""
        path = self.path(key)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(path, flags, 0o644)

    def close(self) -> None:
        """Close the trace files kept open (the next event opens its file again)."""
        with self._lock:
            _close_all(self._open)

    def forked(self) -> None:
        """In a forked child: a lock of its own (the parent's may have been held by a thread
        the child does not have), and files of its own, opened on its first events."""
        self._lock = threading.Lock()
        _close_all(self._open)

    def find(self, readable: str) -> dict[str, str]:
        """Return the letters of every traced key whose readable part ends with ``readable``.

        A page's readable part is ``view.<name>.<scheme>.<host>.<path>``, a fragment's
        ``block.<name>`` (``jinja.<name>`` in Flask): a path or a fragment name finds every
        variant of its keys without knowing their digests.
        """
        if self.trace_dir is None:
            return {}
        wanted = re.compile(re.escape(_UNSAFE.sub("_", readable)) + r"_[0-9a-f]{32}\.trace$")
        return {
            path.name[: -len(".trace")]: path.read_text(encoding="ascii")
            for path in sorted(self.trace_dir.glob("*.trace"))
            if wanted.search(path.name)
        }

    def last_written(self, key: str) -> float | None:
        """Return when ``key``'s last event was recorded (seconds since the epoch), or None."""
        try:
            return self.path(key).stat().st_mtime
        except (AssertionError, FileNotFoundError):
            return None

    def read(self, key: str) -> str:
        """Return the letters recorded for ``key`` so far."""
        try:
            return self.path(key).read_text(encoding="ascii")
        except FileNotFoundError:
            return ""


def _close_all(files: OrderedDict[str, tuple[int, float]]) -> None:
    """Close every descriptor in ``files`` and forget them."""
    while files:
        _close(files.popitem()[1][0])


def _close(fd: int) -> None:
    """Close ``fd``; one closed already (by a library, under us) is no failure."""
    with contextlib.suppress(OSError):
        os.close(fd)


_TRACERS: weakref.WeakSet[Tracer] = weakref.WeakSet()
_WATCHING: list[bool] = []


def _watch_forks(tracer: Tracer) -> None:
    """Have a forked child's tracers start with a fresh lock and no file of the parent's."""
    _TRACERS.add(tracer)
    if not _WATCHING and hasattr(os, "register_at_fork"):
        _WATCHING.append(True)
        os.register_at_fork(after_in_child=_forked)


def _forked() -> None:
    for tracer in list(_TRACERS):
        tracer.forked()
