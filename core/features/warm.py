"""Warm-up: build a list of cached functions' results before visitors ask for them.

``manage.py mcache_warm`` and ``flask mcache warm`` rebuild each ``(cached_function,
args[, kwargs])`` a callable of the site's yields, now (``cache.refresh``) or, with
``queue``, on the cache's refresher under its lock (docs/how-to/task-queue.md).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from mcache.errors import ConfigError
from mcache.model.jobs import resolve

__all__ = ["Progress", "items_of", "warm", "warm_from"]


def items_of(path: str) -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    """Call the callable at ``path`` (``"package.module.function"``) and read what it yields."""
    module, _, name = path.rpartition(".")
    try:
        source = resolve(f"{module}:{name}") if module else None
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"cannot import {path!r}: {error}") from None
    if not callable(source):
        raise ConfigError(f"{path!r} must name a callable yielding (cached_function, args)")
    return [_item(found, path) for found in source()]


def _item(found: Any, path: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    if type(found) is tuple and len(found) in (2, 3) and hasattr(found[0], "refresh"):
        return found[0], tuple(found[1]), dict(found[2]) if len(found) == 3 else {}
    raise ConfigError(
        f"{path} yielded {found!r}; yield (cached_function, args) or"
        " (cached_function, args, kwargs), the function decorated with @cache.cached"
    )


def warm(
    items: Iterable[tuple[Any, tuple[Any, ...], dict[str, Any]]],
    *,
    queue: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Counter[str]:
    """Build (or, with ``queue``, queue) each item; return how many were built, queued, …

    ``progress`` is called after each item with its outcome: ``built``,
    ``queued``, ``busy`` (another caller holds its lock: it is being built) or
    ``failed`` (the builder raised; the others go on).
    """
    outcomes: Counter[str] = Counter()
    for function, args, kwargs in items:
        try:
            outcome = _enqueue(function, args, kwargs) if queue else _build(function, args, kwargs)
        except Exception:
            outcome = "failed"
        outcomes[outcome] += 1
        if progress is not None:
            progress(outcome)
    return outcomes


def _build(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    function.refresh(*args, **kwargs)
    return "built"


def _memoized(function: Any) -> Any:
    """Return the ``Memoized`` a cached function is on its cache of now (a framework's
    late-bound function has one per cache: see ``mcache.features.memoize.LateBound``)."""
    for_cache = getattr(function, "for_cache", None)
    return for_cache() if for_cache is not None else function


def _enqueue(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    memoized = _memoized(function)
    cache = memoized.cache
    return cache.builder.rebuilds.enqueue(  # type: ignore[no-any-return]
        cache.key(*memoized.key(*args, **kwargs)),
        functools.partial(memoized.uncached, *args, **kwargs),
        memoized.tag_list(args, kwargs),
        cache.call_options(ttl=memoized.ttl, **memoized.options),
    )


class Progress:
    """Shows a warm-up's progress: rich's bar on a terminal, a line per tenth elsewhere."""

    def __init__(self, total: int, write: Callable[[str], None], terminal: bool) -> None:
        self.total, self.write, self.done = total, write, 0
        self.outcomes: Counter[str] = Counter()
        self._bar: Any = None
        if terminal:
            try:
                from rich.progress import Progress as Bar
            except ImportError:
                pass
            else:
                self._bar = Bar(transient=False)
                self._task = self._bar.add_task("warming", total=total)
                self._bar.start()

    def __call__(self, outcome: str) -> None:
        """Count one item's outcome."""
        self.done += 1
        self.outcomes[outcome] += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1)
        elif self.done == self.total or self.done * 10 // max(self.total, 1) != (
            (self.done - 1) * 10 // max(self.total, 1)
        ):
            self.write(f"warm: {self.done}/{self.total} {self.summary()}")

    def summary(self) -> str:
        """Return the outcomes so far, e.g. ``built 37, busy 1``."""
        return ", ".join(f"{name} {count}" for name, count in sorted(self.outcomes.items()))

    def close(self) -> None:
        """Stop the bar, if there is one."""
        if self._bar is not None:
            self._bar.stop()


def warm_from(source: str, queue: bool, write: Callable[[str], None], terminal: bool) -> Progress:
    """What ``mcache_warm`` and ``flask mcache warm`` run: read, warm, wait; return the outcome.
    Raises :class:`ConfigError` for an unusable ``source``; an in-process refresher's work
    is finished before returning."""
    items = items_of(source)
    progress = Progress(len(items), write, terminal)
    try:
        warm(items, queue=queue, progress=progress)
    finally:
        progress.close()
    for function, _args, _kwargs in items[:1]:
        cache = _memoized(function).cache
        wait_idle = getattr(cache.refresher, "wait_idle", None)
        if wait_idle is not None:
            wait_idle(600)
    write(f"warmed {len(items)}: {progress.summary() or 'nothing to do'}")
    return progress
