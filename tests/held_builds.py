"""A build held open in a thread of its own, for tests that interleave callers by hand."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from mcache import Cache


@dataclass
class HeldBuild:
    """``get_or_build`` of ``key`` running in a thread, its builder waiting to be let go."""

    thread: threading.Thread
    finish: threading.Event = field(default_factory=threading.Event)

    def let_go(self, seconds: float = 10) -> None:
        """Let the builder return, and wait for the call to end."""
        self.finish.set()
        self.thread.join(seconds)


def hold_build(
    cache: Cache, key: str, value: Any, tags: list[str], options: dict[str, Any]
) -> HeldBuild:
    """Start ``cache.get_or_build(key, …, tags=tags, **options)`` in a thread whose builder
    returns ``value`` once let go; return when it has begun (the key's lock or lease held)."""
    began = threading.Event()
    finish = threading.Event()

    def build() -> Any:
        began.set()
        finish.wait(10)
        return value

    thread = threading.Thread(target=lambda: cache.get_or_build(key, build, tags=tags, **options))
    thread.start()
    assert began.wait(10), f"the build of {key!r} did not begin"
    return HeldBuild(thread, finish)
