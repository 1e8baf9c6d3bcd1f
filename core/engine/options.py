"""Checking a ``Cache``'s settings and a call's options, once, with messages that name the fix."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable

from mcache.engine.call import BuildOptions
from mcache.errors import ConfigError
from mcache.memo import BoundedMemo

__all__ = [
    "CallOptions",
    "Jitter",
    "TagsArg",
    "build_options",
    "call_option_names",
    "check_settings",
    "counted_name",
    "duration",
    "seconds",
    "spread",
    "tag_list",
]

CALL_OPTIONS = (
    "ttl",
    "stale_ttl",
    "wait",
    "lock_timeout",
    "refresh",
    "early_refresh",
    "stale_wait",
)

TagsArg = Iterable[str] | str | None


_WORD = re.compile(r"[A-Za-z0-9_-]{1,40}")


def check_settings(stats_interval: float, trace_dir: object, clock: object) -> None:
    """Refuse a ``Cache``'s reporting settings and clock at construction, not at the first
    flush or the first wait."""
    missing = [name for name in ("time", "time_ms", "monotonic") if not hasattr(clock, name)]
    if missing:
        raise ConfigError(
            f"clock must have time(), time_ms() and monotonic() (as mcache.SystemClock and"
            f" mcache.FakeClock do), {clock!r} lacks {', '.join(f'{n}()' for n in missing)}"
        )
    if not isinstance(stats_interval, int | float) or isinstance(stats_interval, bool):
        raise ConfigError(f"stats_interval must be a number of seconds, got {stats_interval!r}")
    if not stats_interval > 0:  # 0 would flush the counters inside every request
        raise ConfigError(f"stats_interval must be > 0 seconds, got {stats_interval!r}")
    if trace_dir is not None and not isinstance(trace_dir, str | os.PathLike):
        raise ConfigError(f"trace_dir must be a directory path or None, got {trace_dir!r}")


def counted_name(name: object) -> str:
    """Return a ``counted_as`` name, checked: "" (counted with the namespace) or a word."""
    if not isinstance(name, str) or (name and not _WORD.fullmatch(name)):
        raise ConfigError(
            f"counted_as must be a name of letters, digits, '_' or '-' (e.g. 'sessions'),"
            f" or '' to count with the namespace, got {name!r}"
        )
    return name


def duration(value: float, name: str) -> float:
    """Return a duration in seconds, fractions kept; reject what is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be >= 0 seconds (0 means no expiry), got {value!r}")
    return float(value)


def seconds(value: float, name: str) -> int:
    """Return a duration in whole seconds, rounding fractions up so nothing ends early."""
    return math.ceil(duration(value, name))


Jitter = float | tuple[float, float]
"""``jitter``: a fraction ``f`` (fresh for ``ttl`` less up to ``f`` of it: never past the
declared ``ttl``), or ``(down, up)`` (between ``ttl * (1 - down)`` and ``ttl * (1 + up)``)."""


def spread(jitter: object) -> tuple[float, float]:
    """Return ``jitter`` as ``(down, up)`` fractions of a ttl; refuse what is not one."""
    if isinstance(jitter, list | tuple) and len(jitter) == 2:
        down, up = jitter
    else:
        down, up = jitter, 0.0
    if not all(isinstance(f, int | float) and not isinstance(f, bool) for f in (down, up)) or not (
        0 <= down < 1 and 0 <= up <= 1
    ):
        raise ConfigError(
            f"jitter must be a fraction in [0, 1) (fresh times shortened by up to it), or a"
            f" pair (down, up) of them (spread both ways, e.g. (0.2, 0.2)), got {jitter!r}"
        )
    return float(down), float(up)


def build_options(
    ttl: int,
    stale_ttl: float | None,
    lock_timeout: int,
    wait: float,
    refresh: str,
    early_refresh: float | bool,
    jitter: Jitter,
    stale_wait: float,
) -> BuildOptions:
    """Return checked ``get_or_build`` options: a mistake fails where it was written."""
    if refresh not in {"sync", "background"}:
        raise ConfigError(f"refresh must be 'sync' or 'background', got {refresh!r}")
    jitter = spread(jitter)
    if seconds(lock_timeout, "lock_timeout") < 1:
        raise ConfigError("lock_timeout must be >= 1 second: a lock must outlive its build")
    for name, wait_for in (("wait", wait), ("stale_wait", stale_wait)):
        if isinstance(wait_for, bool) or not isinstance(wait_for, int | float) or wait_for < 0:
            raise ConfigError(f"{name} must be a number of seconds >= 0, got {wait_for!r}")
    beta = 1.0 if early_refresh is True else float(early_refresh or 0.0)
    if beta < 0:
        raise ConfigError(f"early_refresh must be True/False or a beta >= 0, got {early_refresh!r}")
    stale = ttl if stale_ttl is None else seconds(stale_ttl, "stale_ttl")
    return BuildOptions(
        ttl, stale, math.ceil(lock_timeout), float(wait), refresh, beta, jitter, float(stale_wait)
    )


