"""Rebuild jobs as data: what a task-queue worker needs to rebuild an entry.

A closure cannot be sent to another process, so a rebuild that may leave the
process is described by names and data (see "Jobs are data" in
docs/how-to/task-queue.md), including the fresh-until time of the stale entry
the enqueuer saw, for the worker's control check.

A builder is *addressable* when importing its path gives it back: a
module-level function, a ``functools.partial`` of one, or a ``@cache.cached``
function (the wrapper names the plain function in ``__mcache_uncached__``).
"""

from __future__ import annotations

import base64
import functools
import json
import pkgutil
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

__all__ = ["Address", "Job", "address_of", "in_process", "resolve"]

VERSION = 1


class Address(NamedTuple):
    """Where a builder lives, and the arguments to call it with."""

    path: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


resolve = pkgutil.resolve_name
"""Import ``"module:qualified.name"`` and return the object it names."""


def address_of(build: Any) -> Address | None:
    """Return where ``build`` can be imported from, with its bound arguments; None if nowhere."""
    function, args, kwargs = build, (), {}
    while isinstance(function, functools.partial):
        args, kwargs = function.args + args, {**function.keywords, **kwargs}
        function = function.func
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None  # a lambda, a closure, a class made in a function
    try:
        found = resolve(f"{module}:{qualname}")
    except Exception:
        return None
    if found is function or getattr(found, "__mcache_uncached__", None) is function:
        return Address(f"{module}:{qualname}", tuple(args), dict(kwargs))
    return None


def in_process(build: Any, reason: str) -> Any:
    """Mark ``build`` as one that must run in the process that made it (it needs its request).

    A queue refresher runs it on the process's own threads, and says ``reason``
    once, instead of explaining how to make it addressable.
    """
    marked = functools.partial(build)
    marked.__mcache_local__ = reason  # type: ignore[attr-defined]
    return marked


def plain_function(found: Any) -> Any:
    """Return the function a path names: through a cached wrapper, the function it wraps."""
    return getattr(found, "__mcache_uncached__", found)


@dataclass(frozen=True)
class Job:
    """One rebuild, as a task queue carries it (JSON)."""

    cache: str
    """How the worker finds the cache: ``django:<alias>``, ``flask``, ``name:<name>``."""
    builder: str
    args: str
    """``[args, kwargs]`` encoded with the cache's codec, base64 (signed when the codec signs)."""
    key: str
    tags: list[str]
    options: dict[str, Any]
    lock: str
    token: str
    seen: int
    """fresh-until (ms) of the stale entry the enqueuer saw; 0 when there was none."""
    newest: int = 0
    """The newest tag version the enqueuer read with it: the worker's build reads the
    primary database while it is recent (:mod:`mcache.engine.fresh_reads`)."""

    def to_json(self) -> str:
        """Return the job as the JSON text a queue carries."""
        return json.dumps({"v": VERSION, **asdict(self)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Job:
        """Read a job; a job of another version is refused with a clear error."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.pop("v", None) != VERSION:
            raise ValueError(f"not an mcache rebuild job of version {VERSION}: {text[:80]!r}")
        return cls(**data)

    @staticmethod
    def encode_arguments(encoded: bytes) -> str:
        """Return codec bytes as text a JSON queue message can carry."""
        return base64.b64encode(encoded).decode("ascii")

    def arguments(self) -> bytes:
        """Return the codec bytes of ``[args, kwargs]``."""
        return base64.b64decode(self.args)
