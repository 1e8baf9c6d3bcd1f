"""Per-key event trace: one letter per logical event.

A debugging aid from memcached practice: ``tail -f`` on a key's trace file shows its life
as a string such as ``MLWUHHHHHMLLH`` (:data:`LETTERS`), so a stampede or a lock never
released stands out at a glance. Events go to ``{trace_dir}/{key}.trace`` and to the
``mcache.trace`` logger at DEBUG; off, each costs one attribute check.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["LEGEND", "LETTERS", "Tracer"]

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

    def __init__(self, trace_dir: str | os.PathLike[str] | None = None) -> None:
        self.trace_dir = Path(trace_dir) if trace_dir else None
        if self.trace_dir is not None:
            self.trace_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def path(self, key: str) -> Path:
        """Return the trace file of ``key`` (requires ``trace_dir``)."""
        assert self.trace_dir is not None
        return self.trace_dir / f"{_UNSAFE.sub('_', key)[:200]}.trace"

    def event(self, key: str, letter: str) -> None:
        """Record ``letter`` for ``key``."""
        if self.trace_dir is not None:
            with self._lock, open(self.path(key), "a", encoding="ascii") as file:
                file.write(letter)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s", key, letter)

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