_CHECKED_TAGS: BoundedMemo[tuple[str, ...], list[str]] = BoundedMemo(4096)


def tag_list(tags: TagsArg) -> list[str]:
    """Return tag names as a list without repeats (one name stands for one name, not letters).

    The list may be shared between calls (callers only read it): the same few
    tag lists come with every hit, so each is checked once.
    """
    if tags is None:
        return []
    if type(tags) is list or type(tags) is tuple:
        key = tuple(tags)  # type: ignore[arg-type]
        try:
            names = _CHECKED_TAGS.get(key)
        except TypeError:  # something unhashable in it: no tag name, as the check says
            return _checked_tag_list(tags)
        if names is None:
            names = _checked_tag_list(tags)
            _CHECKED_TAGS.remember(key, names)
        return names
    return _checked_tag_list(tags)


def _checked_tag_list(tags: Iterable[str] | str) -> list[str]:
    if isinstance(tags, str):
        return [tags]
    if type(tags) in (list, tuple) and len(set(tags)) == len(tags):
        names = list(tags)
    else:
        names = list(dict.fromkeys(tags))
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(f"tags must be non-empty strings, got {name!r}")
    return names


def call_option_names(options: dict[str, object]) -> dict[str, object]:
    """Return ``get_or_build``'s per-call options from ``options``; refuse any other name."""
    unknown = set(options) - set(CALL_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown option(s) {', '.join(sorted(unknown))}; valid: {', '.join(CALL_OPTIONS)}"
        )
    return {name: options.get(name) for name in CALL_OPTIONS}


class CallOptions:
    """A cache's ``get_or_build`` options for each call: its defaults, or what the call
    gives, checked the first time that set of options is seen.

    A call site passes the same options on every call (``ttl=60`` in a decorator, a view,
    a template tag), so a hit looks its options up instead of checking and building them
    again. The lookup key carries each value's type: ``True`` equals ``1`` as a dict key,
    and is a mistake as a ``ttl`` where ``1`` is not.
    """

    __slots__ = ("_seen", "defaults", "stale_ttl")

    def __init__(self, defaults: BuildOptions, stale_ttl: float | None) -> None:
        self.defaults = defaults
        self.stale_ttl = stale_ttl
        self._seen: BoundedMemo[tuple[object, ...], BuildOptions] = BoundedMemo(256)

    def resolve(
        self,
        ttl: float | None,
        stale_ttl: float | None,
        wait: float | None,
        lock_timeout: int | None,
        refresh: str | None,
        early_refresh: float | bool | None,
        stale_wait: float | None,
    ) -> BuildOptions:
        """Return a call's options: what it gives, checked, and the cache's for the rest (a
        ``ttl`` without ``stale_ttl`` takes the cache's ``stale_ttl`` if set, else that
        ``ttl``); a set already seen from the memo."""
        if (
            ttl is None
            and stale_ttl is None
            and wait is None
            and lock_timeout is None
            and refresh is None
            and early_refresh is None
            and stale_wait is None
        ):
            return self.defaults  # the usual call: it sets nothing
        given = (ttl, stale_ttl, wait, lock_timeout, refresh, early_refresh, stale_wait)
        key = (*given, *map(type, given))
        try:
            options = self._seen.get(key)
        except TypeError:  # an unhashable value: no option takes one, as the check says
            options = key = None
        if options is not None:
            return options
        d = self.defaults
        options = build_options(
            d.ttl if ttl is None else seconds(ttl, "ttl"),
            self.stale_ttl if stale_ttl is None else stale_ttl,
            d.lock_timeout if lock_timeout is None else lock_timeout,
            d.wait if wait is None else wait,
            d.refresh if refresh is None else refresh,
            d.early_refresh if early_refresh is None else early_refresh,
            d.jitter,
            d.stale_wait if stale_wait is None else stale_wait,
        )
        if key is not None:
            self._seen.remember(key, options)
        return options
